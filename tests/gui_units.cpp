// Logic of the window that needs no display: the engine worker thread
// (commands in, records out, errors reported, the current model kept), the
// FLOP curve the Cache panel computes for the other mode, and settings
// persistence. Part of kvscope_render_tests; the model comes from $MODEL
// (set by tests/gui_render_pixels.sh).
#include <gtest/gtest.h>
#include <imgui_internal.h>

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "app/gui/input.h"
#include "app/gui/layout.h"
#include "app/gui/panels/panels.h"
#include "app/session/session.h"
#include "app/session/settings.h"
#include "app/session/state.h"
#include "app/worker/worker.h"
#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "render/overlay/overlay.h"
#include "session_clock.h"

namespace kvscope {
namespace {

std::string model_dir() {
  const char* m = std::getenv("MODEL");
  if (!m || !*m) throw std::runtime_error("set MODEL to a GPT-2 folder (tests/gui_render_pixels.sh does)");
  return m;
}

// Polls until `want` events of `kind` arrived (or 60 s).
std::vector<WorkerEvent> wait_for(EngineWorker& w, WorkerEvent::Kind kind, int want, std::vector<WorkerEvent>* all) {
  std::vector<WorkerEvent> got;
  const auto t0 = std::chrono::steady_clock::now();
  while (static_cast<int>(got.size()) < want && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    for (WorkerEvent& e : w.poll()) {
      if (all) all->push_back(e);
      if (e.kind == kind) got.push_back(e);
      if (e.kind == WorkerEvent::Kind::kError && kind != WorkerEvent::Kind::kError)
        ADD_FAILURE() << "unexpected worker error: " << e.message;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return got;
}

TEST(EngineWorker, RunsStepsOffTheUiThreadAndKeepsTheModelOnErrors) {
  int wakes = 0;
  std::mutex mu;
  EngineWorker w([&] {
    std::lock_guard<std::mutex> lock(mu);
    ++wakes;
  });
  w.send(wcmd::LoadModel{model_dir()});
  auto loaded = wait_for(w, WorkerEvent::Kind::kModelLoaded, 1, nullptr);
  ASSERT_EQ(loaded.size(), 1u);
  ASSERT_TRUE(loaded[0].model);
  const int n_layer = loaded[0].model->config.n_layer;

  wcmd::Start start;
  start.prompt = "The capital of France is";
  start.options.max_new = 50;
  w.send(start);
  for (int i = 0; i < 4; ++i) w.send(wcmd::Step{});
  auto recs = wait_for(w, WorkerEvent::Kind::kRecord, 4, nullptr);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_TRUE(recs[0].record()->prefill);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(recs[i].record()->index, i);
    EXPECT_EQ(recs[i].record()->mode, CacheMode::kKV);
    EXPECT_EQ(recs[i].generation, recs[0].generation);
    EXPECT_EQ(recs[i].record()->n_layer, n_layer);
  }
  // Mode switches apply from the next step.
  w.send(wcmd::SetMode{CacheMode::kNoCache});
  w.send(wcmd::Step{});
  auto nc = wait_for(w, WorkerEvent::Kind::kRecord, 1, nullptr);
  ASSERT_EQ(nc.size(), 1u);
  EXPECT_EQ(nc[0].record()->mode, CacheMode::kNoCache);
  EXPECT_EQ(nc[0].record()->recomputed, nc[0].record()->seq_len - 1);
  EXPECT_EQ(nc[0].record()->kv_bytes, 0u);

  // A bad folder: an error naming the load, and the generation goes on.
  w.send(wcmd::LoadModel{"/nonexistent/kvscope-model"});
  auto errs = wait_for(w, WorkerEvent::Kind::kError, 1, nullptr);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].failed, WorkerOp::kLoadModel);
  EXPECT_NE(errs[0].message.find("/nonexistent/kvscope-model"), std::string::npos) << errs[0].message;
  w.send(wcmd::Step{});
  auto after = wait_for(w, WorkerEvent::Kind::kRecord, 1, nullptr);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].record()->index, 5);

  // An empty prompt is refused; nothing crashes.
  wcmd::Start empty;
  empty.prompt = "";
  empty.options.max_new = 5;
  w.send(empty);
  auto e2 = wait_for(w, WorkerEvent::Kind::kError, 1, nullptr);
  ASSERT_EQ(e2.size(), 1u);
  EXPECT_EQ(e2[0].failed, WorkerOp::kStart);
  while (w.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(wakes, 8);  // the UI is woken for every event
}

