#include "app/lessons/decode.h"

#include <algorithm>

namespace kvscope {

BeamTotals beam_totals(const std::vector<BeamRecordPtr>& records, int step) {
  BeamTotals t;
  if (records.empty() || step < 0) return t;
  step = std::min(step, static_cast<int>(records.size()) - 1);
  t.step = step;
  t.prompt_tokens = static_cast<int>(records.front()->prompt_pieces.size());
  for (int i = 0; i <= step; ++i) {
    const BeamStepRecord& r = *records[static_cast<size_t>(i)];
    t.forwards += r.forwards;
    t.positions += r.positions;
    t.flops += r.flops;
    t.ms += r.ms;
  }
  const BeamStepRecord& r = *records[static_cast<size_t>(step)];
  t.running = static_cast<int>(r.running.size());
  t.finished = static_cast<int>(r.finished.size());
  t.expanded = static_cast<int>(r.expanded.size());
  t.positions_step = r.positions;
  t.flops_step = r.flops;
  t.ms_step = r.ms;
  t.kv_shared = r.kv_bytes_shared;
  t.kv_separate = r.kv_bytes_independent;
  t.cow_copies = r.cow_copies;
  t.block = r.block;
  return t;
}

std::vector<int> beam_tokens(const std::vector<BeamRecordPtr>& records, int step, int beam_id) {
  if (records.empty() || step < 0 || records.front()->expanded.empty()) return {};
  step = std::min(step, static_cast<int>(records.size()) - 1);
  const BeamStepRecord& r = *records[static_cast<size_t>(step)];
  for (const Beam& b : r.running)
    if (b.id == beam_id && !b.tokens.empty()) return b.tokens;
  for (const Hypothesis& h : r.finished)
    if (h.beam_id == beam_id && !h.tokens.empty()) return h.tokens;
  // Rebuilt, newest token first: the candidate that became `id` names its
  // parent, a beam of the step before (ids are unique within the search).
  std::vector<int> tail;
  int id = beam_id;
  for (int i = step; i >= 0 && id != 0; --i) {  // 0: the prompt's beam
    const BeamStepRecord& ri = *records[static_cast<size_t>(i)];
    for (const BeamCandidate& c : ri.candidates) {
      if (c.beam_id != id || c.parent < 0 || c.parent >= static_cast<int>(ri.expanded.size())) continue;
      tail.push_back(c.token);
      id = ri.expanded[static_cast<size_t>(c.parent)].id;
      break;
    }
  }
  if (id != 0) return {};
  std::vector<int> out = records.front()->expanded.front().tokens;
  out.insert(out.end(), tail.rbegin(), tail.rend());
  return out;
}

SpecTotals spec_totals(const std::vector<SpecIterationPtr>& iterations, int step) {
  SpecTotals t;
  if (iterations.empty() || step < 0) return t;
  step = std::min(step, static_cast<int>(iterations.size()) - 1);
  t.iteration = step;
  for (int i = 0; i <= step; ++i) {
    const SpecIteration& it = *iterations[static_cast<size_t>(i)];
    t.rolled_back_target += it.target_rolled_back;
    t.rolled_back_draft += it.draft_rolled_back;
    for (const DraftVerdict& d : it.drafted) t.tested += d.r >= 0 ? 1 : 0;
    if (i == 0) continue;
    t.draft_ms += it.draft_ms;
    t.target_ms += it.target_ms;
    t.draft_timed += it.k;
    t.target_timed += 1;
  }
  const SpecIteration& it = *iterations[static_cast<size_t>(step)];
  t.k = it.k;
  t.generated = it.generated;
  t.drafted = it.drafted_total;
  t.accepted = it.accepted_total;
  t.target_forwards = it.target_forwards;
  t.draft_forwards = it.draft_forwards;
  t.forwards_saved = std::max(0, it.generated - it.target_forwards);
  t.target_kv = it.target_kv_bytes;
  t.draft_kv = it.draft_kv_bytes;
  return t;
}

}  // namespace kvscope
