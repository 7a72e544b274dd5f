// A production trace replayed as serving requests: Mooncake's released traces
// (FAST25-release/traces/*.jsonl), one request a line:
//   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
// timestamp in ms, lengths in tokens, and one remapped hash per `trace_block`
// (512) prompt tokens, equal hashes at the start of two prompts meaning equal
// token prefixes. Each hash becomes `block` synthetic token ids drawn from the
// hash alone, so two requests share exactly the prefix blocks their hashes
// share: the pool's prefix cache sees the trace's real sharing and its real
// arrival pattern, on the small engine. Lengths scale by block / trace_block;
// a prompt longer than the context is cut to it (a prefix stays a prefix).
#pragma once

#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/serving/server.h"

namespace kvscope {

struct TraceOptions {
  int block = 16;             // the pool's positions per block: one trace hash becomes this many tokens
  int trace_block = 512;      // the trace's tokens per hash (Mooncake: 512)
  double ms_per_step = 1000;  // trace milliseconds per engine step (arrivals)
  int limit = 0;              // the first N requests (0: all)
  int pool_blocks = 0;        // the pool a request must fit
};

struct TraceRequests {
  std::vector<ServeRequest> requests;  // ids "1", "2", ... (the line number)
  int truncated = 0;                   // prompts cut to the context
  // Over the replayed prompts' full blocks: how many, and how many a cache
  // that never evicts would hit (a block whose hash an earlier request had,
  // in an unbroken run from the prompt's start): the trace's own sharing.
  long long full_blocks = 0, shared_blocks = 0;
};

// Throws UsageError "FILE:LINE: ..." naming the field (bad JSON, a missing or
// ill-typed field, a negative length, timestamps going back, an empty
// hash_ids, a request that could never fit the pool) or when no line is read.
TraceRequests parse_trace(const std::string& text, const std::string& file, const Model& model, const TraceOptions& o);
TraceRequests read_trace(const std::string& path, const Model& model, const TraceOptions& o);

// The synthetic token at position `i` of the block for trace hash `hash`: a
// function of the two alone, in [0, vocab).
int trace_token(uint64_t hash, int i, int vocab);

}  // namespace kvscope