TEST(EngineWorker, CancelledStepsNeverRun) {
  EngineWorker w;
  w.send(wcmd::LoadModel{model_dir()});
  wcmd::Start start;
  start.prompt = "def ";
  start.options.max_new = 1000;
  w.send(start);
  for (int i = 0; i < 200; ++i) w.send(wcmd::Step{});
  w.cancel_steps();
  while (w.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  int records = 0;
  for (const WorkerEvent& e : w.poll()) records += e.kind == WorkerEvent::Kind::kRecord;
  EXPECT_LT(records, 200);
}

// The engine's FLOP convention, written out here independently:
// per layer 24 n d^2 + 4 d sum(L_i), plus the LM head 2 d V.
uint64_t formula(const Config& c, uint64_t n, uint64_t T) {
  const uint64_t d = c.n_embd;
  uint64_t sum_l = 0;
  for (uint64_t i = 0; i < n; ++i) sum_l += T - n + i + 1;
  return c.n_layer * (24 * n * d * d + 4 * d * sum_l) + 2 * d * c.vocab_size;
}

TEST(CachePanel, OtherModeCurveFollowsTheFormula) {
  EngineState engine;
  engine.model = load_model(model_dir());
  Generator g(engine.model);
  GenerateOptions opt;
  opt.max_new = 12;
  g.start("Once upon a time", opt);
  engine.tree.start();
  while (RecordPtr r = g.step()) engine.tree.push(r);
  ASSERT_GE(engine.records().size(), 2u);
  const Config& c = engine.model->config;
  const auto no_cache = computed_flops(engine, CacheMode::kNoCache);
  const auto kv = computed_flops(engine, CacheMode::kKV);
  ASSERT_EQ(no_cache.size(), engine.records().size());
  for (size_t i = 0; i < engine.records().size(); ++i) {
    const RecordPtr& r = engine.records()[i];
    const uint64_t T = r->seq_len;
    EXPECT_EQ(static_cast<uint64_t>(no_cache[i]), formula(c, T, T)) << i;
    EXPECT_EQ(static_cast<uint64_t>(kv[i]), r->prefill ? formula(c, T, T) : formula(c, 1, T)) << i;
    // The run was KV CACHE: its real counters equal the KV curve.
    EXPECT_EQ(static_cast<double>(r->flops), kv[i]) << i;
  }
}

// The timeline's shown step and predict mode's hiding, from the UI state alone.
TEST(Timeline, ShownStepAndPredictHiding) {
  EngineState engine;
  UiState ui;
  EXPECT_EQ(shown_step(engine, ui), -1);  // nothing generated yet
  engine.tree.start();
  for (int i = 0; i < 5; ++i) {
    auto r = std::make_shared<StepRecord>();
    r->index = i;
    r->prob = 0.5f;
    r->prefill = i == 0;
    engine.tree.push(RecordPtr(r));
  }
  EXPECT_EQ(shown_step(engine, ui), 4);  // -1 follows the newest
  ui.view_step = 2;
  EXPECT_EQ(shown_step(engine, ui), 2);
  ui.view_step = 99;
  EXPECT_EQ(shown_step(engine, ui), 4);  // clamped
  ui.view_step = -1;
  EXPECT_FALSE(prediction_hidden(engine, ui));
  ui.predict = true;
  ui.revealed_step = 3;
  EXPECT_TRUE(prediction_hidden(engine, ui));  // step 4 not yet revealed
  ui.view_step = 2;
  EXPECT_FALSE(prediction_hidden(engine, ui));  // the past is never hidden
  ui.view_step = -1;
  ui.revealed_step = 4;
  EXPECT_FALSE(prediction_hidden(engine, ui));
}

// Predict mode hides the newest step of every strategy's timeline (the beam
// search's steps, the speculative iterations), not only sampling's.
TEST(Timeline, PredictHidesTheNewestStepOfEveryStrategy) {
  EngineState engine;
  UiState ui;
  ui.predict = true;
  engine.strategy = strategy::Beam{};
  for (int i = 0; i < 3; ++i) {
    auto r = std::make_shared<BeamStepRecord>();
    r->index = i;
    engine.tree.push_beam(r);
  }
  ui.revealed_step = 1;
  EXPECT_TRUE(prediction_hidden(engine, ui));  // beam step 2 not yet revealed (no sampling record at all)
  ui.revealed_step = 2;
  EXPECT_FALSE(prediction_hidden(engine, ui));
  engine.strategy = strategy::Speculative{};
  engine.tree.clear();  // (a new generation: one strategy per timeline)
  for (int i = 0; i < 4; ++i) {
    auto it = std::make_shared<SpecIteration>();
    it->index = i;
    engine.tree.push_spec(it);
  }
  EXPECT_TRUE(prediction_hidden(engine, ui));  // iteration 3
  ui.view_step = 2;
  EXPECT_FALSE(prediction_hidden(engine, ui));  // the past is never hidden
}

// "Show attention rays" is saved as "rays"; files written before named it "beams" and keep it.
TEST(Settings, AttentionRaysKeepTheirOlderName) {
  UiState ui;
  WindowSettings win;
  std::string err;
  ASSERT_TRUE(settings_from_json(R"({"beams": false})", "old.json", ui, win, err)) << err;
  EXPECT_FALSE(ui.rays);
  UiState fresh;
  ASSERT_TRUE(settings_from_json(R"({"rays": false})", "new.json", fresh, win, err)) << err;
  EXPECT_FALSE(fresh.rays);
}

TEST(Settings, RoundTripAndBadFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvscope-settings-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "settings.json").string();
  UiState ui;
  WindowSettings win;
  std::string err;
  ASSERT_TRUE(load_settings(path, ui, win, err)) << "a missing file means defaults";
  ui.preset = kNumPresets;
  ui.custom_prompt = "Il \xC3\xA9tait une fois";
  ui.speed = 0.5f;
  ui.layer = 2;
  ui.head = -1;
  ui.camera = CameraPreset::kSide;
  ui.text_scale = 1.5f;
  ui.colour_blind = true;
  ui.kv_context = 100000;
  ui.kv_dtype = 3;
  ui.sampler.greedy = false;
  ui.sampler.temperature = 0.7f;
  ui.sampler.seed = 42;
  ui.kv_layout.dtype = KVDtype::kQ4_0;
  ui.kv_layout.window = 64;
  ui.kv_layout.sinks = 4;
  ui.kv_layout.block = 16;
  win.width = 1440;
  win.height = 810;
  ASSERT_TRUE(save_settings(path, ui, win, err)) << err;
  UiState back;
  WindowSettings wback;
  ASSERT_TRUE(load_settings(path, back, wback, err)) << err;
  EXPECT_EQ(back.preset, kNumPresets);
  EXPECT_EQ(back.custom_prompt, ui.custom_prompt);
  EXPECT_FLOAT_EQ(back.speed, 0.5f);
  EXPECT_EQ(back.layer, 2);
  EXPECT_EQ(back.camera, CameraPreset::kSide);
  EXPECT_FLOAT_EQ(back.text_scale, 1.5f);
  EXPECT_TRUE(back.colour_blind);
  EXPECT_EQ(back.kv_context, 100000);
  EXPECT_EQ(back.kv_dtype, 3);
  EXPECT_FALSE(back.sampler.greedy);
  EXPECT_FLOAT_EQ(back.sampler.temperature, 0.7f);
  EXPECT_EQ(back.sampler.seed, 42u);
  EXPECT_EQ(back.kv_layout, ui.kv_layout);
  EXPECT_EQ(wback.width, 1440);
  EXPECT_EQ(wback.height, 810);
  // Garbage: defaults and a message naming the file.
  { std::ofstream(path) << "{not json"; }
  UiState def;
  err.clear();
  EXPECT_FALSE(load_settings(path, def, wback, err));
  EXPECT_NE(err.find(path), std::string::npos);
  EXPECT_FLOAT_EQ(def.speed, UiState().speed);
  // Out-of-range values are clamped and named (fit_choices), wrong types ignored.
  { std::ofstream(path) << R"({"speed": 1000, "text_scale": "big", "preset": -3})"; }
  UiState clamp;
  err.clear();
  EXPECT_FALSE(load_settings(path, clamp, wback, err));
  EXPECT_NE(err.find("speed"), std::string::npos) << err;
  EXPECT_FLOAT_EQ(clamp.speed, 8.0f);
  EXPECT_FLOAT_EQ(clamp.text_scale, 1.0f);
  EXPECT_EQ(clamp.preset, 0);
  // Numbers a field's type cannot hold are ignored like a wrong type (never
  // cast: 1e12 as an int is undefined behaviour); whole-valued doubles count.
  {
    std::ofstream(path) << R"({"layer": 1e12, "head": 2.0, "max_new": 9223372036854775807, "seed": -1,)"
                        << R"( "window_width": 1.5, "speed": 1e300, "kv_layout": {"window": 4.0}})";
  }
  UiState big;
  WindowSettings wbig;
  err.clear();
  load_settings(path, big, wbig, err);
  EXPECT_EQ(big.layer, UiState().layer);
  EXPECT_EQ(big.head, 2);
  EXPECT_EQ(big.max_new, UiState().max_new);
  EXPECT_EQ(big.sampler.seed, UiState().sampler.seed);
  EXPECT_EQ(wbig.width, WindowSettings().width);
  EXPECT_FLOAT_EQ(big.speed, UiState().speed);
  EXPECT_EQ(big.kv_layout.window, 4);
  { std::ofstream(path) << R"({"kv_layout": {"window": 1e12}})"; }
  UiState kvbig;
  err.clear();
  EXPECT_FALSE(load_settings(path, kvbig, wbig, err));
  EXPECT_NE(err.find("kv_layout"), std::string::npos) << err;
  EXPECT_TRUE(kvbig.kv_layout.is_default());
  // A KV layout that cannot be read: named, and dense f32 instead; the rest is kept.
  for (const char* bad :
       {R"({"speed": 2, "kv_layout": {"dtype": "q3_k", "window": 8}})",
        R"({"speed": 2, "kv_layout": {"block": "sixteen"}})", R"({"speed": 2, "kv_layout": [1, 2]})"}) {
    { std::ofstream(path) << bad; }
    UiState kv;
    kv.kv_layout.window = 32;
    err.clear();
    EXPECT_FALSE(load_settings(path, kv, wback, err)) << bad;
    EXPECT_NE(err.find("kv_layout"), std::string::npos) << err;
    EXPECT_NE(err.find("dense f32"), std::string::npos) << err;
    EXPECT_TRUE(kv.kv_layout.is_default()) << bad;
    EXPECT_FLOAT_EQ(kv.speed, 2.0f) << bad;
  }
  // Out of range: the field goes to its nearest bound (fit_choices), named.
  for (const auto& [bad, said] :
       {std::pair<const char*, const char*>{R"({"kv_layout": {"window": 8, "sinks": 8}})",
                                            "kv_layout.sinks 8 is outside 0..7 (sinks < the window of 8); using 7"},
        {R"({"kv_layout": {"window": 0, "sinks": 2}})",
         "kv_layout.sinks 2 is outside 0..0 (sinks need a window); using 0"},
        {R"({"kv_layout": {"window": -5}})", "kv_layout.window -5 is outside 0..1048576; using 0"}}) {
    { std::ofstream(path) << bad; }
    UiState kv;
    err.clear();
    EXPECT_FALSE(load_settings(path, kv, wback, err)) << bad;
    EXPECT_EQ(err, path + ": " + said) << bad;
  }
  fs::remove_all(dir);
}

