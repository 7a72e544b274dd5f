#include "model/decoding/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "model/core/error.h"

namespace kvscope {

BeamSearch::BeamSearch(const BeamSettings& s, const std::vector<int>& prompt) : s_(s) {
  if (s.n_beams < 1) throw Error("beam search: the number of beams must be at least 1");
  if (prompt.empty()) throw Error("beam search: the prompt is empty");
  if (s.max_length <= static_cast<int>(prompt.size())) {
    throw Error("beam search: the maximum length " + std::to_string(s.max_length) +
                " leaves no room after a prompt of " + std::to_string(prompt.size()) + " tokens");
  }
  n_prompt_ = static_cast<int>(prompt.size());
  cur_len_ = n_prompt_;
  Beam b;
  b.tokens = prompt;
  running_.push_back(b);
}

namespace {

struct ScoredPair {
  double score;  // the beam's logprob + the token's
  int beam, token;
};

// The best k (beam, token) pairs by cumulative log-prob, ties by beam then
// token: a partial sort of flat indices beam * V + token.
std::vector<ScoredPair> best_pairs(const std::vector<Beam>& running, const std::vector<std::vector<double>>& log_probs,
                                   size_t k) {
  std::vector<ScoredPair> all;
  for (size_t b = 0; b < running.size(); ++b) {
    const std::vector<double>& row = log_probs[b];
    for (size_t t = 0; t < row.size(); ++t)
      all.push_back({running[b].logprob + row[t], static_cast<int>(b), static_cast<int>(t)});
  }
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    [](const ScoredPair& a, const ScoredPair& b) {
                      if (a.score != b.score) return a.score > b.score;
                      if (a.beam != b.beam) return a.beam < b.beam;
                      return a.token < b.token;
                    });
  all.resize(keep);
  return all;
}

}  // namespace

// A finished hypothesis: the parent's tokens + the stopping one.
void BeamSearch::finish(BeamCandidate& c, const Beam& parent, int gen_len, double norm, bool is_eos) {
  Hypothesis h;
  h.tokens = parent.tokens;
  h.tokens.push_back(c.token);
  h.sum_logprob = c.logprob;
  h.gen_len = gen_len;
  h.score = c.logprob / norm;
  h.beam_id = next_id_++;
  c.beam_id = h.beam_id;
  h.eos = is_eos;
  finished_.push_back(std::move(h));
  c.finished = true;
}

// The search ends at the maximum length, with no beam left, or once N
// finished hypotheses all score at least what the best running beam would.
void BeamSearch::judge_stop(bool hits_max) {
  const size_t n = static_cast<size_t>(s_.n_beams);
  if (hits_max || running_.empty()) {
    stop_ = BeamStop::kMaxLength;
  } else if (finished_.size() == n) {
    const double best_running =
        running_.front().logprob / std::pow(static_cast<double>(cur_len_ - n_prompt_), s_.length_penalty);
    if (!(best_running > finished_.back().score)) stop_ = BeamStop::kBeaten;
  }
}

const std::vector<BeamCandidate>& BeamSearch::step(const std::vector<std::vector<double>>& log_probs) {
  if (done()) throw Error("beam search: step after the search ended");
  if (log_probs.size() != running_.size()) {
    throw Error("beam search: " + std::to_string(log_probs.size()) + " log-prob rows for " +
                std::to_string(running_.size()) + " running beams");
  }
  const size_t n = static_cast<size_t>(s_.n_beams);
  const std::vector<ScoredPair> best = best_pairs(running_, log_probs, 2 * n);

  const int gen_len = cur_len_ + 1 - n_prompt_;
  const bool hits_max = cur_len_ + 1 >= s_.max_length;
  const double norm = std::pow(static_cast<double>(gen_len), s_.length_penalty);
  candidates_.clear();
  std::vector<Beam> next;
  for (size_t rank = 0; rank < best.size(); ++rank) {
    const ScoredPair& f = best[rank];
    const Beam& parent = running_[static_cast<size_t>(f.beam)];
    BeamCandidate c;
    c.parent = f.beam;
    c.token = f.token;
    c.logprob = f.score;
    c.token_logprob = log_probs[static_cast<size_t>(f.beam)][static_cast<size_t>(f.token)];
    const bool is_eos = std::find(s_.eos.begin(), s_.eos.end(), f.token) != s_.eos.end();
    c.stops = hits_max || is_eos;
    if (c.stops && rank < n) {
      finish(c, parent, gen_len, norm, is_eos);
    } else if (!c.stops && next.size() < n) {
      Beam b;
      b.tokens = parent.tokens;
      b.tokens.push_back(f.token);
      b.logprob = f.score;
      b.parent = f.beam;
      b.parent_id = parent.id;
      b.id = next_id_++;
      c.beam_id = b.id;
      next.push_back(std::move(b));
      c.running = true;
    }
    candidates_.push_back(c);
  }
  // Keep the N best finished (stable: earlier hypotheses win ties).
  std::stable_sort(finished_.begin(), finished_.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  if (finished_.size() > n) finished_.resize(n);
  ++cur_len_;
  ++steps_;
  running_ = std::move(next);
  judge_stop(hits_max);
  return candidates_;
}

}  // namespace kvscope
