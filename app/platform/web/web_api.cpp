// window.kvscope in the page: the shown step as a `kvscope generate --json`
// record (the CLI's writer, app/cli/record_json.h) plus the prompt, the ids
// generated so far and their text; commands as JSON objects mapped onto the
// window's typed commands (app/session/commands.h).
#include "app/platform/web/web_api.h"

#include <GLFW/glfw3.h>
#include <emscripten/emscripten.h>
#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/record_json.h"
#include "app/gui/gui.h"
#include "app/lessons/training.h"
#include "app/platform/user_files.h"
#include "app/session/session.h"
#include "model/core/thread_pool.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

using nlohmann::json;

void web_report_fatal(const char* message) {
  EM_ASM(
      {
        if (globalThis.kvscopePage) globalThis.kvscopePage.fatal(UTF8ToString($0));
      },
      message);
}

void web_ready() {
  EM_ASM({
    if (globalThis.kvscopePage) globalThis.kvscopePage.started();
  });
}

void web_frame_done(bool presentation) {
  EM_ASM(
      {
        if (globalThis.kvscopePage) globalThis.kvscopePage.frame($0 != 0);
      },
      presentation);
}

namespace {

constexpr int kTrainingTab = 4;  // UiState::bottom_tab

// The Training tab's record as the tab lists it: per checkpoint its step, folder
// and validation losses (nats/token, training.json's), `shown` the loaded one.
json training_json(const Session& s) {
  if (!s.engine.training) return nullptr;
  const TrainingRecord& r = *s.engine.training;
  json cps = json::array();
  for (const TrainingCheckpoint& c : r.checkpoints) {
    json val = json::object();
    for (size_t i = 0; i < r.slices.size() && i < c.val.size(); ++i) val[r.slices[i]] = c.val[i];
    cps.push_back(
        {{"step", c.step}, {"path", c.path}, {"val_loss", val}, {"mean_val_loss", validation_loss(c.val, -1)}});
  }
  return {{"file", r.file},
          {"checkpoints", cps},
          {"shown", s.engine.checkpoint},
          {"tab_open", s.ui.teach_open && s.ui.bottom_tab == kTrainingTab}};
}

json state_of(const Session& s) {
  json j = json::object();
  const int step = shown_step(s.engine, s.ui);
  std::vector<int> generated;
  if (s.engine.model && step >= 0 && step < static_cast<int>(s.engine.records().size())) {
    const Tokenizer& tok = s.engine.model->tokenizer;
    j = step_json(*s.engine.records()[static_cast<size_t>(step)], tok);
    for (int i = 0; i <= step; ++i) generated.push_back(s.engine.records()[static_cast<size_t>(i)]->token);
    j["text"] = tok.decode_text(generated);
  } else {
    j["event"] = nullptr;
    j["text"] = "";
  }
  j["prompt"] = s.ui.active_prompt;
  j["generated"] = generated;
  j["shown_step"] = step;
  j["steps"] = s.engine.timeline_size();
  j["requested_mode"] = to_string(s.engine.mode);
  j["playing"] = s.ui.playing;
  j["loading"] = s.engine.loading_model;
  j["model_dir"] = s.engine.model ? s.engine.model->dir : std::string();
  j["model_error"] = s.engine.model_error;
  j["errors"] = s.ui.errors;
  j["done"] = s.engine.stop != StopReason::kNone;
  j["engine_idle"] = s.engine_idle();
  j["presentation"] = s.ui.presentation;
  j["camera"] = to_string(s.ui.camera);
  j["auto_camera"] = s.ui.auto_camera;
  j["camera_distance"] = s.view.camera.distance;
  j["camera_yaw"] = s.view.camera.yaw;
  j["text_scale"] = s.ui.text_scale;
  j["touch"] = s.ui.touch;  // the buttons leave out their keyboard keys
  j["status"] = s.ui.status;
  j["training"] = training_json(s);
  j["training_fetch"] = s.ui.training_fetch;
  return j;
}

// One JSON command -> the window's commands; throws std::runtime_error on bad input.
Commands commands_of(const json& c, Session& s) {
  const std::string name = c.at("cmd").get<std::string>();
  if (name == "prompt") return {cmd::Start{c.at("text").get<std::string>()}};
  if (name == "reset") return {cmd::Reset{}};
  if (name == "play") return s.ui.playing ? Commands{} : Commands{cmd::PlayPause{}};
  if (name == "pause") return s.ui.playing ? Commands{cmd::PlayPause{}} : Commands{};
  if (name == "play_pause") return {cmd::PlayPause{}};
  if (name == "step") return {cmd::Step{}};
  if (name == "cache") {  // {"mode": "kv_cache" | "no_cache"}, or toggle without one
    if (!c.contains("mode")) return {cmd::ToggleCache{}};
    const std::string m = c.at("mode").get<std::string>();
    if (m != "kv_cache" && m != "no_cache") throw std::runtime_error("cache: mode must be kv_cache or no_cache");
    return m == to_string(s.engine.mode) ? Commands{} : Commands{cmd::ToggleCache{}};
  }
  if (name == "max_new") {  // as the Generate panel's field: the UI's value, then the command
    s.ui.max_new = c.at("n").get<int>();
    return {cmd::SetMaxNew{s.ui.max_new}};
  }
  if (name == "scrub") return {cmd::Scrub{c.at("steps").get<int>()}};
  if (name == "scrub_to") return {cmd::ScrubTo{c.at("step").get<int>()}};
  if (name == "load_model") return {cmd::LoadModel{c.at("dir").get<std::string>()}};
  if (name == "head") return {cmd::SelectHead{c.value("layer", -1), c.value("head", -1)}};
  if (name == "camera") {
    CameraPreset p;
    if (!parse_camera(c.at("preset").get<std::string>(), p))
      throw std::runtime_error("camera: preset must be front, top, side or follow");
    return {cmd::SetCamera{p}};
  }
  if (name == "text_scale") return {cmd::TextScale{c.at("scale").get<float>()}};
  if (name == "decoding") {  // {"mode": "sample"|"beam"|"speculative", "beams", "k"}
    DecodeSettings d = s.ui.decoding;
    const std::string m = c.at("mode").get<std::string>();
    if (m == "sample")
      d.mode = DecodeMode::kSample;
    else if (m == "beam")
      d.mode = DecodeMode::kBeam;
    else if (m == "speculative")
      d.mode = DecodeMode::kSpeculative;
    else
      throw std::runtime_error("decoding: mode must be sample, beam or speculative");
    d.beams = c.value("beams", d.beams);
    d.k = c.value("k", d.k);
    return {cmd::SetDecoding{d}};
  }
  if (name ==
      "kv_layout") {  // {"dtype": "f32"|"f16"|"q8_0"|"q4_0", "window", "sinks", "block"}: from the next generation
    KVSettings k = s.ui.kv_layout;
    if (c.contains("dtype") && !parse_kv_dtype(c.at("dtype").get<std::string>(), &k.dtype))
      throw std::runtime_error("kv_layout: dtype must be f32, f16, q8_0 or q4_0");
    k.window = c.value("window", k.window);
    k.sinks = c.value("sinks", k.sinks);
    k.block = c.value("block", k.block);
    if (s.engine.model) k.layout_for(s.engine.model->config);  // the CLI's checks: throws naming the value
    s.ui.kv_layout = k;
    return {};
  }
  if (name == "load_checkpoint") return {cmd::LoadCheckpoint{c.at("index").get<int>()}};
  if (name == "tab") {  // {"name": "training"}: the teaching tabs open on it
    if (c.at("name").get<std::string>() != "training") throw std::runtime_error("tab: name must be training");
    s.ui.teach_open = true;
    s.ui.bottom_tab = kTrainingTab;
    s.ui.select_tab = true;
    return {};
  }
  if (name == "save_view") return {cmd::SaveView{kBrowserViewFile}};  // a download
  if (name == "open_view") return {cmd::LoadView{""}};                // the file picker
  if (name == "load_view") return {cmd::LoadView{c.at("path").get<std::string>()}};
  if (name == "screenshot") return {cmd::Screenshot{}};
  if (name == "presentation") return {cmd::Presentation{}};
  if (name == "palette") return {cmd::Palette{}};
  if (name == "fit") return {cmd::Fit{}};
  if (name == "dismiss_errors") return {cmd::DismissErrors{}};
  if (name == "toggle_panels") return {cmd::TogglePanels{}};
  throw std::runtime_error("unknown cmd \"" + name + "\"");
}

std::string g_out;

}  // namespace

}  // namespace kvscope