// The chat view at 1280x720 and text scale 2.5 (a projector), after two
// turns (one on a model whose context holds only one): its column leaves the conversation's 3D view at least half the
// window, and the message box and its buttons stay on screen (the messages
// shrink first). ImGui is driven headless, as above.
TEST(ChatLayout, TheMessageBoxStaysOnScreenAtTextScale25) {
  Session s;
  SessionClock clock{s};
  s.load_model(model_dir());
  ASSERT_TRUE(clock.wait([&] { return s.engine.model != nullptr; }));
  s.ui.chat_format = 1;  // ChatML (the test model has no template)
  s.ui.chat_max_new = 24;
  s.execute(Commands{cmd::ChatOpen{true}}, clock.now());
  ASSERT_TRUE(clock.wait([&] { return s.engine.chat.pub.model != nullptr; })) << s.engine.chat.template_error;
  for (const char* ask : {"What is the capital of France?", "And of Spain?"}) {
    s.execute(Commands{cmd::ChatSend{ask}}, clock.now());
    ASSERT_TRUE(clock.wait([&] { return !s.engine.chat.pub.generating; }));
  }
  ASSERT_GE(s.engine.chat.pub.turns.size(), 1u);  // (a 128-position fallback model holds one)
  for (const float scale : {1.0f, 2.5f}) {
    SCOPED_TRACE("text scale " + std::to_string(scale));
    ImGuiContext* ctx = ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1280, 720);
    load_fonts(scale);
    ImGui::GetStyle().ScaleAllSizes(scale);
    s.ui.text_scale = scale;
    unsigned char* px = nullptr;
    int tw = 0, th = 0;
    io.Fonts->GetTexDataAsRGBA32(&px, &tw, &th);
    ViewRect v{};
    for (int f = 0; f < 3; ++f) {
      io.DeltaTime = 1.0f / 60.0f;
      ImGui::NewFrame();
      Commands cmds;
      v = layout_panels(s.engine, s.ui, 1280, 720, cmds);
      ImGui::EndFrame();
      EXPECT_TRUE(cmds.empty());
    }
    EXPECT_GE(v.w, 640.0f);
    EXPECT_EQ(v.x + v.w, 1280.0f);
    // The messages' child window, and under it the box and the row of buttons, fit the window.
    const ImGuiWindow* list = nullptr;
    for (const ImGuiWindow* w : ctx->Windows)
      if (std::strstr(w->Name, "##chat_messages")) list = w;
    ASSERT_NE(list, nullptr);
    const float bottom = list->Pos.y + list->Size.y;
    EXPECT_GE(list->Size.y, 4 * ImGui::GetTextLineHeightWithSpacing());  // at least four lines of messages
    EXPECT_LE(bottom + 2 * ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y, 720.0f);
    ImGui::DestroyContext(ctx);
  }
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// The KV layout's eviction by score (the Cache panel's rule and budget) is
// saved and read back; a rule kvscope does not know, a window beside a rule
// and a budget without one are named (one eviction rule at a time).
TEST(Settings, KvEvictionRoundTripsAndBadValuesAreNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvscope-settings-evict-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "settings.json").string();
  UiState ui;
  WindowSettings win;
  std::string err;
  ui.kv_layout.evict = KVEvict::kH2O;
  ui.kv_layout.budget = 12;
  ui.kv_layout.block = 4;
  ASSERT_TRUE(save_settings(path, ui, win, err)) << err;
  UiState back;
  ASSERT_TRUE(load_settings(path, back, win, err)) << err;
  EXPECT_EQ(back.kv_layout, ui.kv_layout);
  // SnapKV's window, kernel and pooling are kept beside the rule.
  UiState snap = ui;
  snap.kv_layout.evict = KVEvict::kSnapKV;
  snap.kv_layout.snap_window = 3;
  snap.kv_layout.snap_pool = 5;
  snap.kv_layout.snap_pooling = KVPooling::kAvg;
  ASSERT_TRUE(save_settings(path, snap, win, err)) << err;
  UiState snap_back;
  ASSERT_TRUE(load_settings(path, snap_back, win, err)) << err;
  EXPECT_EQ(snap_back.kv_layout, snap.kv_layout);
  { std::ofstream(path) << R"({"kv_layout": {"evict": "lru", "budget": 8}})"; }
  UiState lru;
  EXPECT_FALSE(load_settings(path, lru, win, err));
  EXPECT_EQ(err, "settings file " + path +
                     ": kv_layout.evict: expected none, tova, h2o or snapkv, got \"lru\"; using a dense f32 cache");
  EXPECT_TRUE(lru.kv_layout.is_default());
  for (const auto& [bad, said] :
       {std::pair<const char*, const char*>{
            R"({"kv_layout": {"evict": "tova", "budget": 8, "window": 16}})",
            "kv_layout.evict tova with a sliding window: one eviction rule at a time; using the window alone"},
        {R"({"kv_layout": {"evict": "tova", "budget": 0}})", "kv_layout.budget 0 is outside 1..1048576; using 1"},
        {R"({"kv_layout": {"budget": 8}})",
         "kv_layout.budget 8 is outside 0..0 (a budget needs an eviction rule); using 0"}}) {
    { std::ofstream(path) << bad; }
    UiState kv;
    err.clear();
    EXPECT_FALSE(load_settings(path, kv, win, err)) << bad;
    EXPECT_EQ(err, path + ": " + said) << bad;
    EXPECT_FALSE(kv.kv_layout.evict != KVEvict::kNone && kv.kv_layout.window > 0) << bad;
  }
  fs::remove_all(dir);
}

