// Prefill vs decode, measured: the phases contrasted from
// the records of what really ran (their wall times and counted FLOPs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/decoding/generator.h"

namespace kvscope {

// Totals over the records of one phase.
struct PhaseStats {
  int records = 0;          // forwards
  int tokens = 0;           // tokens chosen (one per forward)
  int64_t positions = 0;    // positions computed (sum of n_new)
  uint64_t flops = 0;       // counted FLOPs of those forwards
  double ms = 0;            // their wall time (forward + sampling)
  uint64_t read_bytes = 0;  // weights + cached K/V those forwards had to read (StepRecord::read_bytes)

  double mean_ms() const { return records ? ms / records : 0; }                    // per forward = per token
  double tokens_per_s() const { return ms > 0 ? tokens * 1000.0 / ms : 0; }        // tokens chosen per second
  double positions_per_s() const { return ms > 0 ? positions * 1000.0 / ms : 0; }  // prompt throughput for prefill
  double gflops_per_s() const { return ms > 0 ? static_cast<double>(flops) / (ms * 1e6) : 0; }
  double gb_per_s() const { return ms > 0 ? static_cast<double>(read_bytes) / (ms * 1e6) : 0; }
  double mean_read_bytes() const { return records ? static_cast<double>(read_bytes) / records : 0; }
};

struct PhaseReport {
  bool has_prefill = false;
  double ttft_ms = 0;  // time to first token: the prefill forward + its sampling
  int prompt_tokens = 0;
  PhaseStats prefill;   // record 0
  PhaseStats decode;    // KV CACHE steps that computed one position on the cache
  PhaseStats refill;    // KV CACHE steps that rebuilt the cache after NO CACHE (reported apart)
  PhaseStats no_cache;  // NO CACHE steps (every position recomputed; reported apart)
  PhaseStats all;       // every record
};

// Classifies and sums `records` (a generation in order; records without
// detail count the same: only counters are read).
PhaseReport measure_phases(const std::vector<RecordPtr>& records);
// Same over records [0, count) (the timeline's step).
PhaseReport measure_phases(const std::vector<RecordPtr>& records, size_t count);

// The contrast between prefill and decode in words, from the report's
// numbers; empty until there is a prefill and a KV CACHE decode step. When
// the prompt was too short for prefill to reach a higher FLOP rate than
// decode, it says so instead of claiming the usual contrast.
std::string phases_summary(const PhaseReport& rep);

// One-line explanations for the panel's hover text.
extern const char* const kPrefillExplain;
extern const char* const kDecodeExplain;
extern const char* const kRefillExplain;
extern const char* const kNoCacheExplain;

}  // namespace kvscope
