#include "model/decoding/speculative_accept.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "model/core/error.h"

namespace kvscope {

TokenDist sampling_distribution(const std::vector<float>& logits_in, const std::vector<int>& history,
                                const SamplerSettings& s) {
  if (logits_in.empty()) throw Error("sampling_distribution: no logits");
  std::vector<float> logits = logits_in;
  apply_repetition_penalty(logits, history, s.repetition_penalty);
  TokenDist d(logits.size(), 0.0);
  if (s.greedy) {
    const std::vector<float> probs = softmax(logits, 1.0f);
    d[static_cast<size_t>(kept_indices(probs, 1, 1.0f).front())] = 1.0;
    return d;
  }
  const std::vector<float> probs = softmax(logits, s.temperature);
  const std::vector<int> kept = kept_indices(probs, s.top_k, s.top_p);
  double mass = 0;
  for (int i : kept) mass += probs[static_cast<size_t>(i)];
  for (int i : kept) d[static_cast<size_t>(i)] = probs[static_cast<size_t>(i)] / mass;
  return d;
}

double acceptance_probability(const TokenDist& p, const TokenDist& q) {
  if (p.size() != q.size()) throw Error("acceptance_probability: p and q have different vocabularies");
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::min(p[i], q[i]);
  return s;
}

TokenDist residual_distribution(const TokenDist& p, const TokenDist& q) {
  if (p.size() != q.size()) throw Error("residual_distribution: p and q have different vocabularies");
  TokenDist r(p.size());
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    r[i] = std::max(0.0, p[i] - q[i]);
    s += r[i];
  }
  if (!(s > 0)) return p;
  for (double& x : r) x /= s;
  return r;
}

int draw_token(const TokenDist& d, double u) {
  double cum = 0;
  int last = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] <= 0) continue;
    cum += d[i];
    last = static_cast<int>(i);
    if (u < cum) return last;
  }
  if (last < 0) throw Error("draw_token: the distribution has no mass");
  return last;  // u beyond the rounded total: the last token with mass
}

Verification verify_draft(const std::vector<int>& drafted, const std::vector<TokenDist>& q,
                          const std::vector<TokenDist>& p, UniformSource& u) {
  const size_t k = drafted.size();
  if (q.size() != k || p.size() != k + 1) {
    throw Error("verify_draft: " + std::to_string(k) + " drafted tokens need as many q rows and " +
                std::to_string(k + 1) + " p rows (got " + std::to_string(q.size()) + " and " +
                std::to_string(p.size()) + ")");
  }
  Verification v;
  for (size_t i = 0; i < k; ++i) {
    DraftVerdict dv;
    dv.token = drafted[i];
    dv.p = p[i][static_cast<size_t>(dv.token)];
    dv.q = q[i][static_cast<size_t>(dv.token)];
    v.drafted.push_back(dv);
  }
  for (size_t i = 0; i < k; ++i) {
    DraftVerdict& dv = v.drafted[i];
    dv.r = u.next();
    // r < p / q without dividing (q > 0: the draft drew the token from q).
    dv.accepted = dv.r * dv.q < dv.p;
    if (!dv.accepted) {
      const TokenDist res = residual_distribution(p[i], q[i]);
      v.next_draw = u.next();
      v.next_token = draw_token(res, v.next_draw);
      v.next_prob = res[static_cast<size_t>(v.next_token)];
      return v;
    }
    ++v.n_accepted;
  }
  v.bonus = true;
  v.next_draw = u.next();
  v.next_token = draw_token(p[k], v.next_draw);
  v.next_prob = p[k][static_cast<size_t>(v.next_token)];
  return v;
}

double expected_tokens_per_iteration(double alpha, int k) {
  if (alpha >= 1.0) return k + 1;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

double measured_rate(double num, double den) {
  return den != 0 ? num / den : std::nan("");
}

std::string rate_text(double x, int decimals) {
  if (std::isnan(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

double predicted_speedup(double alpha, int k, double cost_ratio) {
  return expected_tokens_per_iteration(alpha, k) / (k * cost_ratio + 1.0);
}

}  // namespace kvscope