TEST(Settings, WindowFitsTheWorkArea) {
  const ScreenRect desk{0, 27, 1280, 693};  // a 1280x720 projector under a top bar
  WindowSettings first;                     // the default size, no position yet
  ScreenRect r = fit_window(first, desk);
  EXPECT_EQ(r.w, 1280);
  EXPECT_EQ(r.h, 693);
  EXPECT_EQ(r.x, 0);
  EXPECT_EQ(r.y, 27);
  WindowSettings huge;  // a saved size far beyond any screen, placed off it
  huge.width = huge.height = 16384;
  huge.x = 5000;
  huge.y = -20;
  r = fit_window(huge, desk);
  EXPECT_EQ(r.w, 1280);
  EXPECT_EQ(r.h, 693);
  EXPECT_EQ(r.x, 0);
  EXPECT_EQ(r.y, 27);
  WindowSettings small;
  small.width = 800;
  small.height = 500;
  small.x = 900;  // would hang off the right edge
  small.y = 100;
  r = fit_window(small, desk);
  EXPECT_EQ(r.w, 800);
  EXPECT_EQ(r.h, 500);
  EXPECT_EQ(r.x, 480);
  EXPECT_EQ(r.y, 100);
  small.x = small.y = -1;  // no saved position: centred
  r = fit_window(small, {100, 0, 1366, 768});
  EXPECT_EQ(r.x, 100 + (1366 - 800) / 2);
  EXPECT_EQ(r.y, (768 - 500) / 2);
}

