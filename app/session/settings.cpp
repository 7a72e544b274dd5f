#include "app/session/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <type_traits>

#include "app/session/choices.h"
#include "app/session/fitting.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_number.h"
#include "model/core/json_quote.h"
#include "model/decoding/sampler_json.h"
#include "model/kv/kv_layout_json.h"

namespace kvscope {

namespace fs = std::filesystem;
using nlohmann::json;

std::string config_dir() {
  fs::path dir;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x)
    dir = fs::path(x) / "kvscope";
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = fs::path(h) / ".config" / "kvscope";
  else
    return {};
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec ? std::string() : dir.string();
}

namespace {
template <class T>
void get(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return;
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    number_as(*it, out);  // a number T cannot hold keeps the default, like a wrong type
  } else {
    try {
      out = it->get<T>();
    } catch (const json::exception&) {
      // A wrong type keeps the default for that one field.
    }
  }
}

// The KV cache layout as saved (kv_layout_json.h): what cannot be read is
// named and leaves dense f32. Ranges and the model's limits are fit_choices'.
bool kv_layout_from_settings(const json& j, KVLayout& out, std::string& problem) {
  const auto it = j.find("kv_layout");
  if (it == j.end()) return true;
  if (kv_layout_from_json(*it, "kv_layout", out, problem)) return true;
  problem += "; using a dense f32 cache";
  return false;
}

// The sampler as saved ({"sampler": {...}}, sampler_json.h): one that cannot be
// read is named and the defaults are kept.
std::string sampler_from_settings(const json& j, SamplerSettings& out) {
  const auto it = j.find("sampler");
  if (it == j.end()) return "";
  SamplerSettings s = out;
  try {
    if (!it->is_object()) throw Error("field \"sampler\": expected an object, got " + json_quote(*it));
    sampler_fields_from_json(*it, "sampler.", s);
  } catch (const Error& e) {
    return std::string(e.what()) + "; using the default sampler";
  }
  out = s;
  return "";
}

}  // namespace

bool load_settings(const std::string& path, UiState& ui, WindowSettings& win, std::string& error) {
  std::string text;
  try {
    if (!read_regular_file_if_exists(path, "the kvscope settings file (JSON)", text)) return true;
  } catch (const Error& e) {
    error = std::string(e.what()) + "; using defaults";
    return false;
  }
  return settings_from_json(text, path, ui, win, error);
}

bool settings_from_json(const std::string& text, const std::string& path, UiState& ui, WindowSettings& win,
                        std::string& error) {
  json j;
  try {
    j = parse_json_bounded(text, kJsonMaxDepth, "settings file " + path);
  } catch (const json::exception& e) {
    error = "settings file " + path + " is not valid JSON (" + e.what() + "); using defaults";
    return false;
  } catch (const Error& e) {
    error = std::string(e.what()) + "; using defaults";
    return false;
  }
  if (!j.is_object()) {
    error = "settings file " + path + " is not a JSON object; using defaults";
    return false;
  }
  get(j, "window_width", win.width);
  get(j, "window_height", win.height);
  get(j, "window_maximized", win.maximized);
  get(j, "window_x", win.x);
  get(j, "window_y", win.y);
  get(j, "beams", ui.rays);  // (the name settings files written before used for "rays")
  choices_from_settings_json(j, ui);
  std::string sampler_problem = sampler_from_settings(j, ui.sampler);
  std::string cam;
  get(j, "camera", cam);
  parse_camera(cam, ui.camera);
  ui.select_tab = true;
  // The KV layout as saved, then every choice's ranges now (the KV layout's
  // included) and the model's limits once one has loaded (Session::fit_to_model).
  std::string kv_problem;
  const bool kv_ok = kv_layout_from_settings(j, ui.kv_layout, kv_problem);
  if (!kv_ok) error = "settings file " + path + ": " + kv_problem;
  if (!sampler_problem.empty())
    error += (error.empty() ? "" : "\n") + ("settings file " + path + ": " + sampler_problem);
  FitContext ctx;
  ctx.origin = path;
  std::vector<std::string> notes = fit_window_settings(win, ctx);  // fit_window then fits it to the monitor
  for (std::string& n : fit_choices(ui, ctx)) notes.push_back(std::move(n));
  for (const std::string& n : notes) error += (error.empty() ? "" : "\n") + n;
  return kv_ok && sampler_problem.empty() && notes.empty();
}

bool save_settings(const std::string& path, const UiState& ui, const WindowSettings& win, std::string& error) {
  json j = {
      {"window_width", win.width},
      {"window_height", win.height},
      {"window_maximized", win.maximized},
      {"window_x", win.x},
      {"window_y", win.y},
      {"sampler", sampler_to_json(ui.sampler)},
      {"camera", to_string(ui.camera)},
      {"kv_layout", kv_layout_to_json(ui.kv_layout)},
  };
  choices_to_json(ui, j, /*view=*/false);
  try {
    // Invalid UTF-8 in a prompt becomes U+FFFD rather than failing the save.
    write_file_atomic(path, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  } catch (const Error& e) {
    error = std::string("settings not saved: ") + e.what();
    return false;
  }
  return true;
}

ScreenRect fit_window(const WindowSettings& s, const ScreenRect& work) {
  ScreenRect r;
  r.w = std::clamp(s.width, 1, std::max(1, work.w));
  r.h = std::clamp(s.height, 1, std::max(1, work.h));
  if (s.x < 0 || s.y < 0) {
    r.x = work.x + (work.w - r.w) / 2;
    r.y = work.y + (work.h - r.h) / 2;
  } else {
    r.x = std::clamp(s.x, work.x, work.x + work.w - r.w);
    r.y = std::clamp(s.y, work.y, work.y + work.h - r.h);
  }
  return r;
}

}  // namespace kvscope
