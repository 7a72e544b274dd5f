// Speculative decoding's acceptance test as pure functions over token
// distributions (Leviathan et al. 2023, Chen et al. 2023). The draft model
// proposes x ~ q; the target keeps it with probability min(1, p(x) / q(x));
// at the first rejection it draws a replacement from norm(max(0, p - q)).
// Whatever the draft, the emitted token is distributed exactly as p, and a
// drafted token is accepted with probability sum_x min(p(x), q(x)).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/decoding/sampler.h"
#include "model/decoding/spec_record.h"

namespace kvscope {

// (vocab) probabilities, summing to 1.
using TokenDist = std::vector<double>;

// The "standardized" distribution the sampler draws from under `s`:
// repetition penalty over `history`, softmax at the temperature, the top-k /
// top-p cut, renormalised; greedy = one-hot on the argmax (ties: lower id).
// Built from the sampler's own helpers, so it is the sampler's distribution.
TokenDist sampling_distribution(const std::vector<float>& logits, const std::vector<int>& history,
                                const SamplerSettings& s);

// sum_x min(p(x), q(x)): the probability that a draft from q is accepted.
double acceptance_probability(const TokenDist& p, const TokenDist& q);

// norm(max(0, p - q)); p itself when p == q (then nothing is ever rejected).
TokenDist residual_distribution(const TokenDist& p, const TokenDist& q);

// Inverse CDF in token-id order: the first token whose cumulative mass
// exceeds u in [0, 1); tokens of zero probability are never returned.
int draw_token(const TokenDist& d, double u);

// Uniform [0, 1) numbers from a seeded 64-bit Mersenne twister, 53 bits each
// (the sampler's construction), so that runs are reproducible.
class UniformSource {
 public:
  explicit UniformSource(uint64_t seed = 0) : rng_(seed) {}
  double next() { return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  std::mt19937_64 rng_;
};

// The outcome of verifying K drafted tokens.
struct Verification {
  std::vector<DraftVerdict> drafted;  // the first n_accepted + 1 were tested (all K when all passed)
  int n_accepted = 0;
  int next_token = 0;  // the replacement (rejection) or bonus (all accepted) token
  bool bonus = false;
  double next_prob = 0;  // probability of next_token in the distribution it was drawn from
  double next_draw = -1;
};

// Verifies drafted[0..K) drawn from q[i]; p has K + 1 rows (the target at
// every drafted position plus the one after them). Draws from `u`: one per
// tested token, then one for the replacement or bonus token. Greedy p and q
// (one-hot) reduce to "accept while the argmaxes agree".
Verification verify_draft(const std::vector<int>& drafted, const std::vector<TokenDist>& q,
                          const std::vector<TokenDist>& p, UniformSource& u);

// Leviathan et al.'s expected improvement factor in wall time for K drafted
// tokens per iteration, acceptance rate alpha and cost ratio c = (draft
// forward time) / (target forward time):
// (1 - alpha^(K+1)) / ((1 - alpha) (K c + 1)); at alpha = 1 the numerator
// over (1 - alpha) is K + 1.
double predicted_speedup(double alpha, int k, double cost_ratio);

// Expected tokens per target forward: (1 - alpha^(K+1)) / (1 - alpha).
double expected_tokens_per_iteration(double alpha, int k);

// A measured rate num / den: alpha (accepted per drafted, or per tested
// token), the cost ratio (draft over target forward time). NaN when den is 0
// (nothing drafted, tested or timed): undefined, never 0. Front ends print
// it with rate_text ("n/a") and write JSON null.
double measured_rate(double num, double den);
// x with `decimals` decimals, or "n/a" when x is NaN (undefined).
std::string rate_text(double x, int decimals);

}  // namespace kvscope
