// Eviction by attention score (TOVA, H2O) as a lesson: what the running rule
// keeps, what it costs and where it fails (a word needed again after a layer
// dropped it), from the step records alone. No GL, no ImGui.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/decoding/generator.h"

namespace kvscope {

// A word seen again at position `again` whose earlier occurrence at `pos`
// some layers had dropped by then: the query at `again` could not attend to
// it in those layers (the copy a repeated name needs).
struct EvictionMiss {
  int pos = 0, again = 0;
  std::string piece;        // display-safe, as the record has it
  std::vector<int> layers;  // the layers that had dropped `pos` when `again` was computed
  std::vector<int> steps;   // (layers) the step whose forward dropped it there
};

struct EvictionLesson {
  bool active = false;  // the shown record's cache evicts by score (KV CACHE)
  KVEvict rule = KVEvict::kNone;
  int budget = 0, n_layer = 0, seq_len = 0;
  std::vector<int> held_per_layer;   // (layer) positions each layer holds after the shown step
  int held_by_all = 0;               // positions every layer holds
  int held_by_some = 0;              // positions at least one layer holds
  uint64_t bytes_held = 0;           // the cache's own count (kv_bytes)
  uint64_t bytes_all = 0;            // every position so far at every layer, same row format and pages
  int rows_dropped = 0;              // rows dropped so far, summed over forwards and layers
  std::vector<EvictionMiss> misses;  // words (3+ letters) seen again after a layer dropped them, newest first
};

// The lesson for records [0, count) (the last one is the step shown).
EvictionLesson eviction_lesson(const std::vector<RecordPtr>& records, size_t count);

// What the rule keeps, in one sentence with the numbers filled in.
std::string eviction_keeps_text(const EvictionLesson& e);
// What it costs: bytes and rows dropped, against holding every position.
std::string eviction_cost_text(const EvictionLesson& e);
// Where it fails: the newest miss, or that none has happened yet.
std::string eviction_fails_text(const EvictionLesson& e);

}  // namespace kvscope
