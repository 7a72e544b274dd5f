// The Session's part of the Serving view: presets run by model/serving's
// Server on the session's serving thread (app/worker/serve_runner.h), the
// shown step, playback. The records are kept whole (a preset runs a few
// dozen steps), so scrubbing back shows any of them.
#include <algorithm>
#include <exception>

#include "app/lessons/serve_presets.h"
#include "app/session/session.h"

namespace kvscope {

void Session::serve_open(bool open) {
  ui.serving.open = open;
  if (open) ui.chat.open = false;  // one view over the window at a time
  if (open) ui.playing = false;    // the generation waits while the server runs
  if (open && engine.serving.runs.empty()) serve_start(ui.serving.preset);
}

void Session::serve_play(double now) {
  ui.serving.playing = !ui.serving.playing;
  ui.serving.last_step = now;
}

void Session::serve_start(int preset) {
  ui.serving.view_step = -1;
  if (preset != ui.serving.preset) ui.serving.selected = -1;  // another preset's requests
  if (!engine.model) {
    ui.errors.push_back("No model is loaded yet: the Serving view runs the loaded model.");
    return;
  }
  try {
    std::vector<std::unique_ptr<Server>> servers;
    for (ServeRunSpec& r : serve_preset_runs(preset, *engine.model))
      servers.push_back(std::make_unique<Server>(engine.model, std::move(r.requests), r.options));
    ui.serving.preset = preset;
    ui.serving.run = std::min<int>(ui.serving.run, static_cast<int>(servers.size()) - 1);
    serve_.start(engine.model, std::move(servers));
    serve_.request_steps(1);  // the first step on screen
  } catch (const std::exception& e) {
    ui.errors.push_back(std::string("Serving view: ") + e.what());
  }
  serve_.read(engine.serving);
}

// `steps` on from the shown one: records already computed are shown, the
// rest are computed on the serving thread (the view follows the newest).
void Session::serve_step(int steps) {
  const int n = engine.serving.steps();
  const int shown = ui.serving.view_step < 0 ? n - 1 : ui.serving.view_step;
  const int target = std::max(0, shown + steps);
  if (target < n - 1) {
    ui.serving.view_step = target;
    return;
  }
  ui.serving.view_step = -1;
  if (target > n - 1) serve_.request_steps(target - std::max(n - 1, 0));
  serve_.read(engine.serving);
}

void Session::serve_scrub_to(int step) {
  const int n = engine.serving.steps();
  ui.serving.view_step = step >= n - 1 ? -1 : std::max(0, step);
  ui.serving.playing = false;
}

UiCommand Session::serving_command(const UiCommand& c) const {
  if (std::holds_alternative<cmd::PlayPause>(c)) return cmd::ServePlay{};
  if (std::holds_alternative<cmd::Step>(c)) return cmd::ServeStep{1};
  if (const auto* s = std::get_if<cmd::Scrub>(&c)) return cmd::ServeStep{s->steps};
  if (std::holds_alternative<cmd::Reset>(c)) return cmd::ServeStart{ui.serving.preset};
  return c;
}

void Session::serve_update(double now) {
  serve_.read(engine.serving);
  ServeRuns& sv = engine.serving;
  bool all_done = !sv.runs.empty() && sv.error.empty();
  for (const ServeRun& r : sv.runs) all_done = all_done && r.done;
  const bool at_newest = ui.serving.view_step < 0;
  if (!ui.serving.open || !ui.serving.playing || sv.runs.empty()) return;
  if ((all_done || !sv.error.empty()) && at_newest) {
    ui.serving.playing = false;  // played to the end
    return;
  }
  if (sv.busy || now - ui.serving.last_step < 1.0 / std::max(0.1f, ui.serving.speed)) return;
  ui.serving.last_step = now;
  serve_step(1);
}

}  // namespace kvscope
