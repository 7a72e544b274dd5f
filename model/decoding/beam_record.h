// What one beam-search step leaves for the scene, the panels and the CLI
// (BeamGenerator in beam_generator.h runs it). Data only: a reader of records
// includes this, not the driver, the engine or the cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/decoding/beam_search.h"
#include "model/decoding/step_record.h"

namespace kvscope {

// One beam-search step, immutable once returned.
struct BeamStepRecord {
  int index = 0;                              // 0 = the forward over the prompt
  std::vector<Beam> expanded;                 // the running beams this step's forward ran
  std::vector<BeamCandidate> candidates;      // the 2N best continuations, best first
  std::vector<std::string> candidate_pieces;  // display-safe piece of each candidate's token
  std::vector<std::string> prompt_pieces;     // record 0 only: the prompt's pieces
  std::vector<Beam> running;                  // the running beams after the step
  std::vector<Hypothesis> finished;           // finished hypotheses so far, best first
  int positions = 0;                          // positions the step's forward(s) computed
  int forwards = 0;                           // engine forwards this step ran
  // After the step's forward (before the forks): what the cache holds for the
  // expanded beams (KVCache::bytes, shared blocks once) and what one cache per
  // expanded beam would hold in the same layout.
  uint64_t kv_bytes_shared = 0;
  uint64_t kv_bytes_independent = 0;
  uint64_t cow_copies = 0;  // blocks copied on write so far
  int block = 0;            // positions per block (0: contiguous)
  uint64_t flops = 0;
  double ms = 0;
  StopReason stop = StopReason::kNone;
};

using BeamRecordPtr = std::shared_ptr<const BeamStepRecord>;

}  // namespace kvscope
