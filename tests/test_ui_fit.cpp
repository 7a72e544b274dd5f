// Restored choices (settings.json, saved views, the previous model's) go
// through one check, fit_choices: every value out of its range or outside
// the loaded model is brought back and named, with the file it came from.
// The real load paths (the settings reader here, a view restore and model
// switches in test_worker.cpp) all go through it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "app/session/choices.h"
#include "app/session/demo_script.h"
#include "app/session/fitting.h"
#include "app/session/saved_view.h"
#include "app/session/session.h"
#include "app/session/settings.h"
#include "model/core/overloaded.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

// A model's shape is all the check reads.
Model shaped(int n_layer, int n_head, int n_embd, int n_positions, int vocab) {
  Model m;
  m.name = "tiny";
  m.config.n_layer = n_layer;
  m.config.n_head = n_head;
  m.config.n_kv_head = n_head;
  m.config.n_embd = n_embd;
  m.config.n_positions = n_positions;
  m.config.vocab_size = vocab;
  return m;
}

bool has_note(const std::vector<std::string>& notes, const std::string& needle) {
  for (const std::string& n : notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& notes) {
  std::string s;
  for (const std::string& n : notes) s += n + "\n";
  return s;
}

TEST(FitChoices, DefaultsAndInRangeValuesAreKeptSilently) {
  UiState ui;
  const Model m = shaped(4, 4, 64, 128, 512);
  FitContext ctx{&m, "settings.json"};
  EXPECT_TRUE(fit_choices(ui, ctx).empty());
  ui.layer = 3;
  ui.head = 0;
  ui.max_new = 128;
  ui.sampler.top_k = 512;
  ui.kv_layout.window = 64;
  ui.kv_layout.sinks = 4;
  int step = 127;
  EXPECT_TRUE(fit_choices(ui, ctx, &step).empty()) << joined(fit_choices(ui, ctx, &step));
  EXPECT_EQ(ui.layer, 3);
  EXPECT_EQ(step, 127);
}

TEST(FitChoices, EveryValueOutOfRangeIsBroughtBackAndNamed) {
  UiState ui;
  ui.preset = 7;
  ui.speed = std::numeric_limits<float>::quiet_NaN();
  ui.max_new = -5;
  ui.min_weight = 3.0f;
  ui.layer = -7;
  ui.head = 99999;
  ui.sampler.temperature = std::numeric_limits<float>::infinity();
  ui.sampler.top_p = 0.0f;
  ui.sampler.repetition_penalty = 0.5f;
  ui.sampler.top_k = -3;
  ui.text_scale = 40.0f;
  ui.kv_context = 0;
  ui.kv_dtype = 9;
  ui.kv_selected = -40;
  ui.bottom_tab = -1;
  ui.kv_layout.dtype = static_cast<KVDtype>(17);
  ui.kv_layout.window = -2;
  ui.kv_layout.sinks = 8;
  ui.kv_layout.block = 1 << 30;
  ui.custom_prompt.assign((1 << 16) + 5, 'x');
  ui.strategy = strategy::Beam{0, std::numeric_limits<double>::quiet_NaN()};
  ui.draft_dir.assign((1 << 16) + 5, 'd');
  const std::vector<std::string> notes = fit_choices(ui, FitContext{nullptr, "s.json"});
  for (const char* field : {"prompt preset",
                            "speed",
                            "max new tokens",
                            "minimum ray weight",
                            "layer",
                            "head",
                            "temperature",
                            "top-p",
                            "repetition penalty",
                            "top-k",
                            "text scale",
                            "KV calculator tokens",
                            "KV calculator format",
                            "KV calculator row",
                            "tab",
                            "kv_layout.dtype",
                            "kv_layout.window",
                            "kv_layout.sinks",
                            "kv_layout.block",
                            "custom prompt",
                            "beam search with beams N = 0",
                            "length penalty L = nan",
                            "the draft model folder"}) {
    EXPECT_TRUE(has_note(notes, field)) << field << " not named in:\n" << joined(notes);
  }
  for (const std::string& n : notes) EXPECT_EQ(n.rfind("s.json: ", 0), 0u) << n;
  EXPECT_EQ(ui.preset, kNumPresets);
  EXPECT_EQ(ui.speed, UiState().speed);  // not a number: the default
  EXPECT_EQ(ui.max_new, 0);
  EXPECT_EQ(ui.min_weight, 1.0f);
  EXPECT_EQ(ui.layer, -1);
  EXPECT_EQ(ui.head, ui_range::kHeadsMax - 1);
  EXPECT_EQ(ui.sampler.temperature, SamplerSettings().temperature);
  EXPECT_EQ(ui.sampler.top_p, ui_range::kTopPMin);
  EXPECT_EQ(ui.sampler.repetition_penalty, 1.0f);
  EXPECT_EQ(ui.sampler.top_k, 0);
  EXPECT_EQ(ui.text_scale, kMaxTextScale);
  EXPECT_EQ(ui.kv_context, 1);
  EXPECT_EQ(ui.kv_dtype, 3);
  EXPECT_EQ(ui.kv_selected, -1);
  EXPECT_EQ(ui.bottom_tab, 0);
  EXPECT_EQ(ui.kv_layout.dtype, KVDtype::kQ4_0);
  EXPECT_EQ(ui.kv_layout.window, 0);
  EXPECT_EQ(ui.kv_layout.sinks, 0);
  EXPECT_EQ(ui.kv_layout.block, kKvBlockMaxNoModel);
  EXPECT_EQ(ui.custom_prompt.size(), ui_range::kTextMax);
  EXPECT_EQ(ui.strategy, Strategy(strategy::Beam{1, 1.0}));
  EXPECT_EQ(ui.draft_dir.size(), ui_range::kTextMax);
  // Fitted values fit: a second pass changes nothing.
  EXPECT_TRUE(fit_choices(ui, FitContext{nullptr, "s.json"}).empty());
  // Speculative decoding's K, by the same clamp.
  ui.strategy = strategy::Speculative{"draft", 99};
  const std::vector<std::string> k_notes = fit_choices(ui, FitContext{nullptr, "s.json"});
  EXPECT_TRUE(has_note(k_notes, "drafted tokens K = 99")) << joined(k_notes);
  EXPECT_EQ(ui.strategy, Strategy(strategy::Speculative{"draft", 16}));
}

TEST(FitChoices, ASmallerModelReclampsWhatALargerOneAllowed) {
  // Chosen with a 12-layer, 12-head, 1024-position model with a 50257-token
  // vocabulary; then a 2-layer, 2-head, 48-dimensional model with 64 positions.
  UiState ui;
  ui.layer = 11;
  ui.head = 5;
  ui.max_new = 1000;
  ui.sampler.top_k = 40000;
  ui.kv_layout.dtype = KVDtype::kQ8_0;  // 48-wide K/V rows are not whole 32-value blocks
  int step = 900;
  const Model big = shaped(12, 12, 768, 1024, 50257);
  EXPECT_TRUE(fit_choices(ui, FitContext{&big, ""}, &step).empty());
  const Model small = shaped(2, 2, 48, 64, 300);
  const std::vector<std::string> notes = fit_choices(ui, FitContext{&small, "lesson.json"}, &step);
  EXPECT_EQ(ui.layer, -1);
  EXPECT_EQ(ui.head, -1);
  EXPECT_EQ(ui.max_new, 64);
  EXPECT_EQ(ui.sampler.top_k, 300);
  EXPECT_EQ(ui.kv_layout.dtype, KVDtype::kF16);  // any row width stores f16
  EXPECT_EQ(step, 63);
  EXPECT_TRUE(has_note(notes, "lesson.json: layer 11 is not in tiny (2 layers, 0..1)")) << joined(notes);
  EXPECT_TRUE(has_note(notes, "head 5 is not in tiny")) << joined(notes);
  EXPECT_TRUE(has_note(notes, "max new tokens 1000")) << joined(notes);
  EXPECT_TRUE(has_note(notes, "top-k 40000")) << joined(notes);
  EXPECT_TRUE(has_note(notes, "kv_layout.dtype q8_0 does not fit tiny (its K/V rows have 48 values")) << joined(notes);
  EXPECT_TRUE(has_note(notes, "step 900")) << joined(notes);
}

TEST(FitChoices, TheSettingsReaderFitsAndNamesTheFileAndFields) {
  nlohmann::json j = {{"speed", 100.0},
                      {"max_new", -4},
                      {"layer", 4095},
                      {"head", -9},
                      {"text_scale", 0.01},
                      {"kv_dtype", 12},
                      {"bottom_tab", 99},
                      {"preset", -3},
                      {"min_weight", -1.0},
                      {"window_width", 5},
                      {"kv_context", -1},
                      // Within the flags' ranges (sampler_json.h), outside the sliders'.
                      {"sampler", {{"temperature", 3.0}, {"top_p", 0.01}, {"repetition_penalty", 9.0}}}};
  UiState ui;
  WindowSettings win;
  std::string err;
  EXPECT_FALSE(settings_from_json(j.dump(), "/cfg/settings.json", ui, win, err));
  for (const char* needle :
       {"/cfg/settings.json: speed 100 is outside 0.25..8; using 8", "max new tokens -4", "head -9",
        "temperature 3 is outside 0.05..2", "top-p 0.01", "text scale 0.01", "KV calculator format 12", "tab 99",
        "prompt preset -3", "minimum ray weight -1", "KV calculator tokens -1", "repetition penalty 9"})
    EXPECT_NE(err.find(needle), std::string::npos) << needle << " not in:\n" << err;
  EXPECT_EQ(ui.speed, 8.0f);
  EXPECT_EQ(ui.layer, 4095);  // a layer this high may exist: the model decides once it has loaded
  EXPECT_EQ(ui.head, -1);
  EXPECT_EQ(win.width, 640);
  // A file kvscope wrote reads back with nothing to say.
  const std::string path = testing::TempDir() + "/fit_settings.json";
  ASSERT_TRUE(save_settings(path, ui, win, err)) << err;
  UiState again;
  WindowSettings win2;
  std::string err2;
  EXPECT_TRUE(load_settings(path, again, win2, err2)) << err2;
  EXPECT_EQ(again.speed, 8.0f);
  // Outside the flags' own ranges, the sampler cannot be read: named, defaults kept.
  const nlohmann::json bad = {{"sampler", {{"temperature", 1e30}, {"top_k", 5}}}};
  UiState def;
  err.clear();
  EXPECT_FALSE(settings_from_json(bad.dump(), "/cfg/settings.json", def, win, err));
  EXPECT_NE(err.find("/cfg/settings.json: field \"sampler.temperature\": 1e+30 is out of range"), std::string::npos)
      << err;
  EXPECT_NE(err.find("using the default sampler"), std::string::npos) << err;
  EXPECT_EQ(def.sampler.top_k, UiState().sampler.top_k);
}

// The window's geometry goes through the same check on the real load path:
// each value named with the file, what it was, the range and what it became.
TEST(FitChoices, TheWindowGeometryIsFittedAndNamedByTheSettingsReader) {
  const std::string path = testing::TempDir() + "/fit_window.json";
  testutil::write_file(path, R"({"window_width": 100, "window_height": 99999, "window_x": 70000, "window_y": 20})");
  UiState ui;
  WindowSettings win;
  std::string err;
  EXPECT_FALSE(load_settings(path, ui, win, err));
  for (const std::string& needle : {path + ": window width 100 is outside 640..16384; using 640",
                                    path + ": window height 99999 is outside 400..16384; using 16384",
                                    path + ": window x 70000 is outside -32768..32767; centring the window"})
    EXPECT_NE(err.find(needle), std::string::npos) << needle << " not in:\n" << err;
  EXPECT_EQ(win.width, 640);
  EXPECT_EQ(win.height, 16384);
  EXPECT_EQ(win.x, -1);
  EXPECT_EQ(win.y, -1);
  // A second monitor left of the first has negative positions: kept.
  testutil::write_file(path, R"({"window_width": 800, "window_height": 600, "window_x": -1500, "window_y": 30})");
  WindowSettings left;
  err.clear();
  EXPECT_TRUE(load_settings(path, ui, left, err)) << err;
  EXPECT_EQ(left.x, -1500);
}

// A saved view's free camera, restored by the session (the window's path):
// out of the controls' reach, each value is brought back and named.
TEST(FitChoices, ASavedViewsCameraIsFittedAndNamedWhenRestored) {
  testutil::TempDir tmp("fit-camera");
  const std::string path = tmp / "lesson.json";
  testutil::write_file(path, R"({"kvscope_view": 1, "camera": {"target": [1, 2e9, 3], "distance": -1,
      "yaw": 0.5, "pitch": 3, "fov_y": 0.001, "preset": ""}})");
  Session s;
  s.execute(cmd::LoadView{path}, 0);
  for (const std::string& needle : {path + ": camera.distance -1 is outside 0.5..5000; using 0.5",
                                    path + ": camera.target[1] 2e+09 is outside -100000..100000; using 100000",
                                    path + ": camera.pitch 3 is outside -1.55..1.55; using 1.55",
                                    path + ": camera.fov_y 0.001 is outside 0.1..2.5; using 0.1"}) {
    bool found = false;
    for (const std::string& e : s.ui.errors) found |= e.find(needle) != std::string::npos;
    EXPECT_TRUE(found) << needle << " not in:\n" << joined(s.ui.errors);
  }
  EXPECT_EQ(s.ui.errors.size(), 4u) << joined(s.ui.errors);
  EXPECT_FLOAT_EQ(s.view.camera.distance, 0.5f);
  EXPECT_FLOAT_EQ(s.view.camera.pitch, 1.55f);
  EXPECT_FLOAT_EQ(s.view.camera.fov_y, 0.1f);
  EXPECT_FLOAT_EQ(s.view.camera.target.y, 1e5f);
  EXPECT_FLOAT_EQ(s.view.camera.yaw, 0.5f);
  EXPECT_FALSE(s.ui.auto_camera);
  // A camera the mouse could have made restores silently.
  testutil::write_file(path,
                       R"({"kvscope_view": 1, "camera": {"target": [4, 5, 6], "distance": 4000, "pitch": -1.5}})");
  Session t;
  t.execute(cmd::LoadView{path}, 0);
  EXPECT_TRUE(t.ui.errors.empty()) << joined(t.ui.errors);
  EXPECT_FLOAT_EQ(t.view.camera.distance, 4000.0f);
}

