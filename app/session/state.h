// The window's state, split by owner: EngineState is what the UI thread knows
// about the engine (built only from worker events), UiState is what the user
// chose. Panels read both and return commands (commands.h) that the Session
// (session.h) carries out; nothing else mutates them behind its back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/lessons/kv_memory.h"
#include "app/lessons/sampling.h"
#include "app/lessons/training.h"
#include "app/session/branches.h"
#include "app/session/commands.h"
#include "app/session/saved_view.h"
#include "app/worker/chat_runner.h"
#include "app/worker/decoding.h"
#include "app/worker/kv_scoring.h"
#include "app/worker/serve_runner.h"
#include "model/arch/model.h"
#include "model/core/overloaded.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"
#include "model/decoding/speculative_generator.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"
#include "render/scene/scene_chat.h"
#include "render/scene/scene_serve.h"

namespace kvscope {

struct PromptPreset {
  const char* name;
  const char* text;
};
// Story opening, a line of code, a fact.
inline constexpr PromptPreset kPromptPresets[] = {
    {"Story", "Once upon a time"},
    {"Code", "def "},
    {"Fact", "The capital of France is"},
};
inline constexpr int kNumPresets = 3;  // index kNumPresets = the custom prompt

// The chat view's engine side (cmd::ChatOpen): what the chat runner
// published, and the conversation as the cache holds it, built from the
// records as they arrive.
struct ChatState {
  ChatPub pub;
  SequenceState seq;               // at the newest record (the scene's input)
  std::vector<ChatTokenTag> tags;  // (position) who said each token of seq
  uint64_t conversation = 0;       // the pub.conversation `seq` belongs to
  size_t turns_taken = 0;          // pub.turns whose prefill is in seq
  size_t records_taken = 0;        // records of the newest turn in seq
  size_t errors_taken = 0;         // pub.errors already in the error panel
  std::string refused_seen;        // the pub.refused message already put back into the input box
  // Why the conversation could not open (no template, one kvscope cannot
  // render): the panel shows it with the built-in formats to choose from.
  std::string template_error;
  const Model* opened_for = nullptr;  // the model the conversation was opened for
  // The newest turn (null before the first).
  const ChatTurn* turn() const { return pub.turns.empty() ? nullptr : &pub.turns.back(); }
};

struct EngineState {
  std::shared_ptr<const Model> model;
  bool loading_model = false;
  std::string model_error;     // last failed load, shown in the Model panel
  float load_progress = 0;     // 0..1 while loading_model (EngineWorker::load_progress)
  uint64_t generation = 0;     // id of the generation the records belong to
  bool started = false;        // the worker accepted the prompt
  uint64_t start_request = 0;  // id of the newest kStart sent; older starts' kStarted are ignored
  // Every explored branch of this generation (the timeline's memory budget
  // lives there): the one store of its records.
  BranchTree tree;
  int total_records = 0;  // over every generation of this run
  SequenceState seq;      // state at the shown step (the timeline), records [0, seq_count)
  size_t seq_count = 0;
  uint64_t tree_version = 0;      // bumped when the current branch changes (fork, return, restart)
  uint64_t seq_version = 0;       // the tree_version `seq` was built from
  int pending_forks = 0;          // kFork commands sent, kForked not yet back
  int pending_select = -1;        // branch to return to when its kForked arrives (-1: a new fork)
  int pending_view_step = -1;     // a restored view's step, shown once generated
  bool step_after_start = false;  // a Step asked for before the start was accepted: sent with kStarted
  StopReason stop = StopReason::kNone;
  bool step_in_flight = false;
  double last_record_time = 0;  // the Session's clock when the newest record arrived
  double gen_start_time = 0;
  CacheMode mode = CacheMode::kKV;  // requested: applies from the next step
  // The loaded model's training run (app/lessons/training.h), read when a model
  // loads: null for a model without one; `checkpoint`: the one loaded (-1: none).
  std::shared_ptr<const TrainingRecord> training;
  int checkpoint = -1;
  // The strategy the current generation runs (cmd::SetStrategy). Beam search
  // and speculative decoding keep their own records, one per step or
  // iteration, in the tree's strategy timeline (BranchTree::timeline) beside
  // its (then empty) branches, under the same budget.
  Strategy strategy;
  // The Cache panel's loss-per-position plot (cmd::ScoreKvLayouts): the
  // newest finished scoring (null before the first) and whether one runs.
  std::shared_ptr<const LayoutScoreResult> kv_scores;
  bool kv_scoring = false;
  // The Serving view's runs (cmd::ServeStart): every step's record so far.
  ServeRuns serving;
  // The chat view's conversation (cmd::ChatOpen).
  ChatState chat;

