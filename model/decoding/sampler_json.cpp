#include "model/decoding/sampler_json.h"

#include <cmath>
#include <cstdint>

#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/decoding/setting_ranges.h"

namespace kvscope {
namespace {

using nlohmann::json;

const json* field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void fail(const std::string& prefix, const char* key, const std::string& what) {
  throw Error("field \"" + prefix + key + "\": " + what);
}

void real(const json& obj, const std::string& prefix, const RealSetting& r, const char* key, float& out) {
  const json* v = field(obj, key);
  if (!v) return;
  const std::string range = (r.lo_open ? "(" : "[") + json(r.lo).dump() + ", " + json(r.hi).dump() + "]";
  if (!v->is_number()) fail(prefix, key, "expected a number in " + range + ", got " + json_quote(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || !r.contains(x))
    fail(prefix, key,
         json_quote(*v) + " is out of range (expected " + range +
             (r.rounds_to_bound(x) ? "; held as a float it rounds to " + json(r.lo).dump() : std::string()) + ")");
  out = static_cast<float>(x);
}

}  // namespace

json sampler_to_json(const SamplerSettings& s) {
  return {{"greedy", s.greedy},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"repetition_penalty", s.repetition_penalty},
          {"seed", s.seed}};
}

void sampler_fields_from_json(const json& obj, const std::string& prefix, SamplerSettings& s) {
  if (const json* v = field(obj, "greedy")) {
    if (!v->is_boolean()) fail(prefix, "greedy", "expected true or false, got " + json_quote(*v));
    s.greedy = v->get<bool>();
  }
  real(obj, prefix, setting::kTemperature, "temperature", s.temperature);
  real(obj, prefix, setting::kTopP, "top_p", s.top_p);
  real(obj, prefix, setting::kRepetitionPenalty, "repetition_penalty", s.repetition_penalty);
  if (const json* v = field(obj, "top_k")) {
    const IntSetting& k = setting::kTopK;
    const std::string range = std::to_string(k.lo) + ".." + std::to_string(k.hi);
    if (!v->is_number_integer())
      fail(prefix, "top_k", "expected a whole number in " + range + ", got " + json_quote(*v));
    const bool big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(k.hi);
    if (big || v->get<int64_t>() < k.lo || v->get<int64_t>() > k.hi)
      fail(prefix, "top_k", json_quote(*v) + " is out of range (expected " + range + ")");
    s.top_k = static_cast<int>(v->get<int64_t>());
  }
  if (const json* v = field(obj, "seed")) {
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0))
      fail(prefix, "seed", "expected a whole number in 0..18446744073709551615, got " + json_quote(*v));
    s.seed = v->get<uint64_t>();
  }
}

}  // namespace kvscope
