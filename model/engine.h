// The GPT-2 forward pass with an optional KV cache. Every FLOP counted here
// is 2 x the multiply-adds of a matrix product that actually ran.
#pragma once

#include <cstdint>
#include <vector>

#include "model.h"

namespace kvscope {

// Resident K/V for every layer and cached position, f32.
struct KVCache {
  int n_layer = 0, n_embd = 0, capacity = 0;
  int n_pos = 0;         // positions held
  std::vector<float> k;  // (layer, capacity, n_embd)
  std::vector<float> v;  // (layer, capacity, n_embd)

  void init(const Config& c);
  void clear() { n_pos = 0; }
  // Keeps the first `n` positions (used when forking a generation).
  void truncate(int n);
  uint64_t bytes() const {
    return 2ull * static_cast<uint64_t>(n_layer) * static_cast<uint64_t>(n_pos) * static_cast<uint64_t>(n_embd) * 4ull;
  }
  float* k_row(int layer, int pos) { return &k[(static_cast<size_t>(layer) * capacity + pos) * n_embd]; }
  float* v_row(int layer, int pos) { return &v[(static_cast<size_t>(layer) * capacity + pos) * n_embd]; }
};

// What one forward pass computed, for positions [first, first + n_new) of a
// sequence of seq_len tokens.
struct ForwardOutput {
  int first = 0, n_new = 0, seq_len = 0;
  std::vector<float> logits;  // (vocab) for the last position; (n_new, vocab) with all_logits
  std::vector<float> attn;    // (layer, head, n_rows, seq_len), rows = query positions
                              // [seq_len - n_rows, seq_len); zero where masked
  int n_rows = 0;             // attention rows kept (1 = newest only, n_new = all)
  std::vector<float> q;       // (layer, n_rows, n_embd) the query rows of those attention rows
  std::vector<float> k, v;    // (layer, n_new, n_embd) the K/V rows computed
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

  // Runs tokens[first .. seq_len) where seq_len = tokens.size(). With a
  // cache, positions [0, first) must already be in it (first == cache.n_pos)
  // and the new K/V are appended; without one, first must be 0 (the whole
  // sequence is computed). `keep_all_rows` keeps every new position's
  // attention row (prefill), else only the newest. `all_logits` runs the LM
  // head on every new position (scoring a text, e.g. validation loss).
  ForwardOutput forward(const std::vector<int>& tokens, int first, KVCache* cache, bool keep_all_rows,
                        bool all_logits = false);

  const Model& model() const { return model_; }

 private:
  const Model& model_;
  Workspace* ws_;
};

// The fixed FLOP convention (README): per layer 24*n*d^2 + 4*d*sum(L_i),
// plus the LM head 2*d*V for the last position.
uint64_t forward_flops(const Config& c, int n_new, int seq_len);

// Bytes a forward must read from memory at least once: every weight matrix at
// the width the engine keeps it (2 bytes per value for F16 checkpoints, else
// 4), the vectors, one embedding row per position (counted once), and the
// K/V of `cached_positions` positions read from the cache (2 * n_layer *
// cached_positions * n_embd * 4). A cached decode step at length T reads
// exactly this with cached_positions = T, each byte once, so bytes / step
// time is the memory traffic it sustained.
uint64_t forward_read_bytes(const Model& m, int cached_positions);

// Threads the engine's matrix products use ($KVSCOPE_THREADS, else the cores).
int engine_threads();

}  // namespace kvscope
