// What one forward of a generation leaves behind: an immutable StepRecord,
// made of four parts that readers can take on their own (a counter or cost
// helper takes StepCounters, the cache picture StepCache, the attention
// views StepForward):
//   StepForward   what the forward computed: positions, attention, Q/K/V rows
//   StepChoice    the token it chose and the distribution it drew from
//   StepCache     the KV cache after it: layout, held positions, pages, evictions
//   StepCounters  FLOPs, bytes and time, from what ran
// StepRecord derives from all four, so `rec.token` and `rec.kv_held` read as
// before. Held positions are intervals (PositionRuns) and pages runs
// (PageRun): a dense cache holds one run, a window with sinks two, a paged
// cache one per page (seq_len / block of them, which the timeline's budget
// drops last). Only eviction by score keeps per-position lists (StepCache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "model/core/index_check.h"
#include "model/decoding/sampler.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

enum class CacheMode { kKV, kNoCache };
enum class StopReason { kNone, kEos, kMaxNew, kContextFull, kStop };

const char* to_string(CacheMode m);   // "kv_cache" / "no_cache"
const char* to_string(StopReason r);  // "" / "eos" / "max_new" / "context_full" / "stop"

// A set of positions as sorted, disjoint, non-adjacent runs [first, first + n)
// (each n >= 1). Iterating it yields the positions, ascending.
class PositionRuns {
 public:
  struct Run {
    int first = 0, n = 0;
    bool operator==(const Run& o) const { return first == o.first && n == o.n; }
  };

  PositionRuns() = default;
  // From ascending, distinct positions; throws kvscope::Error otherwise.
  static PositionRuns from_sorted(const std::vector<int>& ascending);

  // Adds `pos`, which must be greater than every position held (throws
  // kvscope::Error otherwise): extends the last run or opens a new one.
  void push_back(int pos);
  void clear() {
    runs_.clear();
    count_ = 0;
  }

  bool contains(int pos) const;  // O(log runs)
  int count() const { return count_; }
  bool empty() const { return count_ == 0; }
  const std::vector<Run>& runs() const { return runs_; }
  std::vector<int> positions() const;  // expanded, ascending
  bool operator==(const PositionRuns& o) const { return runs_ == o.runs_; }
  bool operator!=(const PositionRuns& o) const { return !(*this == o); }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;
    const_iterator() = default;
    const_iterator(const std::vector<Run>* runs, size_t run) : runs_(runs), run_(run) {}
    int operator*() const { return (*runs_)[run_].first + off_; }
    const_iterator& operator++() {
      if (++off_ == (*runs_)[run_].n) {
        ++run_;
        off_ = 0;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++*this;
      return was;
    }
    bool operator==(const const_iterator& o) const { return run_ == o.run_ && off_ == o.off_; }
    bool operator!=(const const_iterator& o) const { return !(*this == o); }

   private:
    const std::vector<Run>* runs_ = nullptr;
    size_t run_ = 0;
    int off_ = 0;
  };
  const_iterator begin() const { return const_iterator(&runs_, 0); }
  const_iterator end() const { return const_iterator(&runs_, runs_.size()); }

 private:
  void push_run(int first, int n);  // positions [first, first + n), checked as push_back's

  std::vector<Run> runs_;
  int count_ = 0;
};

// Paged: held positions [pos, pos + n), consecutive and in one page (pool
// block), and how many sequences reference that page (> 1: shared).
struct PageRun {
  int pos = 0, n = 0;
  int block = 0, refs = 0;
  bool operator==(const PageRun& o) const { return pos == o.pos && n == o.n && block == o.block && refs == o.refs; }
};

// The forward: which positions it computed, the model's attention shape, and
// the attention, query and new K/V rows it produced.
struct StepForward {
  int index = 0;         // 0 = the prefill, then 1, 2, ...
  bool prefill = false;  // the forward over the whole prompt
  bool refill = false;   // a KV CACHE forward that had to rebuild the cache (after NO CACHE)
  CacheMode mode = CacheMode::kKV;