using namespace kvscope;

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* kvscope_state_json() {
  GuiRun* run = web_run();
  g_out = run ? state_of(gui_session(*run)).dump(-1, ' ', false, json::error_handler_t::replace) : "{}";
  return g_out.c_str();
}

EMSCRIPTEN_KEEPALIVE const char* kvscope_command_json(const char* text) {
  GuiRun* run = web_run();
  if (!run) return "the window is not open";
  Session& s = gui_session(*run);
  try {
    const Commands cmds = commands_of(json::parse(text), s);
    s.execute(cmds, glfwGetTime());
    g_out.clear();
  } catch (const std::exception& e) {
    g_out = std::string("command: ") + e.what();
  }
  return g_out.c_str();
}

EMSCRIPTEN_KEEPALIVE void kvscope_save_settings() {
  if (GuiRun* run = web_run()) gui_save_settings(*run);
}

// The command line inside the page (the same run_cli as `kvscope ...`), on
// the page's thread while no frame is drawn: the engine's speed in the page
// without the drawing around it (docs/web.md). `args`: a JSON array of
// strings; output goes to the page's print (kvscope-page.js collects it).
// One engine thread, as `KVSCOPE_THREADS=1 kvscope generate`.
EMSCRIPTEN_KEEPALIVE int kvscope_cli(const char* args) {
  std::vector<std::string> words{"kvscope"};
  try {
    for (const json& a : json::parse(args)) words.push_back(a.get<std::string>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvscope_cli: %s\n", e.what());
    return 2;
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  // (pools built by the command: its own engine; the window's keep theirs)
  const int keep = ThreadPool::default_threads();
  ThreadPool::set_default_threads(1);
  const int rc = run_cli(static_cast<int>(argv.size()), argv.data(), AppHooks{});
  std::fflush(stdout);
  ThreadPool::set_default_threads(keep);
  return rc;
}

// A short touch that did not move: one step, unless it landed on a panel
// (ImGui has seen the touch as the mouse by now).
EMSCRIPTEN_KEEPALIVE int kvscope_tap() {
  GuiRun* run = web_run();
  if (!run || ImGui::GetIO().WantCaptureMouse) return 0;
  gui_session(*run).execute(cmd::Step{}, glfwGetTime());
  return 1;
}

// A touch screen (kvscope-page.js: the first touch, or a pointer that cannot hover).
EMSCRIPTEN_KEEPALIVE void kvscope_touch_seen() {
  if (GuiRun* run = web_run()) gui_session(*run).ui.touch = true;
}

EMSCRIPTEN_KEEPALIVE void kvscope_load_folder(const char* dir) {
  if (GuiRun* run = web_run()) gui_session(*run).execute(cmd::LoadModel{dir}, glfwGetTime());
}

// An error found by the page's own code (a model fetched from the hub: an
// unknown id, a missing file, a model too big): into the error panel.
EMSCRIPTEN_KEEPALIVE void kvscope_report_error(const char* message) {
  if (GuiRun* run = web_run()) gui_session(*run).ui.errors.push_back(message);
}

// The page fetched the training checkpoints into the file system (or is doing
// so): `progress` for the Training tab ("" when done), then the record read again.
EMSCRIPTEN_KEEPALIVE void kvscope_training_progress(const char* progress) {
  if (GuiRun* run = web_run()) gui_session(*run).ui.training_fetch = progress;
}

EMSCRIPTEN_KEEPALIVE void kvscope_training_fetched() {
  GuiRun* run = web_run();
  if (!run) return;
  Session& s = gui_session(*run);
  s.ui.training_fetch.clear();
  s.read_training_record();
}
}
