// What a panel, a shortcut or a scripted driver may ask the window for: a
// std::variant of small structs, so every kind carries exactly its own
// fields and std::visit makes the compiler check each one is handled.
// Session::execute (app/session/session.h) carries them out, GL-free.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "app/worker/decoding.h"
#include "model/core/overloaded.h"
#include "render/scene/scene_camera.h"

namespace kvscope {
namespace cmd {

struct Start {  // (re)start the generation from this prompt
  std::string prompt;
};
struct Reset {};  // restart from the active prompt
struct PlayPause {};
struct Step {};  // one forward (a generation is started first when none is)
struct ToggleCache {};
struct SetSampler {  // applies from the next step (and becomes UiState::sampler)
  SamplerSettings sampler;
};
struct SetMaxNew {
  int max_new = 0;
};
struct SetStrategy {  // sampling, beam search or speculative decoding: restarts the generation with it
  Strategy strategy;
};
struct LoadModel {
  std::string dir;
};
struct CancelLoad {};  // stop the load in progress (the current model stays)
struct Scrub {         // move the timeline by `steps` (negative: back); forward at the newest = compute it
  int steps = 0;
};
struct ScrubTo {  // show record `step`
  int step = 0;
};
struct Fork {  // force `token` at the shown step
  int token = -1;
};
struct SelectBranch {
  int id = 0;
};
struct SelectHead {
  int layer = -1, head = -1;
};
struct Presentation {};  // toggle presentation mode (F5)
struct Predict {};       // toggle predict mode
struct Reveal {};        // show the hidden newest token
struct Palette {};       // toggle the colour-blind-safe palette
struct SaveView {
  std::string path;
};
struct LoadView {
  std::string path;
};
struct DismissErrors {};
struct TogglePanels {};
struct SetCamera {
  CameraPreset preset = CameraPreset::kFront;
};
struct Fit {};  // back to the automatic camera
struct Screenshot {};
struct Fullscreen {};
struct TextScale {
  float scale = 1.0f;
};
// Load checkpoint `index` of the loaded model's training run (EngineState::training):
// the same prompt and sampler settings are generated again with those weights.
struct LoadCheckpoint {
  int index = 0;
};
// Score the shown text under each cache layout the Cache panel compares
// (app/worker/kv_scoring.h), on the session's scoring thread.
struct ScoreKvLayouts {};
// The Serving view: open / close it; run a preset (app/lessons/serve_presets.h)
// from its first step; show `steps` more steps (computed at the newest);
// play / pause; show record `step`.
struct ServeOpen {
  bool open = true;
};
struct ServeStart {
  int preset = 0;
};
struct ServeStep {
  int steps = 1;
};
struct ServePlay {};
struct ServeScrubTo {
  int step = 0;
};

// The chat view: open / close it; send a message (refused while a reply is
// generating); start over (the system prompt stays); drop the oldest
// question and answer; a new system prompt or template (0 = the model's own,
// k = built-in format k - 1) starts a new conversation.
struct ChatOpen {
  bool open = true;
};
struct ChatSend {
  std::string text;
};
struct ChatReset {};
struct ChatDrop {};
struct ChatSystem {
  std::string text;
};
struct ChatSetFormat {
  int format = 0;
};

}  // namespace cmd

using UiCommand =
    std::variant<cmd::Start, cmd::Reset, cmd::PlayPause, cmd::Step, cmd::ToggleCache, cmd::SetSampler, cmd::SetMaxNew,
                 cmd::LoadModel, cmd::CancelLoad, cmd::Scrub, cmd::ScrubTo, cmd::Fork, cmd::SelectBranch,
                 cmd::SelectHead, cmd::Presentation, cmd::Predict, cmd::Reveal, cmd::Palette, cmd::SaveView,
                 cmd::LoadView, cmd::DismissErrors, cmd::TogglePanels, cmd::SetCamera, cmd::Fit, cmd::Screenshot,
                 cmd::Fullscreen, cmd::TextScale, cmd::LoadCheckpoint, cmd::SetStrategy, cmd::ScoreKvLayouts,
                 cmd::ServeOpen, cmd::ServeStart, cmd::ServeStep, cmd::ServePlay, cmd::ServeScrubTo, cmd::ChatOpen,
                 cmd::ChatSend, cmd::ChatReset, cmd::ChatDrop, cmd::ChatSystem, cmd::ChatSetFormat>;
using Commands = std::vector<UiCommand>;

}  // namespace kvscope
