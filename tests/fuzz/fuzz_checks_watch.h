// The watch fuzz target's check (fuzz_watch.cpp, tests/test_fuzz_regressions.cpp):
// any bytes as what a server sends `kvscope watch` — a KV events payload
// (msgpack), Prometheus text, llama-server's /slots JSON. Each parser accepts
// or throws kvscope::Error; an accepted batch applied to a prefix cache keeps
// the cache's counts consistent with a recount of its blocks.
#pragma once

#include <string>

#include "fuzz_checks.h"
#include "model/watch/kv_events.h"
#include "model/watch/metrics.h"
#include "model/watch/prefix_cache.h"

namespace kvscope::fuzz {

// The cache's own counts against a recount of what it holds.
inline std::string check_cache_counts(const PrefixCacheState& s) {
  int known = 0;
  for (const auto& [k, b] : s.blocks()) {
    known += b.known ? 1 : 0;
    if (k.hash.is_int && k.hash.bytes.size() != 8)
      return "an integer hash of " + std::to_string(k.hash.bytes.size()) + " bytes";
  }
  const int n = static_cast<int>(s.blocks().size());
  if (known != s.known_count())
    return "known_count " + std::to_string(s.known_count()) + ", recount " + std::to_string(known);
  if (s.unknown_count() != n - known) return "unknown_count disagrees with the blocks held";
  if (s.root_count() < (n > 0 ? 1 : 0) || s.root_count() > n) return "roots outside 1..blocks";
  if (s.leaf_count() < (n > 0 ? 1 : 0) || s.leaf_count() > n) return "leaves outside 1..blocks";
  if (s.max_depth() > n) return "depth beyond the blocks held";
  return "";
}

inline std::string check_watch(const std::string& in) {
  try {
    const KvEventBatch b = decode_kv_batch(in);
    PrefixCacheState s;
    for (int round = 0; round < 2; ++round) {  // twice: re-stores and removals of held blocks
      const ApplyCounts c = s.apply(b);
      if (c.stored < 0 || c.removed < 0 || c.removed_unseen < 0) return "negative counts";
      if (std::string e = check_cache_counts(s); !e.empty()) return e;
    }
  } catch (const Error&) {
  }
  try {
    const std::vector<PromSample> samples = parse_prometheus(in);
    for (const PromSample& p : samples)
      if (p.name.empty()) return "a sample without a name";
    vllm_metrics(samples);
    llama_metrics(samples);
  } catch (const Error&) {
  }
  try {
    parse_llama_slots(in);
  } catch (const Error&) {
  }
  return "";
}

}  // namespace kvscope::fuzz