// settings.json's KV layout goes through the same check: read as saved,
// fitted to its ranges by the settings reader, then to the model when one
// loads (the session's path), and again on a switch to a smaller model.
TEST(FitChoices, TheSavedKvLayoutIsFittedToItsRangesAndTheModel) {
  testutil::TempDir tmp("fit-kv");
  const std::string path = tmp / "settings.json";
  testutil::write_file(path, R"({"kv_layout": {"dtype": "q4_0", "window": 300, "sinks": 299, "block": 2000000}})");
  UiState ui;
  WindowSettings win;
  std::string err;
  EXPECT_FALSE(load_settings(path, ui, win, err));
  EXPECT_EQ(err, path + ": kv_layout.block 2000000 is outside 0..1048576; using 1048576");
  EXPECT_EQ(ui.kv_layout.window, 300);  // a window this long may fit: the model decides
  Session s;
  s.ui = ui;
  s.fit_to_model(path);  // no model yet: nothing more to say
  EXPECT_TRUE(s.ui.errors.empty()) << joined(s.ui.errors);
  // 4 heads of 12 = 48-wide K/V rows (not whole q4_0 blocks), 128 positions.
  auto m = std::make_shared<Model>(shaped(2, 4, 48, 128, 300));
  s.engine.model = m;
  s.fit_to_model(path);  // as a model load does
  for (const std::string& needle :
       {path + ": kv_layout.window 300 is outside 0..128 (tiny's context is 128 positions); using 128",
        path + ": kv_layout.sinks 299 is outside 0..127 (sinks < the window of 128); using 127",
        path + ": kv_layout.block 1048576 is outside 0..128 (tiny's context is 128 positions); using 128",
        path + ": kv_layout.dtype q4_0 does not fit tiny (its K/V rows have 48 values, not a multiple of the "
               "32-value block); using f16"}) {
    bool found = false;
    for (const std::string& e : s.ui.errors) found |= e == needle;
    EXPECT_TRUE(found) << needle << " not in:\n" << joined(s.ui.errors);
  }
  EXPECT_EQ(s.ui.errors.size(), 4u) << joined(s.ui.errors);
  const KVLayout fitted = s.ui.kv_layout;
  EXPECT_EQ(fitted.dtype, KVDtype::kF16);
  EXPECT_EQ(fitted.window, 128);
  EXPECT_EQ(fitted.sinks, 127);
  EXPECT_EQ(fitted.block, 128);
  EXPECT_NO_THROW((void)fitted.on_model(m->config));
  // A switch to a model with a shorter context re-fits what the first allowed
  // (said in the status line, not blamed on the file).
  s.ui.errors.clear();
  s.engine.model = std::make_shared<Model>(shaped(2, 4, 48, 40, 300));
  s.fit_to_model();
  EXPECT_TRUE(s.ui.errors.empty()) << joined(s.ui.errors);
  EXPECT_EQ(s.ui.kv_layout.window, 40);
  EXPECT_EQ(s.ui.kv_layout.sinks, 39);
  EXPECT_EQ(s.ui.kv_layout.block, 40);
  EXPECT_NE(s.ui.status.find("kv_layout.window 128 is outside 0..40"), std::string::npos) << s.ui.status;
  // What cannot be read at all (an unknown format) is named by the reader.
  testutil::write_file(path, R"({"kv_layout": {"dtype": "q2_k", "window": 8}})");
  UiState other;
  err.clear();
  EXPECT_FALSE(load_settings(path, other, win, err));
  EXPECT_NE(err.find("kv_layout.dtype: expected f32, f16, q8_0 or q4_0, got \"q2_k\"; using a dense f32 cache"),
            std::string::npos)
      << err;
  EXPECT_EQ(other.kv_layout, KVLayout());
}

