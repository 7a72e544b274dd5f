// The KV cache: the K and V rows of past positions, for one or more
// sequences, in one of several layouts. The forward pass (engine.h) writes
// and reads it only through this interface, and bytes() is the one place
// the memory it holds is counted.
//
// How to use it
// - Layout (fixed at reset): the model's shape (layers, K/V heads, head
//   width, context), the row dtype (f32, f16, q8_0, q4_0), an optional
//   sliding window W with S sink positions, and an optional page size B.
//   KVLayout::for_model(config) is today's dense f32 cache; a user's choices
//   become a layout by on_model(config).
// - Sequences: add_sequence() gives a SeqId holding no positions. A forward
//   appends positions length(seq), length(seq)+1, ... to it. fork(seq, n)
//   makes a new sequence sharing positions [0, n) of `seq` (by reference:
//   blocks are copied only when either side first writes into a shared one).
//   truncate(seq, n) rolls back to positions [0, n) (speculative decoding,
//   branching); release(seq) frees what only it referenced.
// - Batch: Engine::forward takes (seq, pos, token) entries from any number
//   of sequences; each sequence's entries must continue it in order
//   (pos = length, length+1, ...). Entry i attends to its own sequence's
//   positions <= pos as stored, its own new row included.
// - Window W, sinks S: a query at i sees [max(0, i-W+1), i] and
//   [0, min(S, i+1)). After each forward, what no later query of that
//   sequence can see is evicted (a paged cache returns emptied blocks).
//   Evicted positions are gone: truncate/fork need the positions the next
//   query would see (can_truncate says whether they are still held); a
//   layout's `rollback` R keeps the last W + R positions so that a rollback
//   of up to R positions always can.
// - Quantized rows (q8_0, q4_0: llama.cpp's blocks of 32 values with an
//   fp16 scale) are quantized once when written and dequantized inside the
//   attention kernel; f16 rows are IEEE half.
// - Paged: each sequence has a block table into a shared pool of blocks of
//   B positions with reference counts and a free list; copy-on-write on the
//   first write into a shared block.
// - Eviction by attention score (evict = TOVA or H2O, budget N): each layer
//   keeps its own set of at most N positions (bookkeeping the cache owns:
//   positions(seq, layer), slot_of(seq, layer, pos), visible(seq, layer, ...)).
//   A forward appends its new rows to every layer, its queries attend over
//   the layer's held positions <= pos, the engine reports each query's
//   attention weights averaged over the query heads (observe), and commit()
//   drops every layer down to N: TOVA keeps the N positions the last query
//   weighted most; H2O keeps the floor(N/2) most recent held positions and
//   the rest by weight accumulated over every query so far. Ties drop the
//   older position. A dropped row's slot is reused by a later position of
//   that layer; a page no layer uses any more goes back to the pool. Forks
//   and rollbacks are refused (what a branch would need may be gone).
// - SnapKV (evict = SnapKV, budget N, window W, kernel K): per K/V head. The
//   first forward (the prefill) attends densely; the engine hands the cache
//   each query's weights per query head (observe_heads), and commit() keeps,
//   per K/V head, the N - W prompt positions the last W queries weighted most
//   (pooled, averaged over the head's query heads) plus the window. Later
//   forwards append to every head and drop nothing; attention reads each
//   head's own positions (visible(seq, layer, kv_head, ...)). A layer's row
//   slot lives while some head holds its position.
// Shapes: a row is n_kv_head * head_dim values (all heads of one position);
// query head h reads K/V head h / (n_head / n_kv_head).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/config.h"
#include "model/kv/kv_layout.h"

namespace kvscope {

// A position a layer dropped when evicting by score, and the score that ranked
// it (TOVA: the last query's weight; H2O: the weight accumulated so far).
struct KVDrop {
  int pos = 0;
  double score = 0;
  bool operator==(const KVDrop& o) const { return pos == o.pos && score == o.score; }
};

using SeqId = int;

// Where one position's row lives: a block of the pool and a slot in it.
struct KVSlot {
  int block = -1, slot = -1;
};

// A run of consecutive positions [first_pos, first_pos + n) stored in
// consecutive slots [slot, slot + n) of one block: attention reads it in place.
struct KVRun {
  int block = 0, slot = 0, first_pos = 0, n = 0;
};

// One held row, for the visualiser: its position and the sequences that see it.
struct KVCell {
  int pos = 0, block = 0, slot = 0;
  std::vector<SeqId> seqs;  // more than one where a fork shares it
};

class KVCache {
 public:
  KVCache() = default;
  explicit KVCache(const KVLayout& layout) { reset(layout); }

  // Drops every sequence and adopts `layout` (validated). Pool memory is
  // kept when the layout's block geometry is unchanged.
  void reset(const KVLayout& layout);
  const KVLayout& layout() const { return layout_; }
  bool ready() const { return layout_.n_layer > 0; }

