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
#include "app/session/choices.h"
#include "app/session/json_commands.h"
#include "app/session/session.h"
#include "model/core/error.h"
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

// The chat view as its panel shows it: the messages, each turn's cache
// counts (the records' TurnStart / TurnEnd) and the reply streaming.
json chat_json(const Session& s) {
  const ChatState& c = s.engine.chat;
  json messages = json::array();
  for (const ChatMessage& m : c.pub.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json turns = json::array();
  for (const ChatTurn& t : c.pub.turns)
    turns.push_back({{"turn", t.start.turn},
                     {"reused", t.start.reused},
                     {"prefilled", t.start.prefilled},
                     {"context", t.start.context},
                     {"done", t.done},
                     {"reply", t.end.text},
                     {"new_tokens", t.end.new_tokens},
                     {"computed", t.end.computed},
                     {"no_cache", t.end.no_cache}});
  return {{"open", s.ui.chat.open},
          {"template", c.pub.origin},
          {"template_error", c.template_error},
          {"generating", c.pub.generating},
          {"reply", c.pub.reply},
          {"messages", messages},
          {"turns", turns}};
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
  json remembered = json::object();  // every remembered choice, as the settings file names it
  choices_to_json(s.ui, remembered, /*view=*/false);
  j["choices"] = remembered;
  j["chat"] = chat_json(s);
  return j;
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
    const json c = parse_page_json(text, "command");
    s.execute(commands_from_json(c, s), glfwGetTime());
    g_out.clear();
  } catch (const std::exception& e) {
    g_out = e.what();  // each message names the command and the field
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
    for (std::string& w : cli_args_from_json(parse_page_json(args, "kvscope.cli"))) words.push_back(std::move(w));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvscope: error: %s\n", e.what());
    return 2;
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  // (pools built by the command: its own engine; the window's keep theirs)
  const int keep = ThreadPool::default_threads();
  ThreadPool::set_default_threads(1);
  // The window is the page itself, and render draws with the desktop's OpenGL: both refused as usage.
  AppHooks hooks;
  hooks.gui = [](const GuiOptions&) -> int {
    throw UsageError(
        "kvscope.cli: give a subcommand (generate, tokenize, inspect, eval, bench or serve); the window is this page");
  };
  hooks.render = [](const RenderOptions&) -> int {
    throw UsageError(
        "kvscope.cli: render draws with the desktop's OpenGL; in the page, the screenshot command downloads the "
        "canvas");
  };
  const int rc = run_cli(static_cast<int>(argv.size()), argv.data(), hooks);
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
