// Beam search bookkeeping, fed by log-probabilities: candidates, running
// beams, finished hypotheses, scores and the stopping rule. No model in here;
// the caller runs the forwards (one batched forward per step for all running
// beams) and hands over each beam's log-softmax row.
//
// Conventions: Hugging Face transformers' `_beam_search` with
// early_stopping=False (docs/decoding.md, "Beam search"):
//  - running beams are ranked by cumulative log-probability;
//  - each step expands every running beam over the vocabulary and keeps the
//    best 2N candidates (ties: lower beam index, then lower token id);
//  - a candidate that ends in any of the EOS ids or reaches the maximum length finishes,
//    but only when it ranks among the N best of the 2N; its score is
//    sum_logprob / (generated length)^length_penalty, the generated length
//    counting the EOS and not the prompt; the N best scores are kept;
//  - the next running beams are the N best candidates that did not stop;
//  - the search ends when N hypotheses are finished and the best running
//    beam's sum_logprob / (its generated length)^length_penalty cannot beat
//    the worst of them, or when the maximum length is reached.
#pragma once

#include <cstdint>
#include <vector>

namespace kvscope {

struct BeamSettings {
  int n_beams = 4;              // N, 1..8
  double length_penalty = 1.0;  // exponent of the generated length in the score
  std::vector<int> eos;         // end-of-sequence ids (Llama configs may give several); empty = none
  int max_length = 0;           // total tokens (prompt + generated) at which every beam stops
};

struct Beam {
  std::vector<int> tokens;  // prompt + generated
  double logprob = 0;       // sum of log p over the generated tokens
  int parent = -1;          // index of the running beam it extends in the previous step (-1: the prompt)
  int id = 0;               // unique within the search (stable label across steps)
  int parent_id = -1;
};

struct BeamCandidate {
  int parent = 0;  // index into the running beams it extends
  int token = 0;
  double logprob = 0;        // the parent's logprob + token_logprob
  double token_logprob = 0;  // log p(token | parent)
  bool stops = false;        // EOS or maximum length
  bool finished = false;     // became a finished hypothesis
  bool running = false;      // became a running beam
  int beam_id = -1;          // id of the beam or hypothesis it became (-1: dropped)
};

struct Hypothesis {
  std::vector<int> tokens;  // prompt + generated, EOS included when it ended on EOS
  double sum_logprob = 0;
  double score = 0;  // sum_logprob / gen_len^length_penalty
  int gen_len = 0;
  int beam_id = 0;   // the id the candidate would have had as a beam
  bool eos = false;  // ended on one of the end-of-sequence ids
};

enum class BeamStop { kNone, kBeaten, kMaxLength };

class BeamSearch {
 public:
  BeamSearch(const BeamSettings& s, const std::vector<int>& prompt);

  // The beams the next forward must run (one new position each).
  const std::vector<Beam>& running() const { return running_; }
  // One log-softmax row (vocab) per running beam, in running() order.
  // Returns the 2N candidates of this step, best first.
  const std::vector<BeamCandidate>& step(const std::vector<std::vector<double>>& log_probs);

  bool done() const { return stop_ != BeamStop::kNone; }
  BeamStop stop() const { return stop_; }
  const std::vector<Hypothesis>& finished() const { return finished_; }  // best first
  const std::vector<BeamCandidate>& candidates() const { return candidates_; }
  int n_prompt() const { return n_prompt_; }
  int steps() const { return steps_; }
  const BeamSettings& settings() const { return s_; }

 private:
  void finish(BeamCandidate& c, const Beam& parent, int gen_len, double norm, bool is_eos);
  void judge_stop(bool hits_max);

  BeamSettings s_;
  int n_prompt_ = 0;
  int cur_len_ = 0;  // tokens in every running beam
  int steps_ = 0;
  int next_id_ = 1;
  std::vector<Beam> running_;
  std::vector<Hypothesis> finished_;
  std::vector<BeamCandidate> candidates_;
  BeamStop stop_ = BeamStop::kNone;
};

}  // namespace kvscope