// The Cache panel's window, sinks and page controls end where the model's
// context (--ctx) does, and the restore check fits to the same ends: a value
// at an end is kept silently, one past it comes back to it.
TEST(FitChoices, TheCacheControlsEndAtTheModelsContext) {
  Model m = shaped(2, 4, 48, 40, 300);
  KVLayout k;
  k.window = 16;
  KVLayoutLimits lim = kv_layout_limits(k, &m.config);
  EXPECT_EQ(lim.window_max, 40);
  EXPECT_EQ(lim.sinks_max, 15);  // sinks < the window
  EXPECT_EQ(lim.block_max, 40);
  k.window = 1000;  // from a longer context: the sinks' end follows the window that fits
  EXPECT_EQ(kv_layout_limits(k, &m.config).sinks_max, 39);
  m.config.sliding_window = 8;  // the model's own, shorter window keeps the sinks inside it
  EXPECT_EQ(kv_layout_limits(k, &m.config).sinks_max, 7);
  m.config.sliding_window = 0;
  k.window = 0;
  EXPECT_EQ(kv_layout_limits(k, &m.config).sinks_max, 0);  // sinks need a window
  const KVLayoutLimits none = kv_layout_limits(k, nullptr);
  EXPECT_EQ(none.window_max, kKvWindowMaxNoModel);
  EXPECT_EQ(none.block_max, kKvBlockMaxNoModel);

  UiState ui;
  ui.kv_layout.window = lim.window_max;
  ui.kv_layout.sinks = lim.window_max - 1;
  ui.kv_layout.block = lim.block_max;
  EXPECT_TRUE(fit_choices(ui, FitContext{&m, "settings.json"}).empty());
  ui.kv_layout.window = lim.window_max + 1;
  ui.kv_layout.sinks = lim.window_max;
  ui.kv_layout.block = lim.block_max + 1;
  const std::vector<std::string> notes = fit_choices(ui, FitContext{&m, "settings.json"});
  EXPECT_EQ(notes.size(), 3u) << joined(notes);
  EXPECT_EQ(ui.kv_layout.window, 40);
  EXPECT_EQ(ui.kv_layout.sinks, 39);
  EXPECT_EQ(ui.kv_layout.block, 40);
  EXPECT_TRUE(has_note(notes, "settings.json: kv_layout.window 41 is outside 0..40 (tiny's context is 40 positions)"))
      << joined(notes);
}

