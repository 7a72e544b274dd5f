// What the window keeps of a decoding strategy's run (the strategy itself is
// model/decoding/strategy.h's Strategy, chosen in the Decoding panel, carried
// by cmd::SetStrategy, applied from the next start).
#pragma once

#include <variant>
#include <vector>

#include "model/decoding/strategy.h"

namespace kvscope {

// Beam search's steps and speculative decoding's iterations: one timeline
// each (they never fork). Sampling has none of its own: its records are the
// branches' (BranchTree).
using BeamTimeline = std::vector<BeamRecordPtr>;
using SpecTimeline = std::vector<SpecIterationPtr>;
using StrategyTimeline = std::variant<std::monostate, BeamTimeline, SpecTimeline>;
// The speculative stage the window holds an iteration at (SpecTiming in
// render/scene/scene_spec.h): -1 plays the stages as an animation.
enum class SpecStage { kAnimate = -1, kDraft = 0, kVerify = 1, kResolve = 2 };

}  // namespace kvscope
