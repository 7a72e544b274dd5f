#include "teach_phases.h"

#include <algorithm>

namespace kvscope {

const char* const kPrefillExplain =
    "Prefill: the whole prompt in one forward - matrices times matrices, so the cores stay busy "
    "and the FLOP rate is high.";
const char* const kDecodeExplain =
    "Decode: one new position per forward - matrices times a vector, so every weight is read from "
    "memory for a handful of FLOPs; time per token is bound by memory, not arithmetic.";
const char* const kRefillExplain =
    "Refill: back in KV CACHE mode after NO CACHE, the cache is rebuilt in one prefill-like forward.";
const char* const kNoCacheExplain =
    "NO CACHE: every step recomputes every earlier position, so its cost grows with the sequence.";

namespace {

void add(PhaseStats& s, const StepRecord& r) {
  s.records += 1;
  s.tokens += 1;
  s.positions += r.n_new;
  s.flops += r.flops;
  s.ms += r.ms;
}

}  // namespace

PhaseReport measure_phases(const std::vector<RecordPtr>& records, size_t count) {
  PhaseReport rep;
  count = std::min(count, records.size());
  for (size_t i = 0; i < count; ++i) {
    const StepRecord& r = *records[i];
    add(rep.all, r);
    if (r.prefill) {
      rep.has_prefill = true;
      rep.ttft_ms = r.ms;
      rep.prompt_tokens = r.n_prompt;
      add(rep.prefill, r);
    } else if (r.mode == CacheMode::kNoCache) {
      add(rep.no_cache, r);
    } else if (r.refill) {
      add(rep.refill, r);
    } else {
      add(rep.decode, r);
    }
  }
  return rep;
}

PhaseReport measure_phases(const std::vector<RecordPtr>& records) {
  return measure_phases(records, records.size());
}

}  // namespace kvscope
