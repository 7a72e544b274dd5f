// What beam search and speculative decoding really ran, summed over their
// records up to the shown step: the counters of the Cache & compute panel
// and the numbers of their lessons. Headless and pure (records in, numbers
// out); the panels only format them.
#pragma once

#include <cstdint>
#include <vector>

#include "model/decoding/beam_generator.h"
#include "model/decoding/speculative_generator.h"

namespace kvscope {

// Beam search over records [0, step].
struct BeamTotals {
  int step = -1;                  // the shown record (0 = the prompt's forward)
  int running = 0, finished = 0;  // beams after the step, hypotheses so far
  int expanded = 0;               // beams the step's forward ran
  int forwards = 0;               // engine forwards so far (one batched forward a step)
  int positions_step = 0;         // positions the step's forward computed
  int64_t positions = 0;          // positions computed so far
  int prompt_tokens = 0;          // computed once, shared by every beam
  uint64_t flops_step = 0, flops = 0;
  uint64_t kv_shared = 0, kv_separate = 0;  // after the step's forward (BeamStepRecord)
  uint64_t cow_copies = 0;
  int block = 0;
  double ms_step = 0, ms = 0;      // engine time
  double saved_fraction() const {  // of the K/V bytes, by sharing
    return kv_separate ? 1.0 - static_cast<double>(kv_shared) / static_cast<double>(kv_separate) : 0.0;
  }
};
BeamTotals beam_totals(const std::vector<BeamRecordPtr>& records, int step);

// The tokens (prompt + generated) of the beam or hypothesis `beam_id` as of
// record `step`: its own list where the record still holds it, else rebuilt
// from the candidates of records [0, step] (each beam is its parent + one
// token) and the prompt of record 0. The history's budget drops the lists of
// old records. Empty for an id no candidate of those records became.
std::vector<int> beam_tokens(const std::vector<BeamRecordPtr>& records, int step, int beam_id);

// Speculative decoding over iterations [0, step].
struct SpecTotals {
  int iteration = -1;
  int k = 0;  // drafted per iteration (the shown one's)
  int generated = 0, drafted = 0, accepted = 0;
  int tested = 0;  // drafted tokens the acceptance test reached (those after a rejection are not)
  int target_forwards = 0, draft_forwards = 0;
  int forwards_saved = 0;                             // against plain decoding: one target forward per generated token
  int rolled_back_target = 0, rolled_back_draft = 0;  // positions, so far
  uint64_t target_kv = 0, draft_kv = 0;               // resident after the shown iteration
  // Engine time of the iterations after the first (whose forwards also ran
  // the prompt through both models), and the forwards they ran.
  double draft_ms = 0, target_ms = 0;
  int draft_timed = 0, target_timed = 0;
  // The rates are NaN (undefined, shown "n/a") until something was drafted,
  // tested or timed: measured_rate in speculative_accept.h.
  double alpha() const { return measured_rate(accepted, drafted); }
  // Accepted per tested token: the per-token acceptance rate of Leviathan et al.'s formulas.
  double alpha_tested() const { return measured_rate(accepted, tested); }
  double tokens_per_target_forward() const {
    return target_forwards ? static_cast<double>(generated) / target_forwards : 0.0;
  }
  // Mean time of one draft forward and of one target verify forward (K + 1
  // positions in one pass) after the first iteration, and their ratio.
  double draft_forward_ms() const { return measured_rate(draft_ms, draft_timed); }
  double target_forward_ms() const { return measured_rate(target_ms, target_timed); }
  double cost_ratio() const { return measured_rate(draft_forward_ms(), target_forward_ms()); }
};
SpecTotals spec_totals(const std::vector<SpecIterationPtr>& iterations, int step);

}  // namespace kvscope