  // --- sequences ---
  SeqId add_sequence();
  // A new sequence holding positions [0, n) of `from`, shared by reference.
  // Throws when `from` no longer holds what a query at n would see.
  SeqId fork(SeqId from, int n);
  bool can_truncate(SeqId seq, int n) const;
  void truncate(SeqId seq, int n);  // keeps [0, n); throws when !can_truncate
  void release(SeqId seq);
  void clear();  // releases every sequence
  bool has_sequence(SeqId seq) const;
  std::vector<SeqId> sequences() const;
  int length(SeqId seq) const;  // the next position to write
  int n_held(SeqId seq) const;  // positions held (after eviction; evicting: by any layer)
  bool holds(SeqId seq, int pos) const;
  std::vector<int> positions(SeqId seq) const;  // held, ascending (evicting: by any layer)
  // The positions `layer` holds, ascending (every layer holds the same
  // unless the layout evicts by score; per K/V head: their union).
  std::vector<int> positions(SeqId seq, int layer) const;
  // The positions K/V head `kv_head` of `layer` holds (the layer's unless per_head()).
  std::vector<int> positions(SeqId seq, int layer, int kv_head) const;
  // Evicting: the score each of positions(seq, layer) was last ranked by or
  // will be (TOVA: the last query's weight; H2O: accumulated). Else empty.
  std::vector<double> scores(SeqId seq, int layer) const;
  // Evicting: the positions `layer` dropped in the last commit() of `seq`,
  // ascending, each with the score it was ranked by when it was dropped.
  std::vector<KVDrop> dropped(SeqId seq, int layer) const;

  // --- counters: exact, from what is allocated ---
  // K/V payload and scales held: contiguous layouts count the rows holding
  // a live position (a row shared by forks once); paged layouts count every
  // slot of every allocated block, wasted ones included.
  uint64_t bytes() const;
  // What `seq` would hold in a cache of its own, in this layout: its
  // blocks (paged) or its held rows (contiguous). Summed over sequences, the
  // bytes that sharing saves against one cache per sequence.
  uint64_t bytes_alone(SeqId seq) const;
  int blocks_held() const;   // blocks referenced by some sequence
  int slots_used() const;    // distinct rows holding a live position
  int slots_wasted() const;  // paged: allocated slots holding nothing live
  // What one contiguous reservation of the full context per sequence would
  // hold in this dtype (the paged layout's comparison).
  uint64_t contiguous_reservation_bytes() const;
  uint64_t blocks_copied() const { return copies_; }  // copy-on-write copies so far
  std::vector<KVCell> cells() const;                  // every held row, by block then slot
  std::vector<int> block_table(SeqId seq) const;      // paged: block per B positions, -1 = freed
  int block_refs(int block) const;                    // sequences referencing a block of the pool

  // --- blocks held outside any sequence (a serving scheduler's prefix cache) ---
  // A paged pool block stays allocated while retained, whatever sequences
  // reference it; release_block drops one retain (freeing it at no refs).
  void retain_block(int block);
  void release_block(int block);
  // A new sequence whose positions [0, blocks.size() * B) are the rows of
  // these full pool blocks, by reference (paged, no window; throws otherwise).
  SeqId add_sequence_on(const std::vector<int>& blocks);

  // For tests of the paged pool: grows the free list to at least n blocks and
  // shuffles it (rows of one sequence then land in scattered blocks).
  void preallocate_shuffled(int n_blocks, uint32_t seed);

  // --- the forward pass's side (Engine::forward) ---
  // Makes room for `pos` (= length(seq)) and extends the sequence to it:
  // allocates a block or copies a shared one on its first write.
  KVSlot append(SeqId seq, int pos);
  // Stores (quantizes) the K and V rows (kv_dim floats each) of `layer`.
  void write(int layer, KVSlot at, const float* k, const float* v);
  // The runs a query of `seq` at `pos` reads, in position order.
  void visible(SeqId seq, int pos, std::vector<KVRun>& out) const;
  // The same for one layer (evicting layouts: that layer's held positions <= pos).
  void visible(SeqId seq, int layer, int pos, std::vector<KVRun>& out) const;
  // The same for one K/V head of a layer (per_head(): what that head holds).
  void visible(SeqId seq, int layer, int kv_head, int pos, std::vector<KVRun>& out) const;
  // SnapKV: whether `seq` is still in its prefill (its first forward), whose
  // last W queries' weights decide what each head keeps.
  bool snap_pending(SeqId seq) const;
  // SnapKV, in the prefill: the query at `pos` attended to the layer's first
  // n_keys held positions with weights w, (n_head, n_keys), per query head.
  // Only the last W queries of the prefill count.
  void observe_heads(SeqId seq, int layer, int pos, int n_keys, int n_head, const double* w);
  // Evicting: a query of `seq` attended to the first n_keys of the layer's
  // held positions (its visible runs) with weights w, averaged over the
  // query heads. TOVA keeps the weights of the latest query, H2O adds them.
  void observe(SeqId seq, int layer, int n_keys, const double* w);
  // Ends a forward for `seq`: evicts what no later query can see (window),
  // or drops every layer down to the budget (score). Returns the number of
  // positions evicted (evicting by score: rows dropped, summed over layers).
  int commit(SeqId seq);
  const uint8_t* k_rows(int block, int layer) const { return rows(block, layer, 0); }
  const uint8_t* v_rows(int block, int layer) const { return rows(block, layer, 1); }
  // One stored row dequantized to f32 (for tests and the error-on-hover view).
  void read_row(int layer, KVSlot at, bool v, float* out) const;
  KVSlot slot_of(SeqId seq, int pos) const;             // {-1, -1} when not held (evicting: layer 0's slot)
  KVSlot slot_of(SeqId seq, int layer, int pos) const;  // where `layer` holds pos; {-1, -1} when not held