  // The forward computed positions [first, first + n_new) of a sequence of
  // seq_len tokens (prefill: first = 0, n_new = seq_len = prompt length).
  int first = 0, n_new = 0, seq_len = 0;
  int n_prompt = 0;

  std::vector<int> prompt_tokens;          // prefill only
  std::vector<std::string> prompt_pieces;  // prefill only, display-safe

  // Attention of the query rows [seq_len - n_rows, seq_len) over keys
  // [0, seq_len), every layer and head (prefill: every prompt row).
  int n_layer = 0, n_head = 0, n_embd = 0;
  int n_kv_head = 0, head_dim = 0;  // K/V heads (grouped-query: fewer than n_head) and their width
  int n_rows = 0;
  std::vector<float> attn;  // (layer, head, n_rows, seq_len)
  // Query rows of the attention rows above (the Q in Q.K^T).
  std::vector<float> q;  // (layer, n_rows, n_head * head_dim)

  // K and V rows of positions that are new to the sequence, [seq_len - n_kv, seq_len),
  // as computed (before the cache quantizes them; K after RoPE for Llama-family models).
  int n_kv = 0;
  std::vector<float> k, v;  // (layer, n_kv, n_kv_head * head_dim); GPT-2: n_embd wide

  float attention(int layer, int head, int row, int key) const {
    KVSCOPE_CHECK_INDEX("attention layer", layer, n_layer);
    KVSCOPE_CHECK_INDEX("attention head", head, n_head);
    KVSCOPE_CHECK_INDEX("attention row", row, n_rows);
    KVSCOPE_CHECK_INDEX("attention key", key, seq_len);
    return attn[((static_cast<size_t>(layer) * n_head + head) * n_rows + row) * seq_len + key];
  }
  // The K/V head query head `head` reads (grouped-query: n_head / n_kv_head share one).
  int kv_head_of(int head) const {
    KVSCOPE_CHECK_INDEX("query head", head, n_head);
    return head / (n_head / n_kv_head);
  }
  // Head `head`'s slice of query row `row` at `layer` (head_dim floats).
  const float* q_row(int layer, int row, int head) const {
    KVSCOPE_CHECK_INDEX("query layer", layer, n_layer);
    KVSCOPE_CHECK_INDEX("query row", row, n_rows);
    KVSCOPE_CHECK_INDEX("query head", head, n_head);
    const size_t at = ((static_cast<size_t>(layer) * n_rows + row) * n_head + head) * head_dim;
    KVSCOPE_CHECK_INDEX("query row end", at + head_dim - 1, q.size());
    return q.data() + at;
  }
  // K/V head `kv_head`'s slice of new row `i` (position seq_len - n_kv + i) at `layer` (head_dim floats).
  const float* k_row(int layer, int i, int kv_head) const { return kv_row(k, "K", layer, i, kv_head); }
  const float* v_row(int layer, int i, int kv_head) const { return kv_row(v, "V", layer, i, kv_head); }

 private:
  const float* kv_row(const std::vector<float>& rows, const char* what, int layer, int i, int kv_head) const {
    (void)what;  // (only the checks name it)
    KVSCOPE_CHECK_INDEX(what, layer, n_layer);
    KVSCOPE_CHECK_INDEX(what, i, n_kv);
    KVSCOPE_CHECK_INDEX(what, kv_head, n_kv_head);
    const size_t at = ((static_cast<size_t>(layer) * n_kv + i) * n_kv_head + kv_head) * head_dim;
    KVSCOPE_CHECK_INDEX(what, at + head_dim - 1, rows.size());
    return rows.data() + at;
  }
};

