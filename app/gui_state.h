// The window's state, split by owner: Snapshot is what the UI thread knows
// about the engine (built only from worker events), UiState is what the user
// chose. Panels read both and return UiCommands; nothing else mutates them
// behind the frame loop's back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "generator.h"
#include "model.h"
#include "sampler.h"
#include "scene.h"
#include "scene_camera.h"

namespace kvscope {

struct PromptPreset {
  const char* name;
  const char* text;
};
// Story opening, a line of code, a fact.
inline constexpr PromptPreset kPromptPresets[] = {
    {"Story", "Once upon a time"},
    {"Code", "def "},
    {"Fact", "The capital of France is"},
};
inline constexpr int kNumPresets = 3;  // index kNumPresets = the custom prompt

struct Snapshot {
  std::shared_ptr<const Model> model;
  bool loading_model = false;
  std::string model_error;  // last failed load, shown in the Model panel
  uint64_t generation = 0;  // id of the generation the records belong to
  bool started = false;     // the worker accepted the prompt
  std::vector<RecordPtr> records;
  int total_records = 0;  // over every generation of this run
  SequenceState seq;      // state after the last record
  StopReason stop = StopReason::kNone;
  bool step_in_flight = false;
  double last_record_time = 0;  // glfwGetTime() when the newest record arrived
  double gen_start_time = 0;
  CacheMode mode = CacheMode::kKV;  // requested: applies from the next step
};

struct UiState {
  // Prompt
  int preset = 0;  // kNumPresets = custom
  std::string custom_prompt = "In a distant galaxy";
  std::string active_prompt;  // what the current generation started from
  // Playback
  bool playing = true;
  float speed = 2.0f;  // tokens per second
  bool fastest = false;
  int max_new = 0;  // 0 = fill the context (capped by kDefaultMaxNew)
  // Attention
  int layer = -1, head = -1;
  float min_weight = 0.005f;
  bool beams = true;
  // Sampling (applies from the next step)
  SamplerSettings sampler;
  // Model
  std::string model_dir_input;
  // View
  CameraPreset camera = CameraPreset::kFront;
  bool auto_camera = true;  // false once the user orbits/pans/zooms
  bool labels = true, legend = true, grid = true;
  bool hud = false;  // the overlay's counters (the Cache panel shows them already)
  float text_scale = 1.0f;
  bool fullscreen = false;
  bool show_panels = true;
  // Errors shown in the error panel until dismissed.
  std::vector<std::string> errors;
  std::string status;  // one line, e.g. "saved kvscope-....png"
};

inline constexpr int kDefaultMaxNew = 200;

// Everything a panel may ask for.
struct UiCommand {
  enum class Kind {
    kStart,  // (re)start the generation from text
    kReset,  // restart from the active prompt
    kPlayPause,
    kStep,
    kToggleCache,
    kSetSampler,
    kSetMaxNew,
    kLoadModel,  // text = folder
    kCamera,     // camera
    kFit,        // back to the automatic camera
    kScreenshot,
    kFullscreen,
    kTextScale,  // value
    kDismissErrors,
    kTogglePanels,
  };
  UiCommand(Kind k, std::string t = {}) : kind(k), text(std::move(t)) {}  // NOLINT: implicit on purpose
  Kind kind;
  std::string text;
  CameraPreset camera = CameraPreset::kFront;
  float value = 0;
};

}  // namespace kvscope
