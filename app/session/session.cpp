#include "app/session/session.h"

#include <algorithm>
#include <utility>

#include "app/platform/user_files.h"
#include "app/session/saved_view.h"
#include "model/core/error.h"
#include "model/core/overloaded.h"
#include "render/scene/scene.h"

namespace kvscope {

namespace {

// The camera as a saved view writes it and back: the one pair of conversions.
SavedCamera to_saved(const Camera& c, const UiState& ui) {
  SavedCamera s;
  s.target[0] = c.target.x;
  s.target[1] = c.target.y;
  s.target[2] = c.target.z;
  s.distance = c.distance;
  s.yaw = c.yaw;
  s.pitch = c.pitch;
  s.fov_y = c.fov_y;
  s.preset = ui.auto_camera ? to_string(ui.camera) : "";
  return s;
}

// `c` looking as `s` says (its vertical stretch is the view's, not saved).
Camera from_saved(const SavedCamera& s, Camera c) {
  c.target = {s.target[0], s.target[1], s.target[2]};
  c.distance = s.distance;
  c.yaw = s.yaw;
  c.pitch = s.pitch;
  c.fov_y = s.fov_y;
  return c;
}

// While the chat view is open, the generation's playback and timeline keys
// (Space, arrows, R, C, Enter, P) would act on the generation hidden behind
// it: they are ignored (a key pressed outside the message box must not, say,
// restart anything).
bool hidden_by_chat(const UiCommand& c) {
  return std::holds_alternative<cmd::PlayPause>(c) || std::holds_alternative<cmd::Step>(c) ||
         std::holds_alternative<cmd::Scrub>(c) || std::holds_alternative<cmd::ScrubTo>(c) ||
         std::holds_alternative<cmd::Reset>(c) || std::holds_alternative<cmd::ToggleCache>(c) ||
         std::holds_alternative<cmd::Reveal>(c) || std::holds_alternative<cmd::Predict>(c) ||
         std::holds_alternative<cmd::Fork>(c);
}

}  // namespace

Session::Session(std::function<void()> wake) : worker_(wake), serve_(wake), chat_(wake) {}

void Session::load_model(const std::string& dir, int ctx) {
  worker_.cancel_steps();
  worker_.send(wcmd::LoadModel{dir, ctx});
  engine.loading_model = true;
  engine.model_error.clear();
}

int Session::effective_max_new() const {
  const int ctx = engine.model ? engine.model->config.n_positions : kDefaultMaxNew;
  return ui.max_new > 0 ? ui.max_new : std::min(kDefaultMaxNew, ctx);
}

std::string Session::selected_prompt() const {
  return ui.preset < kNumPresets ? kPromptPresets[ui.preset].text : ui.custom_prompt;
}

double Session::next_step_due() const {
  const double periods = is_speculative(engine.strategy) ? 3.0 : 1.0;
  return view.last_step_request + (ui.fastest ? 0.0 : periods / ui.speed);
}

WindowRequests Session::take_window_requests() {
  WindowRequests r = requests_;
  requests_ = WindowRequests();
  return r;
}

// Appended incrementally while following the newest record, rebuilt when
// scrubbing or after a fork.
void Session::sync_shown() {
  const size_t n = engine.records().size();
  const size_t want = ui.view_step < 0 ? n : std::min(n, static_cast<size_t>(ui.view_step) + 1);
  if (engine.seq_version == engine.tree_version && want == engine.seq_count) return;
  if (engine.seq_version == engine.tree_version && want == engine.seq_count + 1)
    append_record(engine.seq, engine.records()[want - 1]);
  else
    engine.seq = build_sequence(engine.records(), want);
  engine.seq_count = want;
  engine.seq_version = engine.tree_version;
}

// The text of the shown step (at most the model's context), under dense
// f32 and the layouts the Cache panel compares with it.
void Session::score_kv_layouts() {
  if (!engine.model || !engine.seq.current) return;
  const Config& c = engine.model->config;
  LayoutScoreRequest req;
  req.model = engine.model;
  for (const TokenInfo& t : engine.seq.tokens)
    if (static_cast<int>(req.tokens.size()) < c.n_positions) req.tokens.push_back(t.id);
  if (req.tokens.size() < 2) return;
  req.layouts = layouts_to_compare(engine.seq.current->kv_layout, KVLayout::for_model(c));
  req.at = engine.seq.current;
  scorer_.request(std::move(req));
  engine.kv_scoring = true;
}

void Session::update(double now) {
  for (WorkerEvent& ev : worker_.poll()) take_event(ev, now);
  engine.step_in_flight = worker_.pending() > 0;
  engine.load_progress = worker_.load_progress();
  engine.kv_scores = scorer_.result();
  engine.kv_scoring = scorer_.busy();
  serve_update(now);
  chat_update();
  // A restored view's step, once generated (or the last one, when the
  // generation stopped before reaching it).
  if (engine.pending_view_step >= 0 && engine.stop != StopReason::kNone && !engine.records().empty() &&
      static_cast<int>(engine.records().size()) <= engine.pending_view_step)
    engine.pending_view_step = static_cast<int>(engine.records().size()) - 1;
  if (engine.pending_view_step >= 0 && static_cast<int>(engine.records().size()) > engine.pending_view_step) {
    ui.view_step = engine.pending_view_step;
    ui.playing = false;
    engine.pending_view_step = -1;
  }
  sync_shown();
  // Playback (predict mode waits until the class has seen the newest token).
  const bool want_step = ui.playing && engine.started && engine.stop == StopReason::kNone && worker_.pending() == 0 &&
                         engine.pending_forks == 0 && !prediction_hidden(engine, ui) && now >= next_step_due();
  if (want_step) {
    worker_.send(wcmd::Step{});
    view.last_step_request = now;
    engine.step_in_flight = true;
  }
}

void Session::take_event(WorkerEvent& ev, double now) {
  switch (ev.kind) {
    case WorkerEvent::Kind::kModelLoaded:
      replaced_.reset();  // the worker dropped the old model's generation
      engine.model = ev.model;
      engine.loading_model = false;
      engine.model_error.clear();
      fit_to_model(std::exchange(unfitted_origin_, std::string()));
      read_training_record();
      if (!start_generation(ui.active_prompt.empty() ? selected_prompt() : ui.active_prompt)) {
        // (refused by the KV layout: the worker dropped the old model's generation all the same)
        engine.tree.clear();
        engine.tree_version++;
        engine.started = false;
      }
      break;
    case WorkerEvent::Kind::kStarted:
      // A start superseded before its kStarted arrived: its records must not
      // land in the timeline cleared for the newer one.
      if (ev.request != engine.start_request) break;
      replaced_.reset();
      engine.generation = ev.generation;
      engine.started = true;
      engine.gen_start_time = now;
      if (engine.step_after_start) {
        engine.step_after_start = false;
        step(now);
      }
      break;
    case WorkerEvent::Kind::kRecord:
      if (ev.generation != engine.generation || !engine.started) break;  // from a generation since replaced
      try {
        engine.tree.push(ev.step);
      } catch (const std::exception& e) {  // a record that does not follow the current branch
        ui.errors.push_back(std::string("timeline: ") + e.what());
        break;
      }
      engine.total_records++;
      if (ui.view_step < 0) engine.last_record_time = now;  // animate only what is on screen
      break;
    case WorkerEvent::Kind::kForked:
      on_forked(ev, now);
      break;
    case WorkerEvent::Kind::kDone:
      // (not a generation that ended just as the UI restarted: it would stop the new one)
      if (ev.generation == engine.generation && engine.started) {
        engine.stop = ev.reason;
        ui.playing = false;  // played to the end: the button reads Play, and plays again
      }
      break;
    case WorkerEvent::Kind::kError:
      on_error(ev);
      break;
  }
}

void Session::on_forked(const WorkerEvent& ev, double now) {
  // (a fork of a generation since restarted: the timeline was cleared for the new start)
  if (ev.generation != engine.generation || !engine.started) return;
  engine.pending_forks = std::max(0, engine.pending_forks - 1);
  try {
    if (engine.pending_select >= 0) {
      engine.tree.select(engine.pending_select);  // back to an explored branch: the worker resumed it
    } else if (engine.model) {
      const RecordPtr forced = ev.record();
      if (!forced) throw Error("the worker forked no sampling record");
      engine.tree.fork(forced, fork_cost(engine.model->config, forced->seq_len, ev.cache_reused));
    }
  } catch (const std::exception& e) {
    ui.errors.push_back(std::string("branching: ") + e.what());
  }
  engine.pending_select = -1;
  engine.tree_version++;
  engine.stop = engine.records().empty() ? StopReason::kNone : engine.records().back()->stop;
  ui.view_step = -1;
  ui.revealed_step = static_cast<int>(engine.records().size()) - 1;  // the user chose this token
  engine.last_record_time = now;
}

void Session::on_error(const WorkerEvent& ev) {
  switch (ev.failed) {
    case WorkerOp::kLoadModel:
      engine.loading_model = false;
      engine.model_error = as_user_named(ev.message);
      if (!engine.model) ui.errors.push_back("Could not load the model: " + engine.model_error);
      break;
    case WorkerOp::kFork:
      engine.pending_forks = std::max(0, engine.pending_forks - 1);
      engine.pending_select = -1;
      // (a fork of a generation a new model or start replaced meanwhile is moot)
      if (ev.generation == engine.generation && engine.started)
        ui.errors.push_back("Could not fork here: " + ev.message);
      break;
    case WorkerOp::kStart:
      restore_replaced(ev);
      ui.errors.push_back((is_sampling(engine.strategy)
                               ? std::string("Could not start with this prompt: ")
                               : std::string("Could not start ") + strategy_name(engine.strategy) + ": ") +
                          ev.message);
      break;
    default:
      ui.errors.push_back(ev.message);
      ui.playing = false;
      break;
  }
}

void Session::execute(const Commands& cs, double now) {
  for (const UiCommand& c : cs) execute(c, now);
  sync_shown();
}

void Session::execute(const UiCommand& given, double now) {
  if (ui.chat.open && hidden_by_chat(given)) return;
  const UiCommand c = ui.serving.open ? serving_command(given) : given;
  std::visit(overloaded{
                 [&](const cmd::Start& s) {
                   if (!engine.model) {
                     ui.errors.push_back("No model is loaded yet.");
                     return;
                   }
                   if (start_generation(s.prompt)) ui.playing = true;
                 },
                 [&](const cmd::Reset&) {
                   if (engine.model) start_generation(ui.active_prompt.empty() ? selected_prompt() : ui.active_prompt);
                 },
                 [&](const cmd::PlayPause&) {
                   ui.playing = !ui.playing;
                   if (ui.playing && engine.stop != StopReason::kNone && engine.model &&
                       !start_generation(ui.active_prompt))  // play after the end = again
                     ui.playing = false;
                 },
                 [&](const cmd::Step&) { step(now); },
                 [&](const cmd::ToggleCache&) { toggle_cache(); },
                 [&](const cmd::SetSampler& c) {
                   ui.sampler = c.sampler;
                   worker_.send(wcmd::SetSampler{c.sampler});
                 },
                 [&](const cmd::SetMaxNew& m) { worker_.send(wcmd::SetMaxNew{m.max_new}); },
                 [&](const cmd::LoadModel& m) { load_model(m.dir); },
                 [&](const cmd::CancelLoad&) { worker_.cancel_load(); },
                 [&](const cmd::LoadCheckpoint& c) { load_checkpoint(c.index); },
                 [&](const cmd::ScoreKvLayouts&) { score_kv_layouts(); },
                 [&](const cmd::Scrub& s) { scrub(s.steps, now); },
                 [&](const cmd::ScrubTo& s) { scrub_to(s.step); },
                 [&](const cmd::Fork& f) { fork(f.token); },
                 [&](const cmd::SelectBranch& b) { select_branch(b.id); },
                 [&](const cmd::SelectHead& h) {
                   ui.layer = h.layer;
                   ui.head = h.head;
                   ui.rays = true;
                 },
                 [&](const cmd::Presentation&) { toggle_presentation(); },
                 [&](const cmd::Predict&) {
                   ui.predict = !ui.predict;
                   ui.revealed_step = engine.timeline_size() - 1;  // what is on screen stays visible
                 },
                 [&](const cmd::Reveal&) { ui.revealed_step = engine.timeline_size() - 1; },
                 [&](const cmd::Palette&) { ui.colour_blind = !ui.colour_blind; },
                 [&](const cmd::SaveView& v) { save_view_to(v.path); },
                 [&](const cmd::LoadView& v) {
                   if (v.path.empty())
                     ask_user_for_view_file();  // the page: the browser's file picker
                   else
                     load_view_from(v.path, now);
                 },
                 [&](const cmd::DismissErrors&) { ui.errors.clear(); },
                 [&](const cmd::TogglePanels&) { ui.show_panels = !ui.show_panels; },
                 [&](const cmd::SetCamera& cam) {
                   ui.camera = cam.preset;
                   ui.auto_camera = true;
                 },
                 [&](const cmd::Fit&) { ui.auto_camera = true; },
                 [&](const cmd::Screenshot&) { requests_.screenshot = true; },
                 [&](const cmd::Fullscreen&) { requests_.toggle_fullscreen = true; },
                 [&](const cmd::TextScale& t) { set_text_scale(t.scale); },
                 [&](const cmd::SetStrategy& d) { set_strategy(d.strategy); },
                 [&](const cmd::ServeOpen& o) { serve_open(o.open); },
                 [&](const cmd::ServeStart& st) { serve_start(st.preset); },
                 [&](const cmd::ServeStep& st) { serve_step(st.steps); },
                 [&](const cmd::ServePlay&) { serve_play(now); },
                 [&](const cmd::ServeScrubTo& st) { serve_scrub_to(st.step); },
                 [&](const cmd::ChatOpen& o) { chat_open(o.open); },
                 [&](const cmd::ChatSend& m) { chat_send(m.text); },
                 [&](const cmd::ChatReset&) { chat_post(chatjob::Reset{}); },
                 [&](const cmd::ChatDrop&) { chat_post(chatjob::Drop{}); },
                 [&](const cmd::ChatSystem& m) { chat_set(m.text, ui.chat_format); },
                 [&](const cmd::ChatSetFormat& f) { chat_set(ui.chat_system, f.format); },
             },
             c);
}

// One forward, shown as it arrives. Before the start was accepted (a Reset
// a moment ago), the step is sent once it is: a presenter's clicker starts
// a generation.
void Session::step(double now) {
  ui.playing = false;
  ui.view_step = -1;  // stepping shows the newest step
  if (!engine.started) {
    if (engine.model) engine.step_after_start = true;
    return;
  }
  if (engine.stop == StopReason::kNone && worker_.pending() == 0 && engine.pending_forks == 0) {
    worker_.send(wcmd::Step{});
    view.last_step_request = now;
    engine.step_in_flight = true;
  }
}

void Session::scrub(int steps, double now) {
  const int n = engine.timeline_size();
  const int cur = shown_step(engine, ui);
  if (steps > 0 && cur == n - 1) {
    // At the newest step (or before the first), forward = reveal (predict mode), else compute the next step.
    if (prediction_hidden(engine, ui))
      ui.revealed_step = n - 1;
    else
      step(now);
    return;
  }
  if (n == 0) return;
  scrub_to(cur + steps);
}

void Session::scrub_to(int step) {
  const int n = engine.timeline_size();
  if (n == 0) return;
  const int target = std::clamp(step, 0, n - 1);
  ui.view_step = target >= n - 1 ? -1 : target;
  if (ui.view_step >= 0) ui.playing = false;  // looking at the past: hold the present
  engine.last_record_time = -1e9;             // no drop animation while scrubbing
}

void Session::fork(int token) {
  if (!is_sampling(engine.strategy)) return;  // the strategies choose their own tokens
  const int s = shown_step(engine, ui);
  if (s < 0 || engine.pending_forks > 0 || !engine.started) return;
  const RecordPtr at = engine.records()[static_cast<size_t>(s)];
  if (token == at->token) return;
  const int existing = engine.tree.find_fork(engine.tree.current(), s, token);
  if (existing >= 0) {
    select_branch(existing);
    return;
  }
  send_fork(engine.tree.current_history(), at, token);
  engine.pending_select = -1;
}

void Session::select_branch(int id) {
  if (!is_sampling(engine.strategy)) return;
  if (engine.pending_forks > 0 || id < 0 || id >= static_cast<int>(engine.tree.size()) || !engine.started) return;
  const Branch& b = engine.tree.branch(id);
  if (b.history.empty()) return;
  // The worker resumes the branch: its last record, forced to its own token.
  const RecordPtr last = b.history.back();
  send_fork(b.history, last, last->token);
  engine.pending_select = id;
}

void Session::send_fork(const History& h, const RecordPtr& at, int token) {
  wcmd::Fork w;
  w.tokens = h.tokens_before(static_cast<size_t>(at->index));
  w.record = at;
  w.token = token;
  worker_.cancel_steps();
  worker_.send(std::move(w));
  engine.pending_forks++;
}

// The training record beside the model just loaded (an error panel line when
// there is one but it is unusable; the Training tab then explains its absence).
void Session::read_training_record() {
  engine.training.reset();
  engine.checkpoint = -1;
  if (!engine.model) return;
  try {
    TrainingRecord r;
    if (!find_training_record(engine.model->dir, r)) return;
    engine.checkpoint = checkpoint_index(r, engine.model->dir);
    engine.training = std::make_shared<const TrainingRecord>(std::move(r));
  } catch (const std::exception& e) {
    ui.errors.push_back(std::string("Training record: ") + e.what());
  }
}

// The same prompt, sampler (seed included) and limits, with the weights the
// run had at that checkpoint: the load restarts the active prompt and plays.
void Session::load_checkpoint(int index) {
  if (!engine.training || index < 0 || index >= static_cast<int>(engine.training->checkpoints.size())) return;
  if (engine.loading_model || index == engine.checkpoint) return;
  load_model(engine.training->checkpoints[static_cast<size_t>(index)].path);
  ui.playing = true;
}

void Session::toggle_cache() {
  if (!is_sampling(engine.strategy)) {
    ui.status = std::string(strategy_name(engine.strategy)) + " always runs on the KV cache";
    return;
  }
  engine.mode = engine.mode == CacheMode::kKV ? CacheMode::kNoCache : CacheMode::kKV;
  worker_.send(wcmd::SetMode{engine.mode});
}

void Session::toggle_presentation() {
  ui.presentation = !ui.presentation;
  ui.show_panels = !ui.presentation;
}

void Session::set_text_scale(float scale) {
  requests_.text_scale = std::clamp(scale, kMinTextScale, kMaxTextScale);
}

void Session::fit_to_model(const std::string& origin) {
  // Without a model only the ranges are checked; the model's limits when it
  // has loaded, still naming the file the values came from.
  if (!engine.model && !origin.empty()) unfitted_origin_ = origin;
  FitContext ctx;
  ctx.model = engine.model.get();
  ctx.origin = origin;
  const std::vector<std::string> notes = fit_choices(ui, ctx, &engine.pending_view_step);
  if (origin.empty()) {
    // Kept across a model switch: the user sees what changed, not an error.
    if (!notes.empty()) ui.status.clear();
    for (const std::string& n : notes) ui.status += (ui.status.empty() ? "" : "; ") + n;
  } else {
    ui.errors.insert(ui.errors.end(), notes.begin(), notes.end());
  }
}

void Session::save_view_to(const std::string& path) {
  SavedView v;
  v.choices() = ui.choices();  // (max_new as chosen: 0 fills the context, as in the window)
  v.camera = to_saved(view.camera, ui);
  v.step = std::max(0, shown_step(engine, ui));
  v.prompt = ui.active_prompt;
  v.model = engine.model ? engine.model->dir : "";
  v.cache = engine.mode;
  try {
    save_view(v, path);
    ui.status =
        kFilesThroughBrowser ? "view downloaded as " + path.substr(path.rfind('/') + 1) : "view saved to " + path;
    hand_file_to_user(path, "application/json");
  } catch (const std::exception& e) {
    ui.errors.push_back(e.what());
  }
}

// A saved camera: its preset when it names one, else its orbit (fitted).
void Session::restore_camera(SavedCamera cam, const FitContext& ctx) {
  CameraPreset preset;
  if (!cam.preset.empty() && parse_camera(cam.preset, preset)) {
    ui.camera = preset;
    ui.auto_camera = true;
    return;
  }
  for (const std::string& n : fit_camera(cam, ctx)) ui.errors.push_back(n);
  view.camera = from_saved(cam, view.camera);
  view.goal = view.camera;
  view.camera_init = true;
  ui.auto_camera = false;
}

void Session::load_view_from(const std::string& path, double now) {
  SavedView v;
  try {
    v = load_view(path);
  } catch (const std::exception& e) {
    ui.errors.push_back(e.what());
    return;
  }
  // The view's choices, fitted to their ranges and the model before any is used.
  UiState fitted = ui;
  fitted.choices() = v.choices();
  int step = v.step;
  FitContext ctx;
  ctx.model = engine.model.get();
  ctx.origin = path;
  const std::vector<std::string> notes = fit_choices(fitted, ctx, &step);
  ui.errors.insert(ui.errors.end(), notes.begin(), notes.end());
  if (!engine.model) unfitted_origin_ = path;  // the model's limits once it has loaded
  v.step = step;
  // Presentation and the text scale change the window too: through their commands.
  const ViewChoices chosen = fitted.choices();
  fitted.presentation = ui.presentation;
  fitted.text_scale = ui.text_scale;
  ui.choices() = fitted.choices();
  if (chosen.presentation != ui.presentation) toggle_presentation();
  if (chosen.text_scale != ui.text_scale) set_text_scale(chosen.text_scale);
  restore_camera(v.camera, ctx);
  if (v.cache != engine.mode) toggle_cache();
  execute(cmd::SetSampler{ui.sampler}, now);
  // The step: this generation when it is the same prompt, else generate it again.
  if (v.prompt != ui.active_prompt || static_cast<int>(engine.records().size()) <= v.step) {
    if (v.prompt != ui.active_prompt && engine.model) {
      ui.preset = kNumPresets;
      ui.custom_prompt = v.prompt;
      start_generation(v.prompt);
    }
    engine.pending_view_step = v.step;
    ui.playing = true;
  } else {
    ui.view_step = v.step >= static_cast<int>(engine.records().size()) - 1 ? -1 : v.step;
    ui.playing = false;
  }
  ui.status = "view loaded from " + path;
}

}  // namespace kvscope
