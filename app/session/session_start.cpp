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
  ui.errors.push_back(why + (snap.started ? " (the generation on screen goes on)" : ""));
  return true;
}

bool Session::start_generation(const std::string& prompt, const DecodeSettings* running) {
  // Checked before anything changes: a refused start leaves the generation on
  // screen, its strategy and its controls as they were.
  if (!running && refused_start(snap.decoding)) return false;
  if (snap.started && !replaced_) {  // (a start over a pending one keeps what the first replaced)
    replaced_ = ReplacedGeneration{0,
                                   snap.tree,
                                   snap.records,
                                   snap.beam_records,
                                   snap.spec_iterations,
                                   running ? *running : snap.decoding,
                                   snap.stop,
                                   ui.active_prompt,
                                   ui.view_step,
                                   ui.revealed_step,
                                   ui.playing};
  }
  worker_.cancel_steps();
  wcmd::Start c;
  c.prompt = prompt;
  c.options.max_new = effective_max_new();
  c.options.mode = snap.mode;
  c.options.sampler = ui.sampler;
  c.options.kv = ui.kv_layout;
  c.options.ignore_eos = ui.ignore_eos;
  c.options.keep_history = false;                      // the BranchTree owns the records (and their memory budget)
  c.options.branch_cache_budget = snap.tree.budget();  // branches keep their K/V under the same budget
  c.decoding = snap.decoding;
  c.request = ++snap.start_request;
  if (replaced_) replaced_->request = c.request;
  worker_.send(std::move(c));
  snap.tree.clear();
  snap.tree.start();
  snap.tree_version++;
  snap.records.clear();
  snap.beam_records.clear();
  snap.spec_iterations.clear();
  snap.seq = SequenceState();
  snap.seq_count = 0;
  snap.pending_forks = 0;
  snap.pending_select = -1;
  snap.pending_view_step = -1;  // a restored step belongs to the generation it was restored with
  snap.stop = StopReason::kNone;
  snap.started = false;
  snap.step_after_start = false;
  ui.active_prompt = prompt;
  ui.view_step = -1;
  ui.revealed_step = -1;
  return true;
}

// The worker refused the newest start and kept its generation running: the
// screen shows that generation again, with the strategy it runs.
void Session::restore_replaced(const WorkerEvent& ev) {
  if (!replaced_ || ev.request != replaced_->request || ev.request != snap.start_request) return;
  ReplacedGeneration r = std::move(*replaced_);
  replaced_.reset();
  snap.tree = std::move(r.tree);
  snap.tree_version++;
  snap.records = std::move(r.records);
  snap.beam_records = std::move(r.beam_records);
  snap.spec_iterations = std::move(r.spec_iterations);
  snap.decoding = ui.decoding = r.decoding;
  snap.stop = r.stop;
  snap.started = true;
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
    ui.decoding = snap.decoding;
    return;
  }
  const DecodeSettings running = snap.decoding;
  snap.decoding = next;
  ui.decoding = snap.decoding;
  // The beams' lanes lie side by side in depth: seen from above.
  if (d.mode == DecodeMode::kBeam && ui.auto_camera && ui.camera == CameraPreset::kFront)
    ui.camera = CameraPreset::kTop;
  if (snap.model) start_generation(ui.active_prompt.empty() ? selected_prompt() : ui.active_prompt, &running);
}

}  // namespace kvscope