  // Steps on the timeline, whatever the strategy.
  int timeline_size() const { return tree.timeline_size(); }
  // The current branch's records (sampling; empty while beams or a draft run).
  const std::vector<RecordPtr>& records() const { return tree.current_records(); }
};

// What panels derive from the engine state and keep between frames rather than
// recompute each frame, each keyed by what it was derived from (a record is
// held, so a later one never reuses its address). Never saved.
struct PanelMemo {
  // The Next-token panel's explanation of the shown step under the panel's sampler settings.
  struct Explain {
    RecordPtr rec;
    SamplerSettings settings;
    bool what_if = false;  // settings other than the ones the step ran
    bool ok = false;
    std::string error;
    SamplingExplain e;
  } explain;
  // The attention overview: the binned causal attention matrix of every (layer, head) up to the shown step.
  struct Heat {
    RecordPtr rec;
    size_t count = 0;
    int bins = 0, S = 0, L = 0, H = 0;
    std::vector<float> cell;     // (layer, head, bin_q, bin_k): the largest weight in the bin
    std::vector<uint8_t> known;  // (bin_q): some row of the bin is held
    std::vector<int> bin_start;  // (bins + 1): first position of each bin
  } heat;
  // The Serving view's selected request in the 3D view's terms (serve_request_view),
  // kept while the runs, the run and step shown and the selection stay.
  struct ServeRequest3D {
    uint64_t version = 0;
    int run = -1, shown = -1, req = -1;
    ServeRequestView view;
  } serve_request;
  // The KV calculator's published configurations (assets/kv_configs.json), read once.
  struct KvConfigs {
    bool loaded = false;
    std::vector<KvModelSpec> specs;
    std::string error;
  } kv_configs;
};

// UiState::bottom_tab of the Training tab (the page's commands open it).
inline constexpr int kTrainingTab = 4;

// What the user chose. The choices a saved view restores (max_new — 0 fills
// the context, capped by kDefaultMaxNew —, sampler settings applying from the
// next step, attention layer/head/threshold, text scale, presentation mode
// (F5: panels hidden behind a compact HUD), predict) are its ViewChoices base.
struct UiState : ViewChoices {
  // Prompt
  int preset = 0;  // kNumPresets = custom
  std::string custom_prompt = "In a distant galaxy";
  std::string active_prompt;  // what the current generation started from
  // Playback
  bool playing = true;
  float speed = 2.0f;  // tokens per second
  bool fastest = false;
  // A touch screen (the page saw a touch, or its pointer cannot hover): the
  // buttons leave out their keyboard keys ("Play", not "Play (Space)").
  bool touch = false;
  // Attention (the layer, head and ray threshold are ViewChoices)
  bool rays = true;
  // Decoding strategy being edited in the Decoding panel (sent with cmd::SetStrategy),
  // and the draft model it offers for speculative decoding (kept while another strategy runs).
  Strategy strategy;
  std::string draft_dir;
  SpecStage spec_stage = SpecStage::kAnimate;  // speculative: hold the shown iteration at a stage
  bool draft_other_folder = false;             // the draft picker shows a folder field, not the shipped models
  // KV cache layout (applies from the next generation)
  KVLayout kv_layout;
  // Model
  std::string model_dir_input;
  // View
  CameraPreset camera = CameraPreset::kFront;
  bool auto_camera = true;  // false once the user orbits/pans/zooms
  bool labels = true, legend = true, grid = true;
  bool hud = false;  // the overlay's counters (the Cache panel shows them already)
  bool fullscreen = false;
  bool show_panels = true;
  bool left_open = true, right_open = true;  // sidebars (folded: a narrow strip)
  bool teach_open = false;                   // the teaching tabs under the timeline
  // What the layout last fitted the panels to (app/gui/layout.cpp), and the 3D
  // view's banner and legend bands of the last frame (gui.cpp).
  struct PanelFit {
    float w = 0, h = 0, text_scale = 0, view_text = 0;
    bool lessons = false;
    bool full_strip = true;     // the bottom strip's second row (lessons button, history line)
    bool lessons_side = false;  // the open lessons in a column beside the view (a short window)
    bool left = false, right = false, lessons_folded = false, history = false;  // folded by fitting, still folded
    std::string note;  // what fitting folded and is still folded, "" = nothing
  } panel_fit;
  float view_text_h = 0;
  bool qkv_open = false;         // the Q·K·V inspector's section (opened by a demo view)
  bool next_token_open = false;  // the Next-token section (the sampling explainer), likewise
  bool model_open = false;       // the Model section, likewise
  bool ignore_eos = false;       // --soak-rounds: generate past end-of-text, up to the context limit
  // Timeline: the shown step (record index); -1 = follow the newest.
  int view_step = -1;
  bool colour_blind = false;  // projector-safe, colour-blind-safe palette
  // Predict (ViewChoices::predict): the newest record index the class has seen.
  int revealed_step = -1;  // newest record index the class has seen
  // KV memory calculator.
  int kv_context = 100000;  // tokens
  int kv_dtype = 1;         // index into all_kv_dtypes() (model/kv/kv_cache.h): f16
  int kv_selected = -1;     // highlighted row of the table (-1: the loaded model)
  int bottom_tab = 0;       // 0 branches, 1 phases, 2 KV memory, 3 attention heads, 4 training (kTrainingTab)
  bool select_tab = false;  // make bottom_tab the open tab next frame
  std::string view_path;    // saved view file
  int training_slice = -1;  // Training tab: validation slice shown (-1: their mean)
  // Training tab, while the page fetches the checkpoints (app/platform/web): e.g.
  // "Fetching the training checkpoints: 3.1 of 16.0 MB"; empty on the desktop.
  std::string training_fetch;
  // Errors shown in the error panel until dismissed.
  std::vector<std::string> errors;
  std::string status;  // one line, e.g. "saved kvscope-....png"
  // The Serving view (app/gui/panels/serving.cpp), open in place of the 3D view and its panels.
  struct Serving {
    bool open = false;
    int preset = 0;           // app/lessons/serve_presets.h's index, the one running
    bool playing = false;     // a step per 1 / speed seconds
    float speed = 2.0f;       // steps per second
    double last_step = -1e9;  // when playback last moved
    int view_step = -1;       // the shown record; -1 = follow the newest
    int run = 0;              // the run shown (static vs continuous: 0 static, 1 continuous)
    int selected = -1;        // the selected lane's request (-1: none)
    // Where the panel leaves the 3D view for the selected request (its
    // attention rays): window pixels; w = 0 while none is drawn. The pointer
    // is on it (it orbits and zooms the camera there); the lanes are folded
    // to the selected one and a strip (ServeScene::folded).
    float view_x = 0, view_y = 0, view_w = 0, view_h = 0;
    bool view_hovered = false, folded = false;
  } serving;
  // The chat view (app/gui/panels/chat.cpp), open in place of the generation's panels.
  struct Chat {
    bool open = false;
    std::string input;          // the message being typed
    std::string system_edit;    // the system prompt being edited (applied by cmd::ChatSystem)
    size_t shown_messages = 0;  // messages drawn last frame (a new one scrolls the list to the end)
    size_t shown_reply = 0;     // the streaming reply's length drawn last frame
  } chat;
  // The chat's remembered choices (rows of choice_table()): its system prompt
  // ("" = the template's own default, if any), its template (0 = the model's
  // own, k = the built-in format k - 1 of ChatFormat: chatml, llama3, zephyr,
  // mistral) and the most tokens a reply may have.
  std::string chat_system = "You are a helpful assistant.";
  int chat_format = 0;
  int chat_max_new = 32;
  PanelMemo memo;
};

// UiState::chat_format's values.
inline constexpr int kChatFormats = 4;  // the built-in formats after "the model's own"

inline constexpr int kDefaultMaxNew = 200;

// New tokens so far: of the shown step (sampling), of every running beam
// (beam search) or of the newest iteration (speculative decoding).
// "weights from training step 300 of 7200" while an early training
// checkpoint is loaded (the banner names it, so its odd text reads as the
// lesson, not as the model); "" for the final model or none.
inline std::string checkpoint_note(const EngineState& engine) {
  if (!engine.training || engine.checkpoint < 0 ||
      engine.checkpoint + 1 >= static_cast<int>(engine.training->checkpoints.size()))
    return "";
  return "weights from training step " +
         std::to_string(engine.training->checkpoints[static_cast<size_t>(engine.checkpoint)].step) + " of " +
         std::to_string(engine.training->checkpoints.back().step);
}

inline int new_tokens(const EngineState& engine) {
  return std::visit(overloaded{
                        [&](std::monostate) {
                          return engine.seq.current ? static_cast<int>(engine.seq.tokens.size()) - engine.seq.n_prompt
                                                    : 0;
                        },
                        [](const BeamTimeline& b) { return b.empty() ? 0 : b.back()->index + 1; },
                        [](const SpecTimeline& s) { return s.empty() ? 0 : s.back()->generated; },
                    },
                    engine.tree.timeline());
}

// The record index the timeline shows (-1 before the prefill).
inline int shown_step(const EngineState& engine, const UiState& ui) {
  const int n = engine.timeline_size();
  if (n == 0) return -1;
  return ui.view_step < 0 ? n - 1 : std::min(ui.view_step, n - 1);
}
// True while predict mode hides the shown (newest) step's token and its bars:
// the one check every producer of next-token text goes through (the scene
// through ViewOptions::hide_newest, the panels and the HUD's card directly),
// for every decoding strategy (the beams' new tokens, the draft's verdicts).
inline bool prediction_hidden(const EngineState& engine, const UiState& ui) {
  const int s = shown_step(engine, ui);
  return ui.predict && s >= 0 && s == engine.timeline_size() - 1 && ui.revealed_step < s;
}

}  // namespace kvscope
