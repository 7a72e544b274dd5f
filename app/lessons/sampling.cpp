#include "app/lessons/sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "model/core/error.h"

namespace kvscope {
namespace {

void check_settings(const SamplerSettings& s) {
  // The Sampler's own validation, so an invalid slider value is reported the same way.
  Sampler check(s);
  (void)check;
}

// Rank of `token` in p (best first, ties: lower id first), as kept_indices orders.
int rank_of(const std::vector<float>& p, int token) {
  const float pt = p[static_cast<size_t>(token)];
  int r = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > pt || (p[i] == pt && static_cast<int>(i) < token)) ++r;
  }
  return r;
}

// Every token whose logit the repetition penalty touched. A token of the
// history whose logit is 0 is "touched" but unchanged (0 * penalty = 0): the
// bars show it too, so the rule is visible.
std::vector<PenaltyTouch> penalty_touches(const SamplingExplain& e, const std::vector<float>& logits,
                                          const std::vector<float>& pen, const std::vector<int>& history,
                                          const SamplerSettings& s) {
  std::vector<PenaltyTouch> out;
  for (size_t i = 0; i < pen.size(); ++i) {
    if (pen[i] != logits[i]) out.push_back({static_cast<int>(i), logits[i], pen[i], e.p_raw[i], e.p_base[i]});
  }
  if (s.repetition_penalty != 1.0f) {
    std::set<int> seen(history.begin(), history.end());
    for (int tk : seen) {
      const size_t ti = static_cast<size_t>(tk);
      if (tk >= 0 && tk < e.vocab && pen[ti] == logits[ti]) {
        out.push_back({tk, logits[ti], pen[ti], e.p_raw[ti], e.p_base[ti]});
      }
    }
    std::sort(out.begin(), out.end(), [](const PenaltyTouch& a, const PenaltyTouch& b) { return a.token < b.token; });
  }
  return out;
}

// Which cut removed what: top-k's set alone, then what top-p removed of it
// (one flag per vocab id).
struct Cuts {
  std::vector<uint8_t> in_top_k, in_kept;
};

// Marks the cuts and adds up the probability mass each removed into `e`.
Cuts mark_cuts(SamplingExplain& e, const SamplerSettings& s) {
  Cuts c;
  c.in_top_k.assign(static_cast<size_t>(e.vocab), 1);
  c.in_kept.assign(static_cast<size_t>(e.vocab), 0);
  e.n_top_k = e.vocab;
  if (!s.greedy) {
    const std::vector<int> top_k_set = kept_indices(e.p_temp, s.top_k, 1.0f);
    e.n_top_k = static_cast<int>(top_k_set.size());
    if (e.n_top_k < e.vocab) {
      std::fill(c.in_top_k.begin(), c.in_top_k.end(), 0);
      for (int i : top_k_set) c.in_top_k[static_cast<size_t>(i)] = 1;
    }
  }
  for (int i : e.kept) c.in_kept[static_cast<size_t>(i)] = 1;
  for (int i = 0; i < e.vocab; ++i) {
    const double p = e.p_temp[static_cast<size_t>(i)];
    if (!c.in_top_k[static_cast<size_t>(i)]) {
      e.mass_cut_by_top_k += p;
    } else if (!c.in_kept[static_cast<size_t>(i)] && !s.greedy) {
      e.mass_cut_by_top_p += p;
    }
  }
  return c;
}

// The bars: the n_top best in the drawn-from distribution, best first, and
// the chosen token after them when it is not among them.
std::vector<TokenBar> token_bars(const SamplingExplain& e, const std::vector<float>& logits,
                                 const std::vector<float>& pen, const SamplerSettings& s, const Cuts& cuts, int n_top) {
  const int n = std::max(0, std::min(n_top, e.vocab));
  std::vector<int> shown = n > 0 ? kept_indices(e.p_temp, n, 1.0f) : std::vector<int>{};
  const bool chosen_shown = std::find(shown.begin(), shown.end(), e.token) != shown.end();
  std::vector<int> kept_pos(static_cast<size_t>(e.vocab), -1);
  for (size_t j = 0; j < e.kept.size(); ++j) kept_pos[static_cast<size_t>(e.kept[j])] = static_cast<int>(j);
  std::set<int> pen_set;
  for (const PenaltyTouch& t : e.penalized) pen_set.insert(t.token);
  auto bar_of = [&](int t, int rank) {
    TokenBar b;
    const size_t ti = static_cast<size_t>(t);
    b.token = t;
    b.rank = rank;
    b.logit_raw = logits[ti];
    b.logit = pen[ti];
    b.p_base = e.p_base[ti];
    b.p_temp = e.p_temp[ti];
    b.penalized = pen_set.count(t) > 0;
    b.chosen = t == e.token;
    if (!s.greedy) {
      b.cut_by_top_k = !cuts.in_top_k[ti];
      b.cut_by_top_p = cuts.in_top_k[ti] && !cuts.in_kept[ti];
    }
    const int j = kept_pos[ti];
    if (j >= 0) {
      b.cum_lo = j == 0 ? 0.0 : e.cum_hi[static_cast<size_t>(j) - 1];
      b.cum_hi = e.cum_hi[static_cast<size_t>(j)];
      b.p_kept = static_cast<float>(s.greedy ? 1.0 : e.p_temp[ti] / e.kept_mass);
    }
    return b;
  };
  std::vector<TokenBar> bars;
  for (size_t r = 0; r < shown.size(); ++r) bars.push_back(bar_of(shown[r], static_cast<int>(r)));
  if (!chosen_shown) bars.push_back(bar_of(e.token, rank_of(e.p_temp, e.token)));
  return bars;
}

}  // namespace

