// What one speculative iteration (draft, verify, resolve) leaves for the
// scene, the panels and the CLI (SpeculativeDecoder in
// speculative_generator.h runs it). Data only: a reader of records includes
// this, not the driver, the engine or the cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/decoding/step_record.h"

namespace kvscope {

// One drafted token's verdict.
struct DraftVerdict {
  int token = 0;
  double p = 0, q = 0;  // target and draft probability of `token`
  double r = -1;        // the uniform draw it was tested with (-1: not tested)
  bool accepted = false;
};

// One draft-then-verify iteration, immutable once returned.
struct SpecIteration {
  int index = 0;
  int first = 0;  // position of the first drafted token (= tokens before the iteration)
  int k = 0;      // tokens drafted (K, fewer near max_new or the context end)
  // The draft's context is too short for the sequence so far, so this
  // iteration drafted nothing: a plain target step (front ends say so).
  bool draft_context_full = false;
  std::vector<DraftVerdict> drafted;
  int n_accepted = 0;
  int next_token = 0;  // replacement (rejection) or bonus (all accepted)
  bool bonus = false;
  double next_prob = 0;
  std::vector<int> emitted;  // accepted drafts + next token, cut at a stop
  std::vector<std::string> emitted_pieces;
  std::vector<std::string> drafted_pieces;  // display-safe, one per drafted token
  std::string next_piece;
  std::vector<int> prompt;                 // iteration 0 only
  std::vector<std::string> prompt_pieces;  // iteration 0 only
  int n_target_layers = 0, n_draft_layers = 0;

  // Counters, from what ran.
  int target_forwards = 0;  // so far in this generation
  int draft_forwards = 0;
  int drafted_total = 0, accepted_total = 0, generated = 0;  // so far, this iteration included
  int target_positions = 0;                                  // positions the target's verify forward computed
  int target_rolled_back = 0, draft_rolled_back = 0;         // cached positions discarded
  uint64_t target_kv_bytes = 0, draft_kv_bytes = 0;          // resident after the rollback
  double draft_ms = 0, target_ms = 0;                        // this iteration
  StopReason stop = StopReason::kNone;
};

using SpecIterationPtr = std::shared_ptr<const SpecIteration>;

}  // namespace kvscope
