// The engine's private pieces: the batch plan, K/V storage and attention over
// the cache (engine.cpp), and what every family's layer works on (LayerPass,
// used by model/models/). Not part of the library's interface.
#pragma once

#include <cstdint>
#include <vector>

#include "model/core/thread_pool.h"
#include "model/engine/engine.h"
#include "model/engine/kernels.h"

namespace kvscope {

struct Workspace {
  MatrixRM x;        // (n, d) residual stream
  MatrixRM h;        // (n, d) normed input
  MatrixRM qkv;      // fused QKV (GPT-2): (n, 3d)
  MatrixRM q, k, v;  // separate Q, K, V (Llama): (n, H hd), (n, Hkv hd), (n, Hkv hd)
  MatrixRM att;      // (n, H hd) attention output before the output projection
  MatrixRM tmp;      // (n, d) projection output
  MatrixRM fc;       // (n, ff) MLP hidden (SwiGLU: the gate)
  MatrixRM up;       // SwiGLU's up projection: (n, ff)
  ThreadPool pool;
  KVCache scratch;  // NO CACHE: written by one forward, emptied after it
};

namespace detail {

// What each entry of a batch writes and reads in the cache (the same for
// every layer, except under eviction by score: then refilled per layer).
struct BatchPlan {
  std::vector<SeqId> seq;                // (n) entry i's sequence
  std::vector<int> pos;                  // (n) entry i's position
  std::vector<KVSlot> slots;             // (n) where entry i's K/V row goes
  std::vector<std::vector<KVRun>> runs;  // (n) the cache runs entry i attends to
  std::vector<int> n_keys;               // (n) keys entry i attends to
  std::vector<size_t> key_off;           // (n + 1) entry i's keys among all entries' keys
  std::vector<float> weights;            // eviction by score: (head, all keys) this layer's attention weights
  std::vector<size_t> run_off;           // (n + 1) entry i's runs in rows
  std::vector<int> tap_row;              // (n) entry i's row in out.attn, -1 if untapped
  std::vector<KVRowRun> rows;            // every entry's runs as K/V row pointers, refilled per layer
};

// One layer's rows: query row i at q + i q_stride (H heads of hd), K/V rows at k, v + i kv_stride.
struct RowsQKV {
  const float* q;
  size_t q_stride;
  const float* k;
  const float* v;
  size_t kv_stride;
};

// Sizes out's taps, appends every entry's row to the cache, finds what each reads.
BatchPlan plan_batch(const Config& c, const std::vector<BatchEntry>& batch, KVCache& cache, const ForwardTaps& taps,
                     ForwardOutput& out);

// Fills plan's runs, key counts and offsets with what each entry reads at
// layer l (K/V head kv_head's own positions where the layout holds per head).
void plan_runs(const KVCache& cache, BatchPlan& plan, int l, int kv_head = -1);

// Layer l: stores the K/V rows (and taps them), then every query head of
// every entry attends over its visible keys (query head h reads K/V head
// h / (n_head / n_kv_head)); the result is ws.att (n, H hd). flops += 4 hd
// per key per head.
void store_and_attend(const Config& c, Workspace& ws, KVCache& cache, BatchPlan& plan, int l, const RowsQKV& rows,
                      const ForwardTaps& taps, ForwardOutput& out, uint64_t& flops);

// What a family's layer (run_layer, model/models/) works on: the batch and
// its residual stream and scratch (ws), the cache and what each entry reads
// in it, the taps, the FLOP count.
struct LayerPass {
  Workspace& ws;
  KVCache& cache;
  BatchPlan& plan;
  const std::vector<BatchEntry>& batch;
  const ForwardTaps& taps;
  ForwardOutput& out;
  uint64_t& flops;
  // Layer l's attention over the cache from its new rows (store_and_attend): ws.att (n, H hd).
  void attend(const Config& c, int l, const RowsQKV& rows) {
    store_and_attend(c, ws, cache, plan, l, rows, taps, out, flops);
  }
};

}  // namespace detail
}  // namespace kvscope
