// Beam search on a real model: BeamSearch (beam_search.h) decides, this runs
// the forwards. Every step computes one new position for every running beam,
// each continuing its parent's cached K/V (a beam's cache is a copy of its
// parent's). The shared-vs-independent byte counters count the distinct
// cached prefixes of the running beams against one cache per beam.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "beam_search.h"
#include "engine.h"
#include "generator.h"
#include "model.h"

namespace kvscope {

struct BeamOptions {
  int n_beams = 4;  // 1..8
  double length_penalty = 1.0;
  int max_new = 64;
};

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
  uint64_t kv_bytes_shared = 0;               // K/V held for the running beams, shared prefixes counted once
  uint64_t kv_bytes_independent = 0;          // what one cache per running beam would hold
  uint64_t flops = 0;
  double ms = 0;
  StopReason stop = StopReason::kNone;
};

using BeamRecordPtr = std::shared_ptr<const BeamStepRecord>;

class BeamGenerator {
 public:
  explicit BeamGenerator(std::shared_ptr<const Model> model);

  void start(const std::string& prompt, const BeamOptions& opt);
  void start_tokens(const std::vector<int>& prompt, const BeamOptions& opt);
  BeamRecordPtr step();  // nullptr once done

  bool done() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  const BeamSearch& search() const { return *search_; }
  int n_prompt() const { return search_->n_prompt(); }
  // Generated text of a hypothesis (EOS removed), raw bytes.
  std::string text(const Hypothesis& h) const;
  std::string text(const std::vector<int>& tokens) const;
  double ms_total() const { return ms_total_; }
  uint64_t flops_total() const { return flops_total_; }
  const Model& model() const { return *model_; }

 private:
  std::shared_ptr<const Model> model_;
  Engine engine_;
  std::unique_ptr<BeamSearch> search_;
  std::vector<KVCache> caches_;  // one per running beam, same order
  StopReason reason_ = StopReason::kNone;
  int steps_ = 0;
  int max_new_ = 0;
  double ms_total_ = 0;
  uint64_t flops_total_ = 0;
};

}  // namespace kvscope
