// Turns logits into the next token: repetition penalty, temperature, top-k,
// top-p, then a seeded draw (or argmax when greedy).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvscope {

struct SamplerSettings {
  bool greedy = true;
  float temperature = 1.0f;         // > 0
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float repetition_penalty = 1.0f;  // >= 1 usually; 1 = off
  uint64_t seed = 0;
};

struct Candidate {
  int token = 0;
  float prob = 0;  // in the distribution the token was drawn from (before cuts)
};

struct SampleResult {
  int token = 0;
  float prob = 0;              // probability of `token` in `dist`
  std::vector<Candidate> top;  // best first
  float draw = -1;             // the uniform number used, -1 when greedy
};

// Every stage of one sampling decision, as Sampler::sample takes it; the
// sampling explainer (app/lessons/sampling) formats this trace.
struct SampleTrace {
  std::vector<float> logits;   // (vocab) after the repetition penalty
  std::vector<float> probs;    // (vocab) softmax(logits / T) (T = 1 when greedy): the distribution drawn from
  std::vector<int> kept;       // best first: survived top-k then top-p (greedy: the argmax only)
  std::vector<double> cum_hi;  // (kept) upper end of each kept token's interval on the cumulative bar
  double kept_mass = 0;        // mass of `kept` in probs, before renormalising
  double draw = -1;            // the uniform number used, -1 when greedy
  int draw_bar = 0;            // index into `kept` where the draw lands
  int token = 0;               // the choice
};

// The Sampler's decision for the uniform number `u` in [0, 1) (ignored when
// greedy). Pure: Sampler::sample is this with `u` from its generator.
SampleTrace sample_trace(const std::vector<float>& logits, const std::vector<int>& history, const SamplerSettings& s,
                         double u);
// The uniform number a Sampler draws from its generator: the top 53 bits,
// scaled to [0, 1), identical across modes and platforms.
double uniform_draw(std::mt19937_64& rng);

class Sampler {
 public:
  explicit Sampler(const SamplerSettings& s = {});
  void set_settings(const SamplerSettings& s);  // reseeds
  const SamplerSettings& settings() const { return s_; }

  // `history` = every token of the sequence so far (for the penalty).
  SampleResult sample(const std::vector<float>& logits, const std::vector<int>& history, int n_top = 10);

 private:
  SamplerSettings s_;
  std::mt19937_64 rng_;
};

// Pure helpers (tested on their own).
void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& history, float penalty);
std::vector<float> softmax(const std::vector<float>& logits, float temperature = 1.0f);
// (n) logits -> (n) log probabilities in double, x - log(sum(exp(x))): where
// log probabilities are added up (beam scores, a text's NLL, KL).
std::vector<double> log_softmax(const float* logits, size_t n);
// Indices kept by top-k then top-p over `probs` (probabilities: finite, >= 0),
// best first; ties keep the lower id first.
std::vector<int> kept_indices(const std::vector<float>& probs, int top_k, float top_p);

}  // namespace kvscope