// The Serving view is one ImGui window over the whole window, the selected
// request's 3D view a hole in it: a left drag there orbits the one camera
// (the plain view's) and the wheel zooms it; the same drag on the lanes'
// canvas above it moves nothing. ImGui is driven headless (no display): the
// window's own layout_panels and view_mouse, frame by frame.
TEST(ServingInput, DragOrbitsAndWheelZoomsTheRequestView) {
  Session s;
  SessionClock clock{s};
  auto now = [&] { return clock.now(); };
  auto wait = [&](const std::function<bool()>& ok) { return clock.wait(ok); };
  ASSERT_TRUE(clock.serve_tiny());
  s.execute(Commands{cmd::ServeStep{2}}, now());
  ASSERT_TRUE(wait([&] { return s.engine.serving.steps() >= 3 && !s.engine.serving.busy; }));
  s.ui.serving.selected = 0;
  ImGuiContext* ctx = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(1280, 720);
  load_fonts(1.0f);
  unsigned char* px = nullptr;
  int tw = 0, th = 0;
  io.Fonts->GetTexDataAsRGBA32(&px, &tw, &th);  // (built: no renderer needed)
  auto frame = [&](ImVec2 mouse, bool down, float wheel) {
    io.DeltaTime = 1.0f / 60.0f;
    io.MousePos = mouse;
    io.MouseDown[0] = down;
    io.MouseWheel = wheel;
    ImGui::NewFrame();
    Commands cmds;
    const ViewRect v = layout_panels(s.engine, s.ui, 1280, 720, cmds);
    view_mouse(s, Scene{}, v, false);
    ImGui::EndFrame();
  };
  auto drag = [&](ImVec2 from) {
    frame(from, false, 0);
    frame(from, true, 0);
    for (int i = 1; i <= 4; ++i) frame(ImVec2(from.x + 20.0f * i, from.y + 5.0f * i), true, 0);
    frame(ImVec2(from.x + 80, from.y + 20), false, 0);
  };
  frame(ImVec2(-1, -1), false, 0);
  frame(ImVec2(-1, -1), false, 0);
  const UiState::Serving& sv = s.ui.serving;
  ASSERT_GT(sv.view_w, 0.0f);
  const Camera before = s.view.camera;
  drag(ImVec2(sv.view_x + sv.view_w * 0.5f, 12));  // the counters' line, over the lanes
  EXPECT_EQ(s.view.camera.yaw, before.yaw);
  EXPECT_EQ(s.view.camera.distance, before.distance);
  EXPECT_EQ(s.ui.serving.selected, 0);
  const ImVec2 mid(sv.view_x + sv.view_w * 0.5f, sv.view_y + sv.view_h * 0.5f);
  drag(mid);
  EXPECT_NE(s.view.camera.yaw, before.yaw);
  EXPECT_FALSE(s.ui.auto_camera);
  const float d = s.view.camera.distance;
  frame(mid, false, 1.0f);
  EXPECT_LT(s.view.camera.distance, d);  // wheel up: closer, as in the plain view
  EXPECT_EQ(s.ui.serving.selected, 0);   // (nothing clicked a lane)
  ImGui::DestroyContext(ctx);
}

}  // namespace
}  // namespace kvscope
