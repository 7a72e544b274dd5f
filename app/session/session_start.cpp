// Starting a generation (Session, session.h): the strategy checked against
// the KV memory layout before anything changes, the generation on screen kept
// until the engine thread accepts the new one (and shown again when it
// refuses it), the Decoding panel's strategy change.
#include <algorithm>
#include <cmath>

#include "app/session/session.h"
#include "model/decoding/setting_ranges.h"

namespace kvscope {

bool Session::refused_start(const DecodeSettings& d) {
  const std::string why = strategy_refusal(d, ui.kv_layout);
  if (why.empty()) return false;
  ui.errors.push_back(why + (engine.started ? " (the generation on screen goes on)" : ""));
  return true;
}

bool Session::start_generation(const std::string& prompt, const DecodeSettings* running) {
  // Checked before anything changes: a refused start leaves the generation on
  // screen, its strategy and its controls as they were.
  if (!running && refused_start(engine.decoding)) return false;
  if (engine.started && !replaced_) {  // (a start over a pending one keeps what the first replaced)
    replaced_ = ReplacedGeneration{0,
                                   engine.tree,
                                   running ? *running : engine.decoding,
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
  c.decoding = engine.decoding;
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
  engine.decoding = ui.decoding = r.decoding;
  engine.stop = r.stop;
  engine.started = true;
  ui.active_prompt = r.active_prompt;
  ui.view_step = r.view_step;
  ui.revealed_step = r.revealed_step;
  ui.playing = r.playing;
}

// Ranges as the CLI's --beams, --length-penalty and --speculate; the new
// strategy starts over from the active prompt.
void Session::set_decoding(const DecodeSettings& d) {
  DecodeSettings next = d;
  next.beams = static_cast<int>(std::clamp<int64_t>(d.beams, setting::kBeams.lo, setting::kBeams.hi));
  next.k = static_cast<int>(std::clamp<int64_t>(d.k, setting::kSpeculate.lo, setting::kSpeculate.hi));
  if (!std::isfinite(d.length_penalty)) next.length_penalty = 1.0f;
  next.length_penalty = static_cast<float>(
      std::clamp<double>(next.length_penalty, setting::kLengthPenalty.lo, setting::kLengthPenalty.hi));
  if (refused_start(next)) {  // nothing changes: the Decoding panel shows the strategy still running
    ui.decoding = engine.decoding;
    return;
  }
  const DecodeSettings running = engine.decoding;
  engine.decoding = next;
  ui.decoding = engine.decoding;
  // The beams' lanes lie side by side in depth: seen from above.
  if (d.mode == DecodeMode::kBeam && ui.auto_camera && ui.camera == CameraPreset::kFront)
    ui.camera = CameraPreset::kTop;
  if (engine.model) start_generation(ui.active_prompt.empty() ? selected_prompt() : ui.active_prompt, &running);
}

}  // namespace kvscope