// Eviction by score on a model with its own sliding window (Mistral's): one
// rule at a time, so the model's window stays and the rest of the layout too.
TEST(FitChoices, EvictionGivesWayToTheModelsOwnWindow) {
  Model m = shaped(2, 4, 48, 40, 300);
  m.config.sliding_window = 8;
  UiState ui;
  ui.kv_layout.evict = KVEvict::kTova;
  ui.kv_layout.budget = 6;
  ui.kv_layout.dtype = KVDtype::kF16;
  const std::vector<std::string> notes = fit_choices(ui, FitContext{&m, "settings.json"});
  ASSERT_EQ(notes.size(), 1u) << joined(notes);
  EXPECT_TRUE(has_note(notes,
                       "settings.json: kv_layout.evict tova: tiny has its own sliding window of 8 positions; "
                       "one eviction rule at a time; using the model's window alone"))
      << joined(notes);
  EXPECT_EQ(ui.kv_layout.evict, KVEvict::kNone);
  EXPECT_EQ(ui.kv_layout.budget, 0);
  EXPECT_EQ(ui.kv_layout.dtype, KVDtype::kF16);  // kept: only the rule gave way
}

// A scripted window run takes its text scale and size from the environment
// (no settings file): in range they apply; otherwise the message names the
// variable, what it expects and what it got, and nothing changes.
TEST(DemoWindow, TakesTheTextScaleAndSizeOrNamesTheVariable) {
  UiState ui;
  int w = 1280, h = 720;
  EXPECT_EQ(apply_demo_window("2.5", "1366x768", ui, w, h), "");
  EXPECT_FLOAT_EQ(ui.text_scale, 2.5f);
  EXPECT_EQ(w, 1366);
  EXPECT_EQ(h, 768);
  EXPECT_EQ(apply_demo_window(nullptr, nullptr, ui, w, h), "");
  EXPECT_FLOAT_EQ(ui.text_scale, 2.5f);
  EXPECT_EQ(apply_demo_window("", "", ui, w, h), "");  // empty reads as unset
  EXPECT_FLOAT_EQ(ui.text_scale, 2.5f);
  EXPECT_EQ(w, 1366);
  for (const char* bad : {"3", "0.5", "big", "2.5x", "nan"}) {
    const std::string err = apply_demo_window(bad, nullptr, ui, w, h);
    EXPECT_NE(err.find("KVSCOPE_DEMO_TEXT_SCALE"), std::string::npos) << bad;
    EXPECT_NE(err.find("0.75 to 2.5"), std::string::npos) << bad;
    EXPECT_FLOAT_EQ(ui.text_scale, 2.5f) << bad;
  }
  for (const char* bad : {"1366", "1366x", "100x100", "1366x768x24", "-1x768", "99999x768"}) {
    const std::string err = apply_demo_window(nullptr, bad, ui, w, h);
    EXPECT_NE(err.find("KVSCOPE_DEMO_SIZE"), std::string::npos) << bad;
    EXPECT_NE(err.find(std::string("\"") + bad + "\""), std::string::npos) << bad;
    EXPECT_EQ(w, 1366) << bad;
    EXPECT_EQ(h, 768) << bad;
  }
}