// The choice: the token this forward chose (it lands at position seq_len) and
// the distribution it was drawn from.
struct StepChoice {
  int token = 0;
  std::string piece;      // display-safe (partial UTF-8 escaped as \xNN)
  std::string raw_piece;  // the token's raw bytes
  float prob = 0;
  std::vector<Candidate> top;           // >= 10 entries, best first
  float draw = -1;                      // uniform draw of the sampler, -1 when greedy
  std::vector<float> logits;            // (vocab) raw logits of the last position, before the sampler
  SamplerSettings sampler;              // the settings the token was drawn with
  StopReason stop = StopReason::kNone;  // set on the last record
};

// The cache after this forward (KV CACHE; NO CACHE keeps nothing: all 0 / empty).
// It may also hold other branches of this generation (Generator::fork keeps
// them, sharing their common prefix); kv_bytes (StepCounters) counts every row once.
struct StepCache {
  KVLayout kv_layout;              // the layout the forward ran with (also in NO CACHE)
  int kv_sequences = 0;            // sequences in the cache: this branch + the branches kept beside it
  int kv_rows = 0;                 // distinct rows held over every sequence (a shared row once)
  uint64_t kv_bytes_separate = 0;  // what the sequences would hold as separate caches (KVCache::bytes_alone)
  int kv_positions = 0;            // positions held
  int evicted = 0;                 // positions this forward's window evicted
  // The positions held (eviction by score: by any layer), as runs: one for a
  // dense cache, two for a window with sinks.
  PositionRuns kv_held;
  // Eviction by score: (layer) the positions each layer holds, ascending
  // (kv_held is their union), and (layer, held) the score of each, the one
  // the rule ranks by (TOVA: this forward's last query's weight averaged
  // over the query heads; H2O: that weight accumulated over every query so
  // far); and (layer) the positions this forward dropped, with the score that
  // ranked each. Lists, not runs: a score is genuinely per position, and the
  // positions a score rule keeps are scattered. Empty for other layouts.
  std::vector<std::vector<int>> kv_held_by_layer;
  std::vector<std::vector<double>> kv_score_by_layer;
  std::vector<std::vector<KVDrop>> kv_dropped_by_layer;
  // Per K/V head layouts (SnapKV): the positions each head of each layer
  // holds, ascending (kv_held_by_layer is each layer's union). (layer, kv_head, pos)
  std::vector<std::vector<std::vector<int>>> kv_held_by_head;
  int kv_blocks = 0;        // paged: blocks held
  int kv_slots_wasted = 0;  // paged: allocated slots holding nothing
  // Paged: the held positions as runs of one page each, with the page's
  // block and reference count (> 1: shared with a fork, copied on first
  // write); their union is kv_held. Empty when not paged.
  std::vector<PageRun> kv_page_runs;
  // Quantization error of the new rows (StepForward::k, v; dtypes other than
  // f32): the stored row read back (dequantized) minus the row as computed.
  // (layer, n_kv, 4): K max|d|, K rms d, V max|d|, V rms d; -1 where the row
  // was evicted before it could be read back. Empty for f32.
  std::vector<float> kv_qerr;

  // The page run holding `pos`, nullptr when none does (or not paged).
  const PageRun* page_at(int pos) const;
};

// Counters, from what ran.
struct StepCounters {
  uint64_t flops = 0;        // this forward
  uint64_t flops_total = 0;  // every forward of this generation so far
  uint64_t kv_bytes = 0;     // resident cache after this forward (0 in NO CACHE)
  int recomputed = 0;        // positions computed that had been computed before
  uint64_t read_bytes = 0;   // weights + cached K/V this forward had to read (forward_read_bytes)
  double ms = 0;             // wall time of the forward + sampling
  double ms_total = 0;       // this branch's forwards so far, this one included (a fork continues its parent's)
};

struct StepRecord : StepForward, StepChoice, StepCache, StepCounters {};

// Records are shared and never change once a driver hands them out.
using RecordPtr = std::shared_ptr<const StepRecord>;

}  // namespace kvscope
