#include "app/session/demo_script.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "app/session/fitting.h"

namespace kvscope {

namespace {

std::string demo_view_path() {
  return (std::filesystem::temp_directory_path() / ("kvscope-demo-view-" + std::to_string(getpid()) + ".json"))
      .string();
}

// Fork at the shown step with its second-best candidate.
void fork_second(const EngineState& engine, Commands& cmds) {
  if (engine.seq.current && engine.seq.current->top.size() > 1)
    cmds.push_back(cmd::Fork{engine.seq.current->top[1].token});
}

// The step of the first run that shows its preset's point: the fullest
// batch, the most shared blocks, the first preemption, or static batching's
// last step with one request running and others waiting.
int serving_demo_step(const std::string& view, const ServeRuns& sv) {
  if (sv.runs.empty() || sv.runs[0].steps.empty()) return 0;
  const std::vector<ServeStepPtr>& st = sv.runs[0].steps;
  int best = 0, best_score = -1;
  for (size_t k = 0; k < st.size(); ++k) {
    const ServeStep& s = *st[k];
    int score = static_cast<int>(s.running.size());
    if (view == "serving-prefix") {
      std::map<int, int> owners;
      for (const auto& t : s.tables)
        for (int b : t) owners[b]++;
      score = 0;
      for (const auto& o : owners) score += o.second > 1 ? 1 : 0;
    }
    if (view == "serving-preempt") score = s.preempted.empty() ? -1 : 1000 - static_cast<int>(k);
    // Static: the newest step where the batch's places stand empty while requests wait.
    if (view == "serving-static")
      score = !s.waiting.empty() && s.finished.empty() && s.running.size() == 1 ? static_cast<int>(k) : -1;
    if (score > best_score) {
      best = static_cast<int>(k);
      best_score = score;
    }
  }
  return best;
}

int serving_demo_preset(const std::string& view) {
  return view == "serving-prefix" ? 1 : view == "serving-preempt" ? 2 : view == "serving-static" ? 3 : 0;
}

Commands serving_script(int frame, int total, const EngineState& engine, const std::string& demo_view) {
  Commands cmds;
  auto at = [&](double f) { return frame == static_cast<int>(f * total); };
  const int preset = serving_demo_preset(demo_view);
  // Once the model is in (a quarter into the run or later): the preset, then every step to the end.
  const bool window = frame >= total / 4 && frame < total * 17 / 20;
  if (window && engine.model && engine.serving.runs.empty() && engine.serving.error.empty()) {
    cmds.push_back(cmd::ServeOpen{true});
    cmds.push_back(cmd::ServeStart{preset});
  }
  bool done = !engine.serving.runs.empty();
  for (const ServeRun& r : engine.serving.runs) done = done && r.done;
  if (window && !engine.serving.runs.empty() && !done && !engine.serving.busy) cmds.push_back(cmd::ServeStep{1000});
  if (at(0.9)) cmds.push_back(cmd::ServeScrubTo{serving_demo_step(demo_view, engine.serving)});
  return cmds;
}

// The chat view (with the built-in ChatML format: the embedded model has no
// template of its own): two questions, the second read from the first's cache.
Commands chat_script(int frame, int total, const EngineState& engine) {
  static const char* const kAsk[] = {"What is the capital of France?", "And of Spain?"};
  const ChatState& c = engine.chat;
  if (frame < total / 4 || !engine.model) return {};
  if (c.opened_for != engine.model.get()) return {cmd::ChatOpen{true}};
  const bool idle = c.pub.model && !c.pub.generating && (c.pub.turns.empty() || c.pub.turns.back().done);
  if (idle && c.pub.turns.size() < 2) return {cmd::ChatSend{kAsk[c.pub.turns.size()]}};
  return {};
}

Commands feature_script(int frame, int total, const EngineState& engine, const std::string& demo_view) {
  if (demo_view.rfind("serving", 0) == 0) return serving_script(frame, total, engine, demo_view);
  if (demo_view == "chat") return chat_script(frame, total, engine);
  Commands cmds;
  auto at = [&](double f) { return frame == static_cast<int>(f * total); };
  const int n = static_cast<int>(engine.records().size());
  const int n_steps = engine.timeline_size();
  if (demo_view == "timeline" || demo_view == "sampling") {
    if (at(0.45)) cmds.push_back(cmd::ScrubTo{std::max(1, n / 3)});
    if (at(0.5)) fork_second(engine, cmds);
    if (at(0.75)) cmds.push_back(cmd::ScrubTo{std::max(1, n / 2)});
    if (at(0.8)) fork_second(engine, cmds);
    if (demo_view == "timeline" && at(0.95)) cmds.push_back(cmd::ScrubTo{n * 2 / 3});
    if (demo_view == "sampling" && at(0.95)) {
      // The most uncertain step of this branch: the widest distribution to look at.
      int flattest = 0;
      for (int i = 1; i < n; ++i)
        if (engine.records()[i]->top[0].prob < engine.records()[flattest]->top[0].prob) flattest = i;
      cmds.push_back(cmd::ScrubTo{flattest});
    }
  }
  // Paged K/V: fork early, then let the new branch grow beside the one it left (shared pages lit).
  if (demo_view == "pages") {
    if (at(0.45)) cmds.push_back(cmd::ScrubTo{std::max(1, n / 3)});
    if (at(0.5)) fork_second(engine, cmds);
    if (at(0.6) || at(0.65) || at(0.7)) cmds.push_back(cmd::Scrub{1});  // the new branch's first steps
  }
  if (demo_view == "beams" && at(0.95)) cmds.push_back(cmd::ScrubTo{n_steps * 2 / 3});
  if (demo_view == "speculative" && at(0.95)) {
    // An iteration where the draft was partly right: accepted and rejected tokens side by side.
    int best = n_steps - 1;
    for (int i = n_steps - 1; i >= 0; --i) {
      const SpecIteration& it = *engine.tree.spec_iterations()[static_cast<size_t>(i)];
      if (it.n_accepted > 0 && it.n_accepted < it.k) best = i;
    }
    if (best >= 0) cmds.push_back(cmd::ScrubTo{best});
  }
  if (demo_view == "presentation" && at(0.5)) cmds.push_back(cmd::Presentation{});
  // Predict mode (on from the start): a dozen reveals, a step played after each, then the
  // step playback stops at stays hidden for the picture.
  for (int i = 0; i < 12 && demo_view == "predict"; ++i)
    if (at(0.2 + 0.04 * i)) cmds.push_back(cmd::Reveal{});
  // A sliding window opens the Cache panel's loss plot: score the text for the picture
  // (the panel's button; nothing is scored unasked).
  if (at(0.9) && engine.seq.current &&
      (engine.seq.current->kv_layout.windowed() || engine.seq.current->kv_layout.evicting()))
    cmds.push_back(cmd::ScoreKvLayouts{});
  if ((demo_view == "heatmaps" || demo_view == "qkv") && at(0.9)) cmds.push_back(cmd::SelectHead{1, 2});
  // TOVA: layer 1's beams, averaged over its heads, are the weights its rule ranks by.
  if (demo_view == "evict" && at(0.9)) cmds.push_back(cmd::SelectHead{1, -1});
  // The middle checkpoint of the model's training run: the same prompt, earlier weights.
  if (demo_view == "training" && at(0.3) && engine.training)
    cmds.push_back(cmd::LoadCheckpoint{(static_cast<int>(engine.training->checkpoints.size()) - 1) / 2});
  return cmds;
}

// The default run: the cache toggled, every camera preset, the teaching features.
Commands tour_script(int frame, int total, const EngineState& engine) {
  Commands cmds;
  auto at = [&](double f) { return frame == static_cast<int>(f * total); };
  // The teaching features, late in the run: scrub back, fork, return, present, predict.
  if (at(0.86)) cmds.push_back(cmd::Scrub{-3});
  if (at(0.87)) fork_second(engine, cmds);
  if (at(0.89)) cmds.push_back(cmd::SelectBranch{0});
  if (at(0.90)) cmds.push_back(cmd::Presentation{});
  if (at(0.91)) cmds.push_back(cmd::Predict{});
  if (at(0.92)) cmds.push_back(cmd::Scrub{1});
  if (at(0.93)) cmds.push_back(cmd::Reveal{});
  if (at(0.94)) cmds.push_back(cmd::Predict{});
  if (at(0.95)) cmds.push_back(cmd::Presentation{});
  // A saved view, written and read back, then removed: three distinct frames
  // (the file is removed while the script runs, before that frame's commands),
  // left out of runs too short to hold them.
  const int save = static_cast<int>(0.96 * total), load = std::max(static_cast<int>(0.97 * total), save + 1);
  if (load + 1 < total) {
    if (frame == save) cmds.push_back(cmd::SaveView{demo_view_path()});
    if (frame == load) cmds.push_back(cmd::LoadView{demo_view_path()});
    if (frame == load + 1) {
      std::error_code ec;
      std::filesystem::remove(demo_view_path(), ec);
    }
  }
  if (at(0.25)) cmds.push_back(cmd::ToggleCache{});  // NO CACHE
  if (at(0.35)) cmds.push_back(cmd::SetCamera{CameraPreset::kTop});
  if (at(0.45)) cmds.push_back(cmd::ToggleCache{});  // KV CACHE: refill
  if (at(0.55)) cmds.push_back(cmd::SetCamera{CameraPreset::kSide});
  if (at(0.65)) cmds.push_back(cmd::ToggleCache{});
  if (at(0.70)) cmds.push_back(cmd::SetCamera{CameraPreset::kFollow});
  if (at(0.80)) cmds.push_back(cmd::ToggleCache{});
  if (at(0.85)) cmds.push_back(cmd::SetCamera{CameraPreset::kFront});
  return cmds;
}

}  // namespace

Commands demo_script(int frame, int total, const EngineState& engine, const std::string& demo_view,
                     std::optional<CameraPreset> camera) {
  Commands cmds =
      demo_view.empty() ? tour_script(frame, total, engine) : feature_script(frame, total, engine, demo_view);
  // After the tour's last preset (85 %) and before its saved view is written (96 %) and read back.
  if (camera && frame == static_cast<int>(0.88 * total)) cmds.push_back(cmd::SetCamera{*camera});
  return cmds;
}

void setup_demo_view(const std::string& demo_view, UiState& ui) {
  if (demo_view.empty()) return;
  if (demo_view == "chat") {  // the built-in ChatML (the embedded model has no template), short replies
    ui.chat_format = 1;
    ui.chat_max_new = 24;
  }
  if (demo_view.rfind("serving", 0) == 0) {  // its preset, with the second request's text shown
    ui.serving.preset = serving_demo_preset(demo_view);
    ui.serving.selected = 1;
  }
  ui.bottom_tab = demo_view == "phases"                       ? 1
                  : demo_view == "kv" || demo_view == "evict" ? 2
                  : demo_view == "heatmaps"                   ? 3
                  : demo_view == "training"                   ? 4
                                                              : 0;
  ui.select_tab = true;
  ui.predict = demo_view == "predict";  // from the first step: the reveals come from the script
  // Their sections are in the right sidebar: a teacher folds the left one (text scale 2.5 has room for one).
  if (demo_view == "sampling" || demo_view == "qkv" || demo_view == "evict" || demo_view == "predict")
    ui.left_open = false;
  if (demo_view == "sampling" || demo_view == "timeline") {
    ui.sampler.greedy = false;
    ui.sampler.temperature = 0.9f;
    ui.sampler.top_k = 12;
    ui.sampler.top_p = 0.9f;
    ui.sampler.repetition_penalty = 1.3f;
    ui.sampler.seed = 7;
  }
  if (demo_view == "beams") {
    ui.strategy = strategy::Beam{4, 1.0};
    ui.camera = CameraPreset::kTop;
    // Pages of 4 positions: beams that part inside a page copy only that
    // page, so the sharing shows (with 16, a short prompt's one page is
    // copied by every beam and nothing stays shared).
    ui.kv_layout.block = 4;
  }
  if (demo_view == "speculative") {  // the shipped draft (the window fills in its folder), held at the verify pass
    ui.strategy = strategy::Speculative{"", 4};
    ui.spec_stage = SpecStage::kVerify;
    ui.sampler.greedy = false;  // sampled: p and q are distributions, not one-hot
    ui.sampler.temperature = 0.8f;
    ui.sampler.seed = 5;
  }
  if (demo_view == "pages") ui.kv_layout.block = 4;
  if (demo_view == "evict") {  // TOVA, 8 positions per layer: each layer's survivors and their scores
    ui.kv_layout.evict = KVEvict::kTova;
    ui.kv_layout.budget = 8;
  }
  if (demo_view == "kv") {
    ui.kv_selected = 3;  // assets/kv_configs.json: the 32-layer 4096-wide MHA model
    ui.kv_context = 100000;
    ui.kv_dtype = 1;  // fp16
  }
}

void open_demo_sections(const std::string& demo_view, UiState& ui) {
  if (demo_view.empty()) return;
  ui.teach_open = demo_view != "presentation" && demo_view != "sampling" && demo_view != "qkv" &&
                  demo_view != "predict" && demo_view != "beams" && demo_view != "speculative";
  // Eviction at the projector's text scale: the stacks first (KVSCOPE_DEMO_OPEN=lessons adds the lesson).
  if (demo_view == "evict" && ui.text_scale >= 2.0f) ui.teach_open = ui.right_open = false;
  ui.qkv_open = demo_view == "qkv";
  ui.next_token_open = demo_view == "sampling" || demo_view == "predict";
}

std::string apply_demo_view(const char* name, std::string& view) {
  static const char* const kViews[] = {
      "timeline", "pages", "sampling",    "phases", "kv",      "heatmaps",       "training",        "presentation",
      "qkv",      "beams", "speculative", "evict",  "serving", "serving-prefix", "serving-preempt", "serving-static",
      "predict",  "chat"};
  view.clear();
  if (!name || !*name) return "";  // unset or empty: the default run (scripts/screenshots.sh sets it empty)
  for (const char* v : kViews)
    if (name == std::string(v)) {
      view = v;
      return "";
    }
  return "KVSCOPE_DEMO_VIEW: expected timeline, sampling, phases, kv, pages, heatmaps, training, presentation, qkv, "
         "beams, speculative, evict, serving, serving-prefix, serving-preempt, serving-static, predict or chat, got "
         "\"" +
         std::string(name) + "\"";
}

std::string apply_demo_camera(const char* name, std::optional<CameraPreset>& camera) {
  CameraPreset p = CameraPreset::kFront;
  if (!name || !*name) return "";  // unset or empty, as for every KVSCOPE_DEMO_* variable
  if (!parse_camera(name, p))
    return "KVSCOPE_DEMO_CAMERA: expected front, top, side or follow, got \"" + std::string(name) + "\"";
  camera = p;
  return "";
}

std::string apply_demo_open(const char* list, std::vector<std::string>& panels) {
  if (!list || !*list) return "";  // unset or empty: no panels opened
  const std::string s = list;
  std::vector<std::string> names;
  for (size_t i = 0; i <= s.size();) {
    const size_t end = std::min(s.find(',', i), s.size());
    const std::string name = s.substr(i, end - i);
    if (name != "left" && name != "right" && name != "lessons" && name != "qkv" && name != "next" && name != "model")
      return "KVSCOPE_DEMO_OPEN: expected panels from left, right, lessons, qkv, next and model, separated by commas, "
             "got \"" +
             s + "\"";
    names.push_back(name);
    i = end + 1;
  }
  panels = names;
  return "";
}

std::vector<std::string> demo_env_problems(const std::function<const char*(const char*)>& env) {
  UiState ui;
  int w = 0, h = 0;
  std::string view;
  std::optional<CameraPreset> camera;
  std::vector<std::string> panels;
  std::vector<std::string> problems;
  for (const std::string& e :
       {apply_demo_view(env("KVSCOPE_DEMO_VIEW"), view),
        apply_demo_window(env("KVSCOPE_DEMO_TEXT_SCALE"), env("KVSCOPE_DEMO_SIZE"), ui, w, h),
        apply_demo_camera(env("KVSCOPE_DEMO_CAMERA"), camera), apply_demo_open(env("KVSCOPE_DEMO_OPEN"), panels)})
    if (!e.empty()) problems.push_back(e);
  return problems;
}

void open_demo_panels(const std::vector<std::string>& panels, UiState& ui) {
  for (const std::string& p : panels) {
    ui.left_open |= p == "left";
    ui.right_open |= p == "right";
    ui.teach_open |= p == "lessons";
    ui.qkv_open |= p == "qkv";
    ui.next_token_open |= p == "next";
    ui.model_open |= p == "model";
  }
}

std::string apply_demo_window(const char* text_scale, const char* size, UiState& ui, int& width, int& height) {
  std::string err;
  if (text_scale && *text_scale) {  // empty reads as unset, as for every KVSCOPE_DEMO_* variable
    char* end = nullptr;
    const float k = std::strtof(text_scale, &end);
    if (end != text_scale && *end == '\0' && k >= kMinTextScale && k <= kMaxTextScale)
      ui.text_scale = k;
    else
      err = "KVSCOPE_DEMO_TEXT_SCALE: expected a number from 0.75 to 2.5, got \"" + std::string(text_scale) + "\"";
  }
  if (size && *size) {
    int w = 0, h = 0, used = 0;
    if (std::sscanf(size, "%dx%d%n", &w, &h, &used) == 2 && size[used] == '\0' && w >= 320 && h >= 240 && w <= 7680 &&
        h <= 4320) {
      width = w;
      height = h;
    } else {
      if (!err.empty()) err += "; ";
      err += "KVSCOPE_DEMO_SIZE: expected WIDTHxHEIGHT from 320x240 to 7680x4320, got \"" + std::string(size) + "\"";
    }
  }
  return err;
}

}  // namespace kvscope