// $KVSCOPE_DEMO_CAMERA: a scripted run ends on that preset, whatever the run
// (the default tour walks every preset first); a bad name is named.
TEST(DemoWindow, EndsOnTheCameraPresetOrNamesTheVariable) {
  std::optional<CameraPreset> camera;
  EXPECT_EQ(apply_demo_camera(nullptr, camera), "");
  EXPECT_FALSE(camera.has_value());
  for (const char* bad : {"FRONT", "left", "top "}) {
    const std::string err = apply_demo_camera(bad, camera);
    EXPECT_NE(err.find("KVSCOPE_DEMO_CAMERA"), std::string::npos) << bad;
    EXPECT_NE(err.find("front, top, side or follow"), std::string::npos) << bad;
    EXPECT_FALSE(camera.has_value()) << bad;
  }
  EXPECT_EQ(apply_demo_camera("side", camera), "");
  ASSERT_TRUE(camera.has_value());
  EXPECT_EQ(*camera, CameraPreset::kSide);
  const EngineState engine;
  for (const std::string view : {"", "heatmaps", "beams"}) {
    std::optional<CameraPreset> last;
    for (int frame = 0; frame < 200; ++frame)
      for (const UiCommand& c : demo_script(frame, 200, engine, view, camera))
        if (const auto* set = std::get_if<cmd::SetCamera>(&c)) last = set->preset;
    ASSERT_TRUE(last.has_value()) << view;
    EXPECT_EQ(*last, CameraPreset::kSide) << view;
  }
}

