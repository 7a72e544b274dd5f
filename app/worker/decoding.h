// The window's decoding strategy: one token at a time with the sampler, beam
// search (model/decoding/beam_generator.h) or speculative decoding with a draft model
// (model/decoding/speculative_generator.h). Chosen in the Decoding panel, carried by
// cmd::SetDecoding, applied from the next start.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

enum class DecodeMode { kSample, kBeam, kSpeculative };

inline const char* to_string(DecodeMode m) {
  switch (m) {
    case DecodeMode::kBeam:
      return "beam search";
    case DecodeMode::kSpeculative:
      return "speculative";
    default:
      return "sampling";
  }
}

struct DecodeSettings {
  DecodeMode mode = DecodeMode::kSample;
  int beams = 4;                // N, 1..8
  float length_penalty = 1.0f;  // exponent of the generated length in a hypothesis' score
  std::string draft_dir;        // speculative: the draft model folder (same tokenizer as the target)
  int k = 4;                    // speculative: tokens drafted per iteration, 1..16
};

inline bool operator==(const DecodeSettings& a, const DecodeSettings& b) {
  return a.mode == b.mode && a.beams == b.beams && a.length_penalty == b.length_penalty && a.draft_dir == b.draft_dir &&
         a.k == b.k;
}
inline bool operator!=(const DecodeSettings& a, const DecodeSettings& b) {
  return !(a == b);
}

// What one step of the current strategy yields (a sum type, dispatched with
// std::visit): a sampling record, a beam-search step or a speculative iteration.
using StepOutput = std::variant<RecordPtr, BeamRecordPtr, SpecIterationPtr>;

// Beam search's steps and speculative decoding's iterations: one timeline
// each (they never fork). Sampling has none of its own: its records are the
// branches' (BranchTree).
using BeamTimeline = std::vector<BeamRecordPtr>;
using SpecTimeline = std::vector<SpecIterationPtr>;
using StrategyTimeline = std::variant<std::monostate, BeamTimeline, SpecTimeline>;
// Why `d` cannot start on a cache laid out as `kv`, or "" when it can: a
// beam's fork and a draft's rollback need positions a sliding window or a
// score rule may have dropped. The one check of the window's start path: the
// session asks it before it changes anything (a refused Restart leaves the
// generation on screen running), the engine thread again before it starts.
inline std::string strategy_refusal(const DecodeSettings& d, const KVSettings& kv) {
  if (d.mode == DecodeMode::kSample) return "";
  const std::string who = d.mode == DecodeMode::kBeam ? "beam search" : "speculative decoding";
  const std::string why = d.mode == DecodeMode::kBeam ? "a fork" : "a rollback";
  if (kv.evict != KVEvict::kNone)
    return who + ": eviction by score (" + to_string(kv.evict) + ") is not available (" + why +
           " needs positions the rule may have dropped); set evict by score to off";
  if (kv.window > 0 || kv.sinks > 0)
    return who + ": the sliding window of the KV memory layout is not available with " +
           (d.mode == DecodeMode::kBeam ? "beams" : "a draft") + " (" + why +
           " needs positions the window evicts); set the window to 0";
  return "";
}

// The speculative stage the window holds an iteration at (SpecTiming in
// render/scene/scene_spec.h): -1 plays the stages as an animation.
enum class SpecStage { kAnimate = -1, kDraft = 0, kVerify = 1, kResolve = 2 };

}  // namespace kvscope
