// Saved views: camera + step + settings written to a
// small JSON file to prepare a lesson, and restored from it. Plain floats, so
// this file needs neither GLM nor the renderer:
//   {"kvscope_view": 1, "camera": {"target": [x, y, z], "distance": ..,
//    "yaw": .., "pitch": .., "fov_y": .., "preset": "front"}, "step": 12,
//    "prompt": "...", "model": "", "max_new": 64 (0: fill the context), "cache": "kv_cache",
//    "sampler": {...}, "attention": {"layer": -1, "head": -1, "min_weight": 0},
//    "text_scale": 1, "presentation": false, "predict": false}
#pragma once

#include <cstdint>
#include <string>

#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"
#include "render/scene/view_defaults.h"

namespace kvscope {

struct SavedCamera {
  float target[3] = {0, 0, 0};
  float distance = 20.0f;
  float yaw = 0.0f;     // radians
  float pitch = 0.25f;  // radians
  float fov_y = 0.70f;  // radians
  std::string preset;   // "front" / "top" / "side" / "follow", or "" for a free camera
};

// The user's choices a saved view restores. The window's UiState is built on
// it (app/session/state.h), as SavedView is, so saving and loading copy it
// whole (`choices()`) and a new choice is added here once.
struct ViewChoices {
  int max_new = 0;  // 0 = fill the context (the window's own default cap)
  SamplerSettings sampler;
  int layer = -1;                        // -1 = mean over layers
  int head = -1;                         // -1 = mean over heads
  float min_weight = kDefaultMinWeight;  // attention rays below it are hidden
  float text_scale = 1.0f;
  bool presentation = false;
  bool predict = false;  // the newest token stays hidden until revealed

  ViewChoices& choices() { return *this; }
  const ViewChoices& choices() const { return *this; }
};

struct SavedView : ViewChoices {
  SavedCamera camera;
  int step = 0;        // the timeline position (record index)
  std::string prompt;  // the generation the step belongs to
  std::string model;   // model folder; "" = the embedded default
  CacheMode cache = CacheMode::kKV;
};

constexpr int kSavedViewVersion = 1;

std::string view_to_json(const SavedView& v);
// Throws kvscope::Error naming `origin` and the field, and what was expected.
SavedView view_from_json(const std::string& json_text, const std::string& origin);

// Write to / read from a file. Errors name the path.
void save_view(const SavedView& v, const std::string& path);
SavedView load_view(const std::string& path);

}  // namespace kvscope
