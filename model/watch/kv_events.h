// The KV cache events vLLM (and SGLang's radix cache) publish, decoded from
// one msgpack payload: a batch of BlockStored / BlockRemoved /
// AllBlocksCleared events. The publishers' encoding changed across versions,
// and each layer may be either form:
// - the batch: a positional array [ts, events, data_parallel_rank?] or a map
//   {"ts", "events", "data_parallel_rank"?};
// - an event: a positional array whose first element is the type name
//   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//    lora_id?, medium?, ...] (the oldest BlockStored has a per-block token
//   count list where block_size is), or a map tagged {"type": "BlockStored",
//   "block_hashes": ..., ...}.
// Fields a version added (lora_name, extra_keys, group_idx, ...) are read
// where they matter and otherwise ignored. A block hash is an integer (read
// as unsigned 64-bit; an older signed one as its two's complement) or bytes
// (newer versions: a SHA-256 digest).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

// A block hash, exactly: an integer as its 8 big-endian bytes, bytes as they
// are. `is_int` keeps the form for display (decimal or hex).
struct BlockHash {
  std::string bytes;
  bool is_int = false;
  bool operator==(const BlockHash& o) const { return bytes == o.bytes && is_int == o.is_int; }
  bool operator<(const BlockHash& o) const { return is_int != o.is_int ? is_int : bytes < o.bytes; }
};
// An integer hash: its decimal digits; bytes: lowercase hex.
std::string to_string(const BlockHash& h);

enum class KvEventKind { kStored, kRemoved, kCleared };

struct KvEvent {
  KvEventKind kind = KvEventKind::kStored;
  std::vector<BlockHash> hashes;    // [n_blocks] stored or removed, parent first
  std::optional<BlockHash> parent;  // BlockStored: the block before hashes[0], none for a prompt's first
  std::vector<int64_t> token_ids;   // BlockStored: [n_blocks * block_size] (may be empty)
  int block_size = 0;               // BlockStored: tokens per block (0: not given)
  // Where the blocks are: "GPU" when not given (the versions before offloading
  // published no medium), "CPU", ... with an offloading connector.
  std::string medium = "GPU";
  int64_t group = 0;  // KV cache group (hybrid models); 0 when not given (one group)
};

struct KvEventBatch {
  double ts = 0;  // publisher's wall clock, seconds since the epoch
  std::vector<KvEvent> events;
  int64_t dp_rank = -1;          // data-parallel rank (-1: not given)
  bool batch_is_map = false;     // which encoding this payload used
  bool events_are_maps = false;  // (of its first event; empty batches: false)
};

// Decodes one payload. Throws Error naming the field that could not be read
// ("events[2].block_hashes[0]: expected an integer or bytes, got a string")
// and, for a payload that is not msgpack at all, the byte offset.
KvEventBatch decode_kv_batch(const std::string& payload);

}  // namespace kvscope
