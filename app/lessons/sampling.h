// Sampling made visible: from one step's stored raw
// logits, the sequence so far and the sampler settings, every stage of the
// engine's Sampler laid out for the probability bars: the repetition
// penalty's edits, the distribution before and after temperature, what top-k
// and top-p cut, and where the uniform draw lands on the cumulative bar of
// what was kept. It calls the engine's own helpers (apply_repetition_penalty,
// softmax, kept_indices) in the Sampler's order with its arithmetic, so the
// token it names is the token the Sampler picks. New settings are explained
// from the same stored logits: no forward runs.
#pragma once

#include <vector>

#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"

namespace kvscope {

// A token the repetition penalty touched (each distinct token of the history once).
struct PenaltyTouch {
  int token = 0;
  float logit_before = 0;  // raw logit
  float logit_after = 0;   // divided by the penalty when > 0, multiplied when <= 0
  float p_before = 0;      // softmax at T = 1 of the raw logits
  float p_after = 0;       // softmax at T = 1 of the penalised logits
};

// One probability bar.
struct TokenBar {
  int token = 0;
  int rank = 0;            // 0 = best in the drawn-from distribution (ties: lower id first)
  float logit_raw = 0;     // as the model produced it
  float logit = 0;         // after the repetition penalty
  float p_base = 0;        // softmax of `logit` at T = 1 ("before temperature")
  float p_temp = 0;        // softmax of `logit` / T ("after temperature": what the Sampler reports)
  float p_kept = 0;        // renormalised over the kept set; 0 when cut
  bool penalized = false;  // the repetition penalty changed its logit
  bool cut_by_top_k = false;
  bool cut_by_top_p = false;  // survived top-k, cut by top-p
  bool chosen = false;
  // Its interval on the cumulative bar of the kept set, [cum_lo, cum_hi) in
  // [0, 1]; both -1 when cut.
  double cum_lo = -1, cum_hi = -1;

  bool kept() const { return cum_lo >= 0; }
};

struct SamplingExplain {
  SamplerSettings settings;
  bool greedy = true;
  float temperature = 1;  // the one applied (1 when greedy: the Sampler ignores it)
  int vocab = 0;

  std::vector<float> p_raw;             // (vocab) softmax at T = 1 of the raw logits
  std::vector<float> p_base;            // (vocab) softmax at T = 1 after the penalty
  std::vector<float> p_temp;            // (vocab) after the penalty and temperature: drawn from
  std::vector<PenaltyTouch> penalized;  // ascending token id

  int n_top_k = 0;             // size of the set top-k keeps (= vocab when off)
  std::vector<int> kept;       // best first: survived top-k then top-p (greedy: the argmax only)
  std::vector<double> cum_hi;  // (kept) upper end of each kept token's interval on the cumulative bar
  double kept_mass = 0;        // mass of `kept` in p_temp, before renormalising

  double draw = -1;  // the uniform number used, -1 when greedy
  int draw_bar = 0;  // index into `kept` where the draw lands
  int token = 0;     // the token the Sampler picks with these settings and this draw
  float prob = 0;    // p_temp[token]: what the engine stores as the record's prob

  std::vector<TokenBar> bars;  // best-first top N (cut ones too), plus the chosen token if lower

  double mass_cut_by_top_k = 0;         // mass of p_temp that top-k removed
  double mass_cut_by_top_p = 0;         // mass of p_temp that top-p removed (of what top-k kept)
  bool draw_settled_by_record = false;  // explain_record: the float draw sat on a boundary
};

// Explains one sampling step. `history` = every token of the sequence before
// this step (prompt + chosen so far; the penalty reads it). `draw` = the
// uniform number in [0, 1) the Sampler used (ignored when greedy).
// Throws kvscope::Error on empty logits or invalid settings (as Sampler does).
SamplingExplain explain_sampling(const std::vector<float>& logits, const std::vector<int>& history,
                                 const SamplerSettings& settings, double draw, int n_top = 10);

// The same for a stored record, with its own settings and draw. Throws
// kvscope::Error when the record's logits were not kept (or were dropped by
// the History's memory policy). The record stores the draw as a float: when
// the float lies within its rounding of a boundary between two kept tokens,
// the engine's choice (rec.token) settles which side it fell on.
SamplingExplain explain_record(const StepRecord& rec, const std::vector<int>& history, int n_top = 10);

// "What if": the record's stored logits and draw under other settings (the
// bars redraw at once when the temperature / top-k / top-p sliders move).
// With greedy records (no draw stored) a non-greedy what-if uses `draw_if_none`.
SamplingExplain explain_with_settings(const StepRecord& rec, const std::vector<int>& history,
                                      const SamplerSettings& settings, int n_top = 10, double draw_if_none = 0.5);

// The n-th uniform draw (0-based) of a Sampler seeded with `seed`, when every
// step since the seeding was sampled (greedy steps draw nothing). Mirrors
// Sampler::sample: mt19937_64, top 53 bits, scaled to [0, 1).
double sampler_draw(uint64_t seed, int n);

}  // namespace kvscope