SamplingExplain explain_sampling(const std::vector<float>& logits, const std::vector<int>& history,
                                 const SamplerSettings& s, double draw, int n_top) {
  if (logits.empty()) throw Error("explain_sampling: the step's logits are empty (were they kept?)");
  check_settings(s);
  SamplingExplain e;
  e.settings = s;
  e.greedy = s.greedy;
  e.temperature = s.greedy ? 1.0f : s.temperature;
  e.vocab = static_cast<int>(logits.size());

  // The engine's own decision, stage by stage; the rest only formats it.
  const SampleTrace t = sample_trace(logits, history, s, draw);
  const std::vector<float>& pen = t.logits;
  e.p_raw = softmax(logits, 1.0f);
  e.p_base = softmax(pen, 1.0f);
  e.p_temp = t.probs;
  e.kept = t.kept;
  e.kept_mass = t.kept_mass;
  e.cum_hi = t.cum_hi;
  e.draw = t.draw;
  e.draw_bar = t.draw_bar;
  e.penalized = penalty_touches(e, logits, pen, history, s);
  const Cuts cuts = mark_cuts(e, s);
  e.token = t.token;
  e.prob = e.p_temp[static_cast<size_t>(e.token)];
  e.bars = token_bars(e, logits, pen, s, cuts, n_top);
  return e;
}

SamplingExplain explain_record(const StepRecord& rec, const std::vector<int>& history, int n_top) {
  if (rec.logits.empty()) {
    throw Error("step " + std::to_string(rec.index) +
                ": its logits were not kept (dropped by the timeline's memory limit)");
  }
  SamplingExplain e = explain_sampling(rec.logits, history, rec.sampler, rec.draw, n_top);
  if (!e.greedy && e.token != rec.token) {
    // The record holds the draw rounded to float (about 6e-8 from the double the
    // Sampler used). If that rounding crossed the boundary between the engine's
    // token and its neighbour on the cumulative bar, the engine's token is the truth.
    const double tol = 1.5 / 16777216.0;  // 1.5 float ulps at 1.0
    for (int j = std::max(0, e.draw_bar - 1); j <= std::min<int>(static_cast<int>(e.kept.size()) - 1, e.draw_bar + 1);
         ++j) {
      if (e.kept[static_cast<size_t>(j)] != rec.token) continue;
      const double boundary =
          j < e.draw_bar ? e.cum_hi[static_cast<size_t>(j)] : e.cum_hi[static_cast<size_t>(e.draw_bar)];
      if (std::fabs(boundary - e.draw) <= tol) {
        // Explain again with a draw inside the engine's token's interval, so the
        // bars, draw_bar and token agree; then show the stored draw.
        const double lo = j == 0 ? 0.0 : e.cum_hi[static_cast<size_t>(j) - 1];
        const double mid = 0.5 * (lo + e.cum_hi[static_cast<size_t>(j)]);
        SamplingExplain settled = explain_sampling(rec.logits, history, rec.sampler, mid, n_top);
        settled.draw = e.draw;
        settled.draw_settled_by_record = true;
        return settled;
      }
      break;
    }
  }
  return e;
}

SamplingExplain explain_with_settings(const StepRecord& rec, const std::vector<int>& history,
                                      const SamplerSettings& settings, int n_top, double draw_if_none) {
  if (rec.logits.empty()) {
    throw Error("step " + std::to_string(rec.index) +
                ": its logits were not kept (dropped by the timeline's memory limit)");
  }
  const double draw = rec.draw >= 0 ? static_cast<double>(rec.draw) : draw_if_none;
  return explain_sampling(rec.logits, history, settings, draw, n_top);
}

double sampler_draw(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  if (n > 0) rng.discard(static_cast<unsigned long long>(n));
  return uniform_draw(rng);
}

}  // namespace kvscope
