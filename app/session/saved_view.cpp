#include "app/session/saved_view.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/session/choices.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/decoding/sampler_json.h"

namespace kvscope {
namespace {

using nlohmann::json;

// Any number a float holds (1e38 and up would become infinity).
constexpr float kAnyFloat = 1e37f;

// Reads optional fields with type and range checks; every error names the
// file and the dotted field path.
struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(origin + ": field \"" + field + "\" " + what);
  }

  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  float number(const json& obj, const char* key, const std::string& path, float lo, float hi, float fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_number()) fail(path, "must be a number, got " + json_quote(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "= %g is out of range (expected %g..%g)", x, static_cast<double>(lo),
                    static_cast<double>(hi));
      fail(path, buf);
    }
    return static_cast<float>(x);
  }

  int64_t integer(const json& obj, const char* key, const std::string& path, int64_t lo, int64_t hi,
                  int64_t fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_number_integer()) fail(path, "must be an integer, got " + json_quote(*v));
    const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : v->get<int64_t>();
    if (x < lo || x > hi) {
      fail(path, "= " + std::to_string(x) + " is out of range (expected " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ")");
    }
    return x;
  }

  std::string string(const json& obj, const char* key, const std::string& path, const std::string& fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_string()) fail(path, "must be a string, got " + json_quote(*v));
    return v->get<std::string>();
  }

  const json* object(const json& obj, const char* key, const std::string& path) const {
    const json* v = find(obj, key);
    if (v && !v->is_object()) fail(path, "must be an object, got " + json_quote(*v));
    return v;
  }
};

}  // namespace

std::string view_to_json(const SavedView& v) {
  json j;
  j["kvscope_view"] = kSavedViewVersion;
  json cam;
  cam["target"] = {v.camera.target[0], v.camera.target[1], v.camera.target[2]};
  cam["distance"] = v.camera.distance;
  cam["yaw"] = v.camera.yaw;
  cam["pitch"] = v.camera.pitch;
  cam["fov_y"] = v.camera.fov_y;
  cam["preset"] = v.camera.preset;
  j["camera"] = cam;
  j["step"] = v.step;
  j["prompt"] = v.prompt;
  j["model"] = v.model;
  j["cache"] = to_string(v.cache);
  j["sampler"] = sampler_to_json(v.sampler);
  UiState choices;  // the table's view rows are ViewChoices members (choices.h)
  choices.choices() = v.choices();
  choices_to_json(choices, j, /*view=*/true);
  // Invalid UTF-8 in a prompt becomes U+FFFD rather than failing the save.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

SavedView view_from_json(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = parse_json_bounded(text, kJsonMaxDepth, origin);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(origin + ": expected a JSON object (a kvscope saved view)");
  const Reader rd{origin};
  if (!j.contains("kvscope_view")) throw Error(origin + ": missing field \"kvscope_view\" (not a kvscope saved view)");
  const int64_t version = rd.integer(j, "kvscope_view", "kvscope_view", 1, 1 << 20, 0);
  if (version != kSavedViewVersion) {
    throw Error(origin + ": field \"kvscope_view\" = " + std::to_string(version) + " is not supported (expected " +
                std::to_string(kSavedViewVersion) + ")");
  }
  SavedView v;
  if (const json* cam = rd.object(j, "camera", "camera")) {
    if (const json* t = rd.find(*cam, "target")) {
      if (!t->is_array() || t->size() != 3)
        rd.fail("camera.target", "must be an array of 3 numbers, got " + json_quote(*t));
      for (size_t i = 0; i < 3; ++i) {
        const json& x = (*t)[i];
        if (!x.is_number() || !std::isfinite(x.get<double>()) || std::fabs(x.get<double>()) > kAnyFloat)
          rd.fail("camera.target[" + std::to_string(i) + "]", "must be a number, got " + json_quote(x));
        v.camera.target[i] = x.get<float>();
      }
    }
    // Numbers here; their ranges are the restore check's (app/session/fitting.h: fit_camera).
    v.camera.distance = rd.number(*cam, "distance", "camera.distance", -kAnyFloat, kAnyFloat, v.camera.distance);
    v.camera.yaw = rd.number(*cam, "yaw", "camera.yaw", -kAnyFloat, kAnyFloat, v.camera.yaw);
    v.camera.pitch = rd.number(*cam, "pitch", "camera.pitch", -kAnyFloat, kAnyFloat, v.camera.pitch);
    v.camera.fov_y = rd.number(*cam, "fov_y", "camera.fov_y", -kAnyFloat, kAnyFloat, v.camera.fov_y);
    v.camera.preset = rd.string(*cam, "preset", "camera.preset", "");
    if (!v.camera.preset.empty() && v.camera.preset != "front" && v.camera.preset != "top" &&
        v.camera.preset != "side" && v.camera.preset != "follow") {
      rd.fail("camera.preset",
              "= \"" + v.camera.preset + "\" is not a camera (expected front, top, side, follow or \"\")");
    }
  }
  v.step = static_cast<int>(rd.integer(j, "step", "step", 0, 1 << 24, 0));
  v.prompt = rd.string(j, "prompt", "prompt", "");
  v.model = rd.string(j, "model", "model", "");
  const std::string cache = rd.string(j, "cache", "cache", "kv_cache");
  if (cache == "kv_cache") {
    v.cache = CacheMode::kKV;
  } else if (cache == "no_cache") {
    v.cache = CacheMode::kNoCache;
  } else {
    rd.fail("cache", "= \"" + cache + "\" (expected \"kv_cache\" or \"no_cache\")");
  }
  if (const json* s = rd.object(j, "sampler", "sampler")) {
    try {
      sampler_fields_from_json(*s, "sampler.", v.sampler);
    } catch (const Error& e) {
      throw Error(origin + ": " + e.what());
    }
  }
  choices_from_view_json(j, origin, v);
  return v;
}

void save_view(const SavedView& v, const std::string& path) {
  write_file_atomic(path, view_to_json(v));
}

SavedView load_view(const std::string& path) {
  return view_from_json(read_regular_file(path, "a kvscope saved view (JSON)"), path);
}

}  // namespace kvscope