// The tour's saved view is written, read back and removed on three distinct
// frames, whatever the run's length (a short run used to remove the file
// before the frame's read ran), or not at all when the run is too short.
TEST(DemoWindow, SavedViewIsReadBackBeforeItIsRemovedInRunsOfAnyLength) {
  const EngineState engine;
  for (int total = 1; total <= 300; ++total) {
    int save = -1, load = -1;
    for (int frame = 0; frame < total; ++frame) {
      for (const UiCommand& c : demo_script(frame, total, engine, "", std::nullopt)) {
        if (std::holds_alternative<cmd::SaveView>(c)) save = frame;
        if (std::holds_alternative<cmd::LoadView>(c)) load = frame;
      }
    }
    EXPECT_EQ(save < 0, load < 0) << total;
    if (total >= 60) {
      EXPECT_GE(save, 0) << total;  // runs of a few seconds keep the step
    }
    if (save >= 0) {
      EXPECT_LT(save, load) << total;
      EXPECT_LT(load + 1, total) << total;  // the frame that removes the file comes after the read
    }
  }
}

// $KVSCOPE_DEMO_VIEW: every view README lists is taken; anything else is
// named (the scripted run then shows it in the error panel and exits 1).
TEST(DemoWindow, TakesAKnownViewOrNamesTheVariable) {
  std::string view = "stale";
  EXPECT_EQ(apply_demo_view(nullptr, view), "");
  EXPECT_EQ(view, "");
  EXPECT_EQ(apply_demo_view("", view), "");
  EXPECT_EQ(view, "");
  for (const char* good : {"timeline", "sampling", "phases", "kv", "pages", "heatmaps", "training", "presentation",
                           "qkv", "beams", "speculative", "predict"}) {
    EXPECT_EQ(apply_demo_view(good, view), "") << good;
    EXPECT_EQ(view, good);
  }
  for (const char* bad : {"Beams", "beam", "kv ", "speculative,qkv"}) {
    const std::string err = apply_demo_view(bad, view);
    EXPECT_NE(err.find("KVSCOPE_DEMO_VIEW"), std::string::npos) << bad;
    EXPECT_NE(err.find(std::string("\"") + bad + "\""), std::string::npos) << err;
    EXPECT_EQ(view, "") << bad;
  }
}

