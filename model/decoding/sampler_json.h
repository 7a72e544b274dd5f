// The sampler's one JSON form, read and written here for every file that
// holds one (saved views, the window's settings, serve's request lines):
// generate's flag names without the dashes and the ranges of
// setting_ranges.h,
//   {"greedy": true, "temperature": 1, "top_k": 0, "top_p": 1,
//    "repetition_penalty": 1, "seed": 0}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/decoding/sampler.h"

namespace kvscope {

nlohmann::json sampler_to_json(const SamplerSettings& s);

// Reads the sampler fields `obj` has onto `s` (an absent or null field keeps
// its value); other keys are the caller's. A field of the wrong type or out of
// range throws kvscope::Error "field \"<prefix><name>\": ..." saying what was
// expected; callers put the file and line in front.
void sampler_fields_from_json(const nlohmann::json& obj, const std::string& prefix, SamplerSettings& s);

// The field names sampler_fields_from_json reads.
inline constexpr const char* kSamplerFields[] = {"greedy", "temperature",        "top_k",
                                                 "top_p",  "repetition_penalty", "seed"};

}  // namespace kvscope
