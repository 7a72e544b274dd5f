#include "app/lessons/phases.h"

#include <algorithm>
#include <cstdio>

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
    "NO CACHE: every step recomputes every earlier position, so its cost grows with the sequence: many positions "
    "per second, all but one of them computed before (ms / forward is the time each token waits).";

namespace {

// A forward over `positions` new positions, with what it ran.
void add(PhaseStats& s, int positions, const StepCounters& r) {
  s.records += 1;
  s.tokens += 1;
  s.positions += positions;
  s.flops += r.flops;
  s.ms += r.ms;
  s.read_bytes += r.read_bytes;
}

}  // namespace

PhaseReport measure_phases(const std::vector<RecordPtr>& records, size_t count) {
  PhaseReport rep;
  count = std::min(count, records.size());
  for (size_t i = 0; i < count; ++i) {
    const StepRecord& r = *records[i];
    add(rep.all, r.n_new, r);
    if (r.prefill) {
      rep.has_prefill = true;
      rep.ttft_ms = r.ms;
      rep.prompt_tokens = r.n_prompt;
      add(rep.prefill, r.n_new, r);
    } else if (r.mode == CacheMode::kNoCache) {
      add(rep.no_cache, r.n_new, r);
    } else if (r.refill) {
      add(rep.refill, r.n_new, r);
    } else {
      add(rep.decode, r.n_new, r);
    }
  }
  return rep;
}

std::string phases_summary(const PhaseReport& rep) {
  const PhaseStats& pre = rep.prefill;
  const PhaseStats& dec = rep.decode;
  if (pre.records == 0 || dec.records == 0 || dec.gflops_per_s() <= 0) return {};
  char buf[768];
  const double ratio = pre.gflops_per_s() / dec.gflops_per_s();
  int n = std::snprintf(buf, sizeof buf,
                        "Prefill computed %lld positions at %.0f positions/s and %.2f GFLOP/s; decode "
                        "%.1f tokens/s at %.2f GFLOP/s. ",
                        static_cast<long long>(pre.positions), pre.positions_per_s(), pre.gflops_per_s(),
                        dec.tokens_per_s(), dec.gflops_per_s());
  if (ratio >= 1.5) {
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n),
                       "That is %.1fx the FLOP rate in prefill: matrix x matrix keeps the cores busy, matrix x vector "
                       "waits on memory. ",
                       ratio);
  } else {
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n),
                       "A %lld-token prompt is too short for matrix x matrix to pull ahead here (%.1fx); a longer "
                       "prompt or a bigger model shows prefill's higher FLOP rate. ",
                       static_cast<long long>(pre.positions), ratio);
  }
  std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n),
                "Each decoded token re-read %.1f MB of weights and cache: %.1f GB/s of memory traffic.",
                dec.mean_read_bytes() / 1e6, dec.gb_per_s());
  return buf;
}

PhaseReport measure_phases(const std::vector<RecordPtr>& records) {
  return measure_phases(records, records.size());
}

}  // namespace kvscope
