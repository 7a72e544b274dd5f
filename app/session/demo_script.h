// The scripted runs of the window, GL-free: --demo-frames N (the smoke test
// and the screenshots in docs/) returns the commands a user would have given
// at each frame.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/session/commands.h"
#include "app/session/state.h"

namespace kvscope {

// Generate as fast as possible, switch the cache off and on, walk through
// the cameras and the teaching features (scrub, fork, return, present,
// predict, save and load a view). With `demo_view` (timeline, sampling,
// phases, kv, pages, heatmaps, presentation, training, beams, speculative, chat) the run
// instead sets up that feature for a screenshot. With `camera` the run ends
// on that preset (set late, after the default run's own camera tour).
Commands demo_script(int frame, int total, const EngineState& engine, const std::string& demo_view,
                     std::optional<CameraPreset> camera = std::nullopt);

// The UI settings a `demo_view` starts from (open tab, sampler, KV calculator row).
void setup_demo_view(const std::string& demo_view, UiState& ui);
// What its teacher opens once the model is loaded and the window has laid
// itself out (a quarter into the run), as a click would, so the panels that
// fold to fit keep it open: the lessons, the Q·K·V inspector or the
// sampling explainer.
void open_demo_sections(const std::string& demo_view, UiState& ui);

// What an interactive run reads from settings.json, for a scripted one:
// $KVSCOPE_DEMO_TEXT_SCALE (0.75 to 2.5, e.g. 2.5 for a projector) and
// $KVSCOPE_DEMO_SIZE (WxH, e.g. 1366x768; the window still fits the screen).
// Null = unset. Returns "" or a message naming the variable and what it
// expects; a bad value leaves its setting as it was.
std::string apply_demo_window(const char* text_scale, const char* size, UiState& ui, int& width, int& height);
// $KVSCOPE_DEMO_VIEW (timeline, sampling, phases, kv, pages, heatmaps,
// training, presentation, qkv, beams, speculative, serving, serving-prefix,
// serving-preempt, serving-static, predict or chat; null or empty = unset) into
// `view`. Returns "" or a message naming the variable and what it expects;
// a bad value leaves `view` empty (the default run).
std::string apply_demo_view(const char* name, std::string& view);
// $KVSCOPE_DEMO_CAMERA (front, top, side or follow; null = unset) into
// `camera`. Returns "" or a message naming the variable and what it expects.
std::string apply_demo_camera(const char* name, std::optional<CameraPreset>& camera);
// $KVSCOPE_DEMO_OPEN: the panels a scripted screenshot opens, comma-separated
// from left, right, lessons, qkv, next and model (null = none), into
// `panels`. Returns "" or a message naming the variable and what it expects.
std::string apply_demo_open(const char* list, std::vector<std::string>& panels);
// Every $KVSCOPE_DEMO_* variable set (read through `env`, getenv's shape)
// checked as above: one message per bad value, naming the variable, the
// value and what it takes. The window checks them before it opens, whatever
// the run (scripted, interactive or a soak): a bad value exits 1 at once,
// before any frame or screenshot, instead of being ignored.
std::vector<std::string> demo_env_problems(const std::function<const char*(const char*)>& env);
// Opens them, as clicks would (with open_demo_sections: the layout's folding keeps them).
void open_demo_panels(const std::vector<std::string>& panels, UiState& ui);

}  // namespace kvscope
