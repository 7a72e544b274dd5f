// The Serving view's presets: request sets that make one serving idea
// visible each (continuous batching, prefix sharing, preemption, static vs
// continuous batching), as requests-file lines run by model/serving's
// Server on the loaded model. The lines go through parse_requests
// (model/serving/requests.h), so a preset the model or its pool cannot take
// is refused with the same message a requests file would get.
#pragma once

#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/serving/server.h"

namespace kvscope {

struct ServePresetInfo {
  const char* name;   // the button
  const char* brief;  // a narrow panel's button
  const char* what;   // one sentence: what to watch
};
// (presets) in the view's order.
const std::vector<ServePresetInfo>& serve_presets();

// One run of a preset: its requests under one scheduler configuration.
struct ServeRunSpec {
  std::vector<ServeRequest> requests;
  ServeOptions options;
};

// The runs of preset `index` on `model` (one; two for static vs continuous,
// static first), keeping attention rows for the view (ServeOptions::attention_budget). Throws kvscope::Error (a
// UsageError naming the preset and the line) when the model cannot take them.
std::vector<ServeRunSpec> serve_preset_runs(int index, const Model& model);

// The presets' page size: small blocks, so that a prompt spans several and sharing and growth show.
inline constexpr int kServePresetBlock = 4;

// The requests-file text of preset `index` (JSON Lines), and its scheduler configuration.
std::string serve_preset_lines(int index);
SchedulerConfig serve_preset_config(int index);

}  // namespace kvscope