 private:
  // The pool's memory: slabs of blocks_per_slab() blocks each, laid out
  // (K|V, layer, block, slot, row_bytes), so that one layer's K (or V) rows
  // of consecutive blocks are consecutive in memory: a sequence whose blocks
  // were taken in order reads as one dense array, and blocks never sit a
  // whole block's bytes apart (which would map each page of one layer onto
  // the same cache sets). Zero-filled, allocated lazily by the system.
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  struct Slab {
    std::unique_ptr<uint8_t, FreeBytes> data;
    size_t bytes = 0;
    Slab() = default;
    explicit Slab(size_t n);
    Slab(const Slab& o);
    Slab(Slab&&) = default;
    Slab& operator=(const Slab& o);
    Slab& operator=(Slab&&) = default;
  };
  // Calls f(seq, pos, slot, key) for every live sequence's held position, by
  // sequence then position; key = block * slots_per_block() + slot is the
  // same for every sequence sharing that row. Nothing is built: the record's
  // counters walk every held position each step.
  template <typename F>
  void for_each_held_row(F&& f) const {
    const size_t B = static_cast<size_t>(slots_per_block());
    for (size_t si = 0; si < seqs_.size(); ++si) {
      const Sequence& q = seqs_[si];
      if (!q.live) continue;
      for (int p = 0; p < q.length; ++p) {
        if (!held(q, p)) continue;
        const KVSlot at = slot_of(static_cast<SeqId>(si), p);
        f(static_cast<SeqId>(si), p, at, static_cast<size_t>(at.block) * B + static_cast<size_t>(at.slot));
      }
    }
  }
  // Evicting layouts: what one layer of a sequence holds. Slot g of the
  // sequence is slot g % B of block table[g / B].
  struct LayerHeld {
    std::vector<int> pos;         // ascending (per K/V head: the union of the heads')
    std::vector<int> slot;        // (pos) where each row lives
    std::vector<double> score;    // (pos) TOVA: the last query's weight; H2O: accumulated; SnapKV: best head's
    std::vector<uint8_t> used;    // (table.size() * B) 1 where a row of this layer lives
    std::vector<KVDrop> dropped;  // what the last commit dropped, ascending
    // SnapKV only: what each K/V head holds, a subset of pos, and the
    // prefill's window weights summed per query head.
    std::vector<std::vector<int>> head_pos;  // (kv_head, held pos) ascending
    std::vector<double> win;                 // (n_head, prefill length) summed over the window's queries
  };
  struct Sequence {
    bool live = false;
    int length = 0;
    int lo = 0;                     // non-sink positions below lo are evicted
    std::vector<int> table;         // block per `slots_per_block()` positions, -1 = none
    std::vector<LayerHeld> layers;  // (n_layer) evicting layouts only
    bool snapped = false;           // SnapKV: the prefill's compression is done
  };
  int slots_per_block() const { return layout_.paged() ? layout_.block : layout_.n_ctx; }
  // Paged: a full context's blocks per slab; contiguous: one reservation.
  int blocks_per_slab() const { return (layout_.n_ctx + slots_per_block() - 1) / slots_per_block(); }
  void add_slab();
  const uint8_t* rows(int block, int layer, int kv) const;
  uint8_t* rows(int block, int layer, int kv);
  const Sequence& seq(SeqId s) const;
  Sequence& seq(SeqId s);
  int new_block();
  void unref(int block);
  bool held(const Sequence& s, int pos) const;
  void free_evicted_blocks(Sequence& s);
  // Evicting layouts (kv_evict.cpp).
  KVSlot append_evicting(Sequence& s, int pos);
  int drop_to_budget(Sequence& s);
  // Drops the entries of `h` whose keep is 0 (freeing their slots, noting them in
  // h.dropped with their score); returns how many.
  int drop_rows(LayerHeld& h, const std::vector<uint8_t>& keep);
  int snap_compress(Sequence& s);          // kv_snapkv.cpp
  void release_empty_blocks(Sequence& s);  // a block no layer holds a row in goes back to the pool
  const LayerHeld& layer_held(const Sequence& s, int layer) const;

  KVLayout layout_;
  std::vector<Slab> slabs_;
  std::vector<int> refs_;  // (block) sequences referencing each block of the pool
  std::vector<int> free_;  // pool indices, taken from the back
  std::vector<Sequence> seqs_;
  uint64_t copies_ = 0;
};

}  // namespace kvscope