// Every $KVSCOPE_DEMO_* variable at once, as the window checks them before
// it opens: nothing set or all good is no problem; each bad value is one
// message naming its variable, the value and what the variable takes.
TEST(DemoWindow, EveryBadDemoVariableIsNamedBeforeTheWindowOpens) {
  std::map<std::string, std::string> vars;
  auto env = [&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_TRUE(demo_env_problems(env).empty());
  vars = {{"KVSCOPE_DEMO_VIEW", "beams"},
          {"KVSCOPE_DEMO_TEXT_SCALE", "2.5"},
          {"KVSCOPE_DEMO_SIZE", "1280x720"},
          {"KVSCOPE_DEMO_CAMERA", "top"},
          {"KVSCOPE_DEMO_OPEN", "right,model"}};
  EXPECT_TRUE(demo_env_problems(env).empty());
  vars["KVSCOPE_DEMO_VIEW"] = "bogus";
  std::vector<std::string> p = demo_env_problems(env);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("KVSCOPE_DEMO_VIEW"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("\"bogus\""), std::string::npos) << p[0];
  for (const char* view :
       {"timeline", "beams", "speculative", "serving-static", "predict", "chat"})  // the values it takes
    EXPECT_NE(p[0].find(view), std::string::npos) << p[0];
  vars["KVSCOPE_DEMO_CAMERA"] = "above";
  vars["KVSCOPE_DEMO_TEXT_SCALE"] = "9";
  p = demo_env_problems(env);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NE(p[1].find("KVSCOPE_DEMO_TEXT_SCALE"), std::string::npos) << p[1];
  EXPECT_NE(p[2].find("\"above\""), std::string::npos) << p[2];
}

// $KVSCOPE_DEMO_OPEN: the panels a scripted screenshot opens, each named; a
// bad list is named and opens nothing.
TEST(DemoWindow, OpensTheNamedPanelsOrNamesTheVariable) {
  std::vector<std::string> panels;
  EXPECT_EQ(apply_demo_open(nullptr, panels), "");
  EXPECT_TRUE(panels.empty());
  EXPECT_EQ(apply_demo_open("", panels), "");  // empty reads as unset, as KVSCOPE_DEMO_VIEW="" does
  EXPECT_TRUE(panels.empty());
  std::optional<CameraPreset> camera;
  EXPECT_EQ(apply_demo_camera("", camera), "");
  EXPECT_FALSE(camera.has_value());
  for (const char* bad : {"right,", "Right", "left,sidebar", "model qkv"}) {
    const std::string err = apply_demo_open(bad, panels);
    EXPECT_NE(err.find("KVSCOPE_DEMO_OPEN"), std::string::npos) << bad;
    EXPECT_NE(err.find("left, right, lessons, qkv, next and model"), std::string::npos) << bad;
    EXPECT_TRUE(panels.empty()) << bad;
  }
  EXPECT_EQ(apply_demo_open("right,model,qkv", panels), "");
  UiState ui;
  ui.right_open = false;
  open_demo_panels(panels, ui);
  EXPECT_TRUE(ui.right_open);
  EXPECT_TRUE(ui.model_open);
  EXPECT_TRUE(ui.qkv_open);
  EXPECT_FALSE(ui.next_token_open);
  EXPECT_FALSE(ui.teach_open);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// 1280 x 720 at text scale 2.5, as the layout measures it: sidebars of 345
// (folded 60), the bottom strip 176 tall (288 with the lessons), the view's
// banner and legend 280.
PanelRoom room_720p_at_2_5() {
  return PanelRoom{1280, 720, 345, 60, 176, 288, 280};
}

TEST(FitPanels, LessonsFoldWhenThePictureWouldBeTooShort) {
  PanelsOpen open{true, true, true};
  const std::string note = fit_panels(room_720p_at_2_5(), open, /*lessons_kept=*/false);
  EXPECT_FALSE(open.lessons);  // 720 - 288 - 280 = 152 < 35 % of 720
  // 1280 - 2 x 345 = 590 < half of 1280: the right sidebar folds, the left stays.
  EXPECT_TRUE(open.left);
  EXPECT_FALSE(open.right);
  EXPECT_NE(note.find("the lessons and the right sidebar"), std::string::npos) << note;
}

TEST(FitPanels, LessonsTheUserJustOpenedStay) {
  PanelsOpen open{true, true, true};
  fit_panels(room_720p_at_2_5(), open, /*lessons_kept=*/true);
  EXPECT_TRUE(open.lessons);
  EXPECT_FALSE(open.right);  // a wider view: its banner and legend wrap into fewer rows
  EXPECT_TRUE(open.left);
}

TEST(FitPanels, NothingFoldsWhereTheViewHasRoom) {
  // 1366 x 768 at text scale 1: sidebars of 290, banner and legend 150.
  PanelsOpen open{true, true, true};
  EXPECT_EQ(fit_panels(PanelRoom{1366, 768, 290, 30, 70, 307, 150}, open, false), "");
  EXPECT_TRUE(open.left && open.right && open.lessons);
}

TEST(FitPanels, BothSidebarsFoldInANarrowWindow) {
  PanelsOpen open{true, true, false};
  fit_panels(PanelRoom{640, 720, 200, 60, 100, 288, 100}, open, false);
  EXPECT_FALSE(open.right);  // 640 - 200 - 60 = 380 >= 320: the left one stays
  EXPECT_TRUE(open.left);
  open = PanelsOpen{true, true, false};
  fit_panels(PanelRoom{640, 720, 300, 60, 100, 288, 100}, open, false);
  EXPECT_FALSE(open.right);  // 640 - 300 - 60 = 280 < 320: the left one folds too
  EXPECT_FALSE(open.left);
}

TEST(FitPanels, FoldingThatCannotHelpFoldsNothing) {
  // The lessons open or not, the strip is as tall: nothing to gain.
  PanelsOpen open{false, false, true};
  EXPECT_EQ(fit_panels(PanelRoom{1280, 720, 345, 60, 288, 288, 500}, open, false), "");
  EXPECT_TRUE(open.lessons);
}

// The remembered choices are one table (choices.h): every row with a settings
// name survives a save and a load of the settings file, every row with a view
// name a saved view, each at a value other than its default and inside its
// range; and each row's range is the one fit_choices fits to (a value past it
// is named by the row's label).
TEST(Choices, EveryRowRoundTripsThroughTheSettingsFileAndSavedViewsAndFitsToItsRange) {
  testutil::TempDir tmp("choices");
  UiState set;
  for (const ChoiceRow& row : choice_table()) {
    std::visit(overloaded{[&](int UiState::*m) {
                            set.*m = set.*m == static_cast<int>(row.hi) ? static_cast<int>(row.lo)
                                                                        : static_cast<int>(row.hi);
                          },
                          [&](float UiState::*m) { set.*m = static_cast<float>(row.lo + row.hi) / 2; },
                          [&](bool UiState::*m) { set.*m = !(set.*m); },
                          [&](std::string UiState::*m) { set.*m = std::string("x/") + row.label; }},
               row.member);
  }
  WindowSettings win;
  std::string err;
  const std::string path = tmp / "settings.json";
  ASSERT_TRUE(save_settings(path, set, win, err)) << err;
  UiState got;
  ASSERT_TRUE(load_settings(path, got, win, err)) << err;
  SavedView view;
  view.choices() = set.choices();
  const SavedView back = view_from_json(view_to_json(view), "v.json");
  UiState from_view;
  from_view.choices() = back.choices();
  int in_settings = 0, in_views = 0;
  for (const ChoiceRow& row : choice_table()) {
    const bool same = std::visit([&](auto m) { return set.*m == got.*m; }, row.member);
    const bool same_view = std::visit([&](auto m) { return set.*m == from_view.*m; }, row.member);
    if (*row.key) {
      EXPECT_TRUE(same) << row.key;
      ++in_settings;
    }
    if (*row.view_key) {
      EXPECT_TRUE(same_view) << row.view_key;
      ++in_views;
    }
    EXPECT_TRUE(*row.key || *row.view_key) << row.label << " is kept nowhere";
  }
  EXPECT_GE(in_settings, 20);
  EXPECT_GE(in_views, 7);
  // Past each number's range: fitted back and named.
  for (const ChoiceRow& row : choice_table()) {
    UiState ui;
    bool number = true;
    std::visit(overloaded{[&](int UiState::*m) { ui.*m = static_cast<int>(row.hi) + 1; },
                          [&](float UiState::*m) { ui.*m = static_cast<float>(row.hi) * 2 + 1; },
                          [&](auto) { number = false; }},
               row.member);
    if (!number) continue;
    const std::vector<std::string> notes = fit_choices(ui, FitContext{nullptr, "s.json"});
    EXPECT_TRUE(has_note(notes, row.label)) << row.label << ":\n" << joined(notes);
  }
}

}  // namespace
}  // namespace kvscope
