// The window's controller, GL-free: it owns the engine worker, the engine state
// built from the worker's events and the user's choices, and carries out
// every command (commands.h). The window (gui.cpp) only draws what it holds
// and forwards what the user asked for; tests/test_session_decode.cpp,
// test_session_scoring.cpp, test_training_session.cpp and test_ui_fit.cpp
// drive the same object headless against the real worker and engine.
//
// Time is passed in (seconds on any monotonic clock), so the session never
// asks GLFW for it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/session/commands.h"
#include "app/session/fitting.h"
#include "app/session/state.h"
#include "app/worker/chat_runner.h"
#include "app/worker/kv_scoring.h"
#include "app/worker/serve_runner.h"
#include "app/worker/worker.h"
#include "render/scene/scene_camera.h"

namespace kvscope {

// The camera the session keeps: restored views and "fit" change it; the
// window moves it with the mouse and eases it towards `goal`.
struct SessionView {
  Camera camera, goal;
  bool camera_init = false;
  double last_step_request = -1e9;  // when playback last asked for a step
};

// What only the window can do, asked for by a command; the window takes
// (and clears) them once per frame.
struct WindowRequests {
  bool screenshot = false;
  bool toggle_fullscreen = false;
  float text_scale = 0;  // > 0: rebuild the fonts at this scale
};

// What a start replaces on screen, kept until the worker accepts it: a start
// the worker refuses (a strategy the KV layout rules out, a draft with another
// tokenizer) puts it back, so a refused command changes nothing.
struct ReplacedGeneration {
  uint64_t request = 0;  // the start that replaced it
  BranchTree tree;
  Strategy strategy;
  StopReason stop = StopReason::kNone;
  std::string active_prompt;
  int view_step = -1, revealed_step = -1;
  bool playing = false;
};

class Session {
 public:
  // `wake` is called from worker threads after each event (thread-safe,
  // e.g. glfwPostEmptyEvent).
  explicit Session(std::function<void()> wake = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Loads a model folder in the background (the current one keeps running);
  // `ctx` > 0: a Llama-family model's context (the --ctx flag).
  void load_model(const std::string& dir, int ctx = 0);

  // Once per frame: the worker's events into the engine state, the shown step
  // synced, and (while playing) the next step requested when it is due.
  void update(double now);
  void execute(const UiCommand& c, double now);
  void execute(const Commands& cs, double now);
  // Makes engine.seq the state at the timeline's step.
  void sync_shown();

  WindowRequests take_window_requests();
  bool engine_idle() const { return worker_.pending() == 0; }
  float load_progress() const { return worker_.load_progress(); }
  // New tokens a generation may make: the user's choice, else the default capped by the context.
  int effective_max_new() const;
  // The prompt the Prompt panel has selected.
  std::string selected_prompt() const;
  // Whether playback would ask for a step at `now` (used to sleep until then).
  // A speculative iteration (several tokens, three stages) gets three token periods.
  double next_step_due() const;
  // Every restored or kept choice (app/session/fitting.h) fitted to its range and the
  // model now loaded: runs on every model load or switch, and wherever a
  // file was restored (`origin` names it: what changed goes to the error
  // panel; without one, to the status line). Without a model only the
  // ranges are checked, and `origin` is remembered for the next load.
  void fit_to_model(const std::string& origin = "");

  // Reads the training record beside the loaded model again (EngineState::training):
  // after a model loads, and in the page once its checkpoints have been fetched.
  void read_training_record();

  EngineState engine;
  UiState ui;
  SessionView view;

 private:
  // `running` is the strategy of the generation on screen when the caller
  // has already changed engine.strategy (set_strategy, which checked it).
  // False, with the reason in the error panel and nothing changed, when the
  // strategy cannot run on the chosen KV memory layout.
  bool start_generation(const std::string& prompt, const Strategy* running = nullptr);
  // True (and the reason in the error panel) when `d` cannot start on ui.kv_layout.
  bool refused_start(const Strategy& d);
  void restore_replaced(const WorkerEvent& ev);
  void take_event(WorkerEvent& ev, double now);
  void on_forked(const WorkerEvent& ev, double now);
  void on_error(const WorkerEvent& ev);
  void load_checkpoint(int index);
  void step(double now);
  void scrub(int steps, double now);
  void scrub_to(int step);
  void fork(int token);
  void select_branch(int id);
  void send_fork(const History& h, const RecordPtr& at, int token);
  void toggle_cache();
  void set_strategy(const Strategy& d);
  void toggle_presentation();
  void set_text_scale(float scale);
  void save_view_to(const std::string& path);
  void load_view_from(const std::string& path, double now);
  void restore_camera(SavedCamera cam, const FitContext& ctx);
  void score_kv_layouts();
  // The Serving view (session_serving.cpp).
  void serve_update(double now);
  void serve_open(bool open);
  void serve_play(double now);
  void serve_start(int preset);
  void serve_step(int steps);
  void serve_scrub_to(int step);
  // While the Serving view is open, the playback keys drive it (Space, ←/→, R).
  UiCommand serving_command(const UiCommand& c) const;

  // The chat view (session_chat.cpp).
  void chat_update();
  void chat_take_records();
  void chat_open(bool open);
  void chat_restart();
  void chat_send(const std::string& text);
  // A new system prompt or template (UiState::chat_format): a new conversation.
  void chat_set(const std::string& system, int format);
  void chat_post(ChatJob job);

  EngineWorker worker_;
  LayoutScorer scorer_;  // the Cache panel's loss plot, started only by cmd::ScoreKvLayouts
  ServeRunner serve_;    // the Serving view's runs, started only by cmd::ServeStart
  ChatRunner chat_;      // the chat view's conversation, opened only by cmd::ChatOpen
  WindowRequests requests_;
  std::optional<ReplacedGeneration> replaced_;  // while a start is pending over a running generation
  std::string unfitted_origin_;  // a file restored before any model loaded: fitted to the model when one has
};

}  // namespace kvscope
