// Starting a generation (Session, session.h): the strategy checked against
// the KV memory layout before anything changes, the generation on screen kept
// until the engine thread accepts the new one (and shown again when it
// refuses it), the Decoding panel's strategy change.
#include "app/session/session.h"

namespace kvscope {

bool Session::refused_start(const Strategy& d) {
  const auto why = strategy_refusal(d, ui.kv_layout);
  if (!why) return false;
  ui.errors.push_back(why->message + (engine.started ? " (the generation on screen goes on)" : ""));
  return true;
}

bool Session::start_generation(const std::string& prompt, const Strategy* running) {
  // Checked before anything changes: a refused start leaves the generation on
  // screen, its strategy and its controls as they were.
  if (!running && refused_start(engine.strategy)) return false;
  if (engine.started && !replaced_) {  // (a start over a pending one keeps what the first replaced)
    replaced_ = ReplacedGeneration{0,
                                   engine.tree,
                                   running ? *running : engine.strategy,
                                   engine.stop,
                                   ui.active_prompt,
                                   ui.view_step,
                                   ui.revealed_step,
                                   ui.playing};
  }
  worker_.cancel_steps();
  wcmd::Start c;
  c.prompt = prompt;
  c.options.max_new = effective_max_new();
  c.options.mode = engine.mode;
  c.options.sampler = ui.sampler;
  c.options.kv = ui.kv_layout;
  c.options.ignore_eos = ui.ignore_eos;
  c.options.branch_cache_budget = engine.tree.budget();  // branches keep their K/V under the same budget
  c.strategy = engine.strategy;
  c.request = ++engine.start_request;
  if (replaced_) replaced_->request = c.request;
  worker_.send(std::move(c));
  engine.tree.clear();
  engine.tree.start();
  engine.tree_version++;
  engine.seq = SequenceState();
  engine.seq_count = 0;
  engine.pending_forks = 0;
  engine.pending_select = -1;
  engine.pending_view_step = -1;  // a restored step belongs to the generation it was restored with
  engine.stop = StopReason::kNone;
  engine.started = false;
  engine.step_after_start = false;
  ui.active_prompt = prompt;
  ui.view_step = -1;
  ui.revealed_step = -1;
  return true;
}

// The worker refused the newest start and kept its generation running: the
// screen shows that generation again, with the strategy it runs.
void Session::restore_replaced(const WorkerEvent& ev) {
  if (!replaced_ || ev.request != replaced_->request || ev.request != engine.start_request) return;
  ReplacedGeneration r = std::move(*replaced_);
  replaced_.reset();
  engine.tree = std::move(r.tree);
  engine.tree_version++;
  engine.strategy = ui.strategy = r.strategy;
  engine.stop = r.stop;
  engine.started = true;
  ui.active_prompt = r.active_prompt;
  ui.view_step = r.view_step;
  ui.revealed_step = r.revealed_step;
  ui.playing = r.playing;
}

// The strategy within the CLI's ranges (clamp_strategy); it starts over from
// the active prompt.
void Session::set_strategy(const Strategy& d) {
  const Strategy next = clamp_strategy(d);
  if (refused_start(next)) {  // nothing changes: the Decoding panel shows the strategy still running
    ui.strategy = engine.strategy;
    return;
  }
  const Strategy running = engine.strategy;
  engine.strategy = next;
  ui.strategy = engine.strategy;
  if (const auto* p = std::get_if<strategy::Speculative>(&next)) ui.draft_dir = p->draft_dir;
  // The beams' lanes lie side by side in depth: seen from above.
  if (is_beam(next) && ui.auto_camera && ui.camera == CameraPreset::kFront) ui.camera = CameraPreset::kTop;
  if (engine.model) start_generation(ui.active_prompt.empty() ? selected_prompt() : ui.active_prompt, &running);
}

}  // namespace kvscope
