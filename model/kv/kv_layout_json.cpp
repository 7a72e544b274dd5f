#include "model/kv/kv_layout_json.h"

#include <stdexcept>

#include "model/core/json_number.h"

namespace kvscope {

using nlohmann::json;

json kv_layout_to_json(const KVLayout& kv) {
  return {{"dtype", to_string(kv.dtype)},
          {"window", kv.window},
          {"sinks", kv.sinks},
          {"block", kv.block},
          {"evict", to_string(kv.evict)},
          {"budget", kv.budget},
          {"snap_window", kv.snap_window},
          {"snap_pool", kv.snap_pool},
          {"snap_pooling", to_string(kv.snap_pooling)}};
}

namespace {

// An int field of the layout (0 when absent); throws when present but not an int.
int layout_int(const json& layout, const char* key) {
  int x = 0;
  const auto it = layout.find(key);
  if (it != layout.end() && !number_as(*it, x)) throw std::invalid_argument(key);
  return x;
}

}  // namespace

bool kv_layout_from_json(const json& obj, const std::string& what, KVLayout& out, std::string& problem) {
  out = KVLayout();
  KVLayout k;
  std::string dtype = "f32", evict = "none", pooling = "max";
  try {
    if (!obj.is_object()) throw std::invalid_argument("not an object");
    dtype = obj.value("dtype", dtype);
    k.window = layout_int(obj, "window");
    k.sinks = layout_int(obj, "sinks");
    k.block = layout_int(obj, "block");
    evict = obj.value("evict", evict);
    k.budget = layout_int(obj, "budget");
    k.snap_window = layout_int(obj, "snap_window");
    k.snap_pool = layout_int(obj, "snap_pool");
    pooling = obj.value("snap_pooling", pooling);
  } catch (const std::exception&) {
    problem = what +
              ": expected {\"dtype\", \"evict\", \"snap_pooling\": strings, \"window\", \"sinks\", \"block\", "
              "\"budget\", \"snap_window\", \"snap_pool\": integers}";
    return false;
  }
  if (!parse_kv_evict(evict, &k.evict)) {
    problem = what + ".evict: expected none, tova, h2o or snapkv, got \"" + evict + "\"";
    return false;
  }
  if (!parse_kv_pooling(pooling, &k.snap_pooling)) {
    problem = what + ".snap_pooling: expected max or avg, got \"" + pooling + "\"";
    return false;
  }
  if (!parse_kv_dtype(dtype, &k.dtype)) {
    problem = what + ".dtype: expected f32, f16, q8_0 or q4_0, got \"" + dtype + "\"";
    return false;
  }
  out = k;
  return true;
}

}  // namespace kvscope
