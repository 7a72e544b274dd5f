// KV memory at real scale: the cache size of published
// model configurations for a context length and a cache dtype, next to the
// weights, against 24 / 80 GB cards. Pure arithmetic plus a JSON loader for
// assets/kv_configs.json; no GL, no ImGui.
//
// The formula (per token, every layer holds one K and one V row of
// kv_heads * head_dim values, stored as the cache stores them, model/kv/kv_cache.h):
//   bytes/token = 2 * layers * kv_row_bytes(dtype, kv_heads * head_dim)
// i.e. 4 B per value in f32, 2 in f16, 34 per 32 values in q8_0 and 18 per
// 32 in q4_0 (each block of 32 carries its fp16 scale).
// With grouped-query attention (Llama-3, Mistral) kv_heads < query heads, so
// the cache is smaller than the hidden width suggests. A sliding window
// (Mistral-7B v0.1: 4096) caps how many positions are ever held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/config.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

// Bytes per value as stored, for the formula's display: 4, 2, 34/32, 18/32.
double bytes_per_value(KVDtype d);

// One model's attention geometry, as published.
struct KvModelSpec {
  std::string name;
  int layers = 0;
  int query_heads = 0;
  int kv_heads = 0;  // == query_heads for MHA, fewer with GQA
  int head_dim = 0;
  int hidden = 0;          // model width (d_model), for display
  int context = 0;         // max positions the model was trained for
  int sliding_window = 0;  // 0 = none; else the cache never holds more positions
  uint64_t params = 0;     // parameter count (weights-fit check)
  std::string source;      // where the numbers come from (URL)
  std::string note;        // one line shown in the table, may be empty

  bool gqa() const { return kv_heads < query_heads; }
  const char* attention_kind() const { return gqa() ? "GQA" : "MHA"; }
};

// The model loaded in the app: its K/V heads (GPT-2: one per query head;
// Llama-family: grouped-query, fewer), head size and window.
KvModelSpec spec_from_config(const Config& c, const std::string& name, uint64_t params);

// Positions held in the cache at context length `tokens` (the window caps it).
uint64_t cached_positions(const KvModelSpec& m, uint64_t tokens);
// 2 * layers * kv_row_bytes(d, kv_heads * head_dim).
uint64_t kv_bytes_per_token(const KvModelSpec& m, KVDtype d);
// Cache bytes at context length `tokens`.
uint64_t kv_cache_bytes(const KvModelSpec& m, uint64_t tokens, KVDtype d);
// Weights stored in the same format: kv_row_bytes(d, params).
uint64_t weights_bytes(const KvModelSpec& m, KVDtype d);

// Card sizes the panel checks against. GPU memory is binary: a "24 GB" card
// holds 24 GiB, an "80 GB" one 80 GiB.
constexpr uint64_t kGpu24GB = 24ull << 30;
constexpr uint64_t kGpu80GB = 80ull << 30;

struct FitCheck {
  uint64_t cached_positions = 0;
  uint64_t bytes_per_token = 0;
  uint64_t cache_bytes = 0;
  uint64_t weights_bytes = 0;
  uint64_t total_bytes = 0;                           // weights + cache
  bool beyond_context = false;                        // tokens > the model's trained context
  bool cache_fits_24 = false, cache_fits_80 = false;  // the cache alone
  bool total_fits_24 = false, total_fits_80 = false;  // weights + cache
};
// One row of the calculator table: cache and weights both in `dtype`
// (a separate weights dtype can be given).
FitCheck check_fit(const KvModelSpec& m, uint64_t tokens, KVDtype cache_dtype, KVDtype weights_dtype);

// The data file: {"configs": [ {...}, ... ]} (see assets/kv_configs.json).
// Throws kvscope::Error naming the file, the entry and the field.
std::vector<KvModelSpec> load_kv_configs(const std::string& path);
std::vector<KvModelSpec> parse_kv_configs(const std::string& json_text, const std::string& origin);
// $KVSCOPE_KV_CONFIGS, else assets/kv_configs.json found next to the executable (assets.h).
std::string default_kv_configs_path();

}  // namespace kvscope
