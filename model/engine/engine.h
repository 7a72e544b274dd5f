// The GPT-2 forward pass with an optional KV cache. Every FLOP counted here
// is 2 x the multiply-adds of a matrix product that actually ran.
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch/model.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

// One new position of one sequence in a batched forward.
struct BatchEntry {
  SeqId seq = 0;
  int pos = 0;  // = the sequence's length, then +1 for its next entry, ...
  int token = 0;
  bool logits = false;  // run the LM head on this position
  bool tap = false;     // copy out its attention row (and query rows when taps.query)
};

// What a forward copies out for the visualiser, besides the logits.
struct ForwardTaps {
  bool attention = true;  // attention rows of the entries with `tap`
  bool kv = true;         // K/V rows of every entry, as computed (before quantization)
  bool query = false;     // query rows of the entries with `tap`
};

// What one forward pass computed. For a single sequence (the convenience
// overload), positions [first, first + n_new) of a sequence of seq_len tokens.
struct ForwardOutput {
  int first = 0, n_new = 0, seq_len = 0;
  std::vector<int> logit_entries;  // batch entries whose logits were computed
  std::vector<float> logits;       // (logit_entries, vocab)
  std::vector<int> tap_entries;    // batch entries whose rows were tapped
  int width = 0;                   // key positions per attention row: the batch's last position + 1
  std::vector<float> attn;         // (layer, head, n_rows, width) rows of tap_entries; zero where not seen
  int n_rows = 0;                  // = tap_entries.size()
  std::vector<float> q;            // (layer, n_rows, n_embd) query rows of tap_entries (taps.query)
  std::vector<float> k, v;         // (layer, n_entries, kv_dim) the K/V rows computed
  int evicted = 0;                 // positions the cache evicted after this forward (window)
  uint64_t flops = 0;
};

// Scratch buffers reused between forwards (no allocation per decode step).
struct Workspace;

class Engine {
 public:
  explicit Engine(const Model& model);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One forward over a batch of new positions, possibly of several
  // sequences of `cache` (see kv_cache.h): every entry attends to its own
  // sequence's positions <= pos as stored, its own row included. Entries of
  // one sequence must continue it in position order.
  ForwardOutput forward(const std::vector<BatchEntry>& batch, KVCache& cache, const ForwardTaps& taps = {});

  // One sequence: runs tokens[first .. seq_len) where seq_len = tokens.size().
  // With a cache, its sequence 0 (added when absent) must hold [0, first);
  // without one, first must be 0 and a scratch cache of `layout` (the
  // model's dense f32 when null) is used and emptied again: NO CACHE.
  // `keep_all_rows` taps every new position's attention row (prefill),
  // else only the newest; `all_logits` runs the LM head on every new position.
  ForwardOutput forward(const std::vector<int>& tokens, int first, KVCache* cache, bool keep_all_rows,
                        bool all_logits = false, const KVLayout* layout = nullptr);

  const Model& model() const { return model_; }

 private:
  const Model& model_;
  Workspace* ws_;
};

// The fixed FLOP convention (docs/counting.md): per layer 24*n*d^2 + 4*d*sum(L_i),
// plus the LM head 2*d*V for the last position.
uint64_t forward_flops(const Config& c, int n_new, int seq_len);

// Bytes a forward must read from memory at least once: every weight matrix at
// the width the products read it (2 bytes per value for F16 and BF16
// checkpoints, else 4; 4 where the WebAssembly build keeps an f32 copy,
// WeightMatrix::product_bytes), the vectors, one embedding row per position (counted once), and
// `cache_read_bytes` of K/V read from the cache (a decode step at length T
// over a cache of layout L: L.bytes_per_position() * L.visible_count(T - 1)).
// A cached decode step reads exactly this, each byte once, so bytes / step
// time is the memory traffic it sustained.
uint64_t forward_read_bytes(const Model& m, uint64_t cache_read_bytes);

// Threads the engine's matrix products use (ThreadPool::default_threads).
int engine_threads();

}  // namespace kvscope
