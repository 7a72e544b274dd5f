// The saved_files fuzz target's property, shared with the regression test:
// one JSON text fed to the readers of files the app saves and restores, a
// saved view (view_from_json) and the settings (settings_from_json), and the
// training record the Training tab reads (parse_training_record).
// Header-only; needs the teach library and the session library's settings.
#pragma once

#include <cmath>
#include <string>

#include "app/lessons/training.h"
#include "app/session/fitting.h"
#include "app/session/saved_view.h"
#include "app/session/settings.h"
#include "model/core/error.h"
#include "model/decoding/sampler.h"

namespace kvscope::fuzz {

inline bool in_range(double x, double lo, double hi) {
  return std::isfinite(x) && x >= lo && x <= hi;
}

// A restored sampler the engine would refuse is a bug of the reader.
inline std::string sampler_accepted(const SamplerSettings& s, const char* what) {
  try {
    Sampler check(s);
  } catch (const std::exception& e) {
    return std::string(what) + " restored sampler settings the engine refuses: " + e.what();
  }
  return "";
}

inline std::string check_saved_view(const std::string& text) {
  SavedView v;
  try {
    v = view_from_json(text, "fuzz/view.json");
  } catch (const Error& e) {
    if (std::string(e.what()).find("fuzz/view.json") == std::string::npos)
      return std::string("saved-view error does not name the file: ") + e.what();
    return "";
  } catch (const std::exception& e) {
    return std::string("view_from_json threw a non-kvscope exception: ") + e.what();
  }
  if (v.step < 0) return "saved view: step out of range";
  // The reader checks the remembered choices' types; their ranges are the one
  // restore check's (fit_choices, one range per row of choices.h), as the window applies it.
  UiState ui;
  ui.choices() = v.choices();
  (void)fit_choices(ui, FitContext{nullptr, "fuzz/view.json"});
  if (ui.layer < -1 || ui.layer > 4095 || ui.head < -1 || ui.head > 4095) return "saved view: layer/head out of range";
  if (ui.max_new < 0) return "saved view: max_new out of range";  // max_new 0: fill the context
  // The reader only checks that the camera's values are numbers; their ranges
  // are the one restore check's (ui_fit), as the window applies it.
  (void)fit_camera(v.camera, FitContext{nullptr, "fuzz/view.json"});
  for (float t : v.camera.target)
    if (!in_range(t, -1e7, 1e7)) return "saved view: camera target not finite";
  if (!in_range(v.camera.distance, 1e-4, 1e7) || !in_range(v.camera.fov_y, 0.01, 3.1) ||
      !in_range(v.camera.pitch, -1.5708, 1.5708) || !in_range(v.camera.yaw, -1e4, 1e4))
    return "saved view: camera out of range";
  if (!in_range(ui.min_weight, 0, 1) || !in_range(ui.text_scale, 0.75, 2.5))
    return "saved view: view option out of range";
  if (std::string err = sampler_accepted(v.sampler, "saved view"); !err.empty()) return err;
  // What was read is what a save writes back.
  try {
    const std::string once = view_to_json(v);
    if (view_to_json(view_from_json(once, "fuzz/again.json")) != once) return "saved view does not round-trip";
  } catch (const std::exception& e) {
    return std::string("a view kvscope wrote is refused: ") + e.what();
  }
  return "";
}

inline std::string check_settings(const std::string& text) {
  UiState ui;
  WindowSettings win;
  std::string err;
  try {
    if (!settings_from_json(text, "fuzz/settings.json", ui, win, err) &&
        err.find("fuzz/settings.json") == std::string::npos)
      return "settings error does not name the file: " + err;
  } catch (const std::exception& e) {
    return std::string("settings_from_json threw: ") + e.what();
  }
  if (win.width < 640 || win.width > 16384 || win.height < 400 || win.height > 16384) return "settings: window size";
  if (ui.preset < 0 || ui.preset > kNumPresets || ui.max_new < 0) return "settings: preset/max_new";
  if (ui.layer < -1 || ui.layer > 4095 || ui.head < -1 || ui.head > 4095) return "settings: layer/head";
  if (!in_range(ui.speed, 0.25, 8) || !in_range(ui.min_weight, 0, 1) || !in_range(ui.text_scale, 0.75, 2.5))
    return "settings: speed/min_weight/text_scale";
  if (ui.kv_context < 1 || ui.kv_dtype < 0 || ui.kv_dtype > 3 || ui.bottom_tab < 0 || ui.bottom_tab > 4)
    return "settings: KV calculator/tab";
  const KVLayout& k = ui.kv_layout;
  if (k.window < 0 || k.window > (1 << 20) || k.sinks < 0 || (k.sinks > 0 && k.sinks >= k.window) || k.block < 0 ||
      k.block > 4096)
    return "settings: KV layout out of range";
  // Once a model loads (48-wide K/V rows: no whole q8_0/q4_0 blocks, 64
  // positions), the fitted layout is one its cache accepts.
  Model m;
  m.config.n_layer = 2;
  m.config.n_head = m.config.n_kv_head = 4;
  m.config.n_embd = 48;
  m.config.n_positions = 64;
  m.config.vocab_size = 300;
  (void)fit_choices(ui, FitContext{&m, "fuzz/settings.json"});
  try {
    (void)ui.kv_layout.on_model(m.config);
  } catch (const std::exception& e) {
    return std::string("settings: a fitted KV layout the cache refuses: ") + e.what();
  }
  if (ui.kv_layout.window > 64 || ui.kv_layout.block > 64) return "settings: KV layout past the model's context";
  return sampler_accepted(ui.sampler, "settings");
}

// A training record (the Training tab's training.json): only kvscope::Error,
// naming the file. Its checkpoint folders are checked last, so every other
// field is read first; under /nonexistent no folder holds a config.json, so
// nothing may be accepted.
inline std::string check_training_record(const std::string& text) {
  TrainingRecord r;
  try {
    r = parse_training_record(text, "/nonexistent/fuzz/training.json");
  } catch (const Error& e) {
    const std::string m = e.what();
    return m.rfind("/nonexistent/fuzz/training.json: ", 0) == 0 ? "" : "training record error names no file: " + m;
  } catch (const std::exception& e) {
    return std::string("parse_training_record threw a non-kvscope error: ") + e.what();
  }
  // (folders under /nonexistent cannot hold a config.json: nothing may be accepted)
  return "a training record with checkpoints in /nonexistent was accepted";
}

inline std::string check_saved_files(const std::string& text) {
  std::string err = check_saved_view(text);
  if (err.empty()) err = check_settings(text);
  return err.empty() ? check_training_record(text) : err;
}

}  // namespace kvscope::fuzz
