// The KV layout: one type from the CLI's flags to the window (KVLayout), the
// row formats it names, its ranges without a model and on one, and the page
// arithmetic. The cache that is built with it is kv_cache.h; its JSON form is
// kv_layout_json.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/config.h"

namespace kvscope {

enum class KVDtype { kF32, kF16, kQ8_0, kQ4_0 };
// Eviction by attention score: none, TOVA (Oren et al. 2024), H2O (Zhang et al. 2023),
// SnapKV (Li et al. 2024: once, after the prefill, per K/V head; kv_snapkv.cpp).
enum class KVEvict { kNone, kTova, kH2O, kSnapKV };
// SnapKV's pooling of the window's scores over positions.
enum class KVPooling { kMax, kAvg };

const char* to_string(KVEvict e);  // "none" / "tova" / "h2o" / "snapkv"
// Parses one of the names above; false when unknown.
bool parse_kv_evict(const std::string& name, KVEvict* out);
const char* evict_name(KVEvict e);   // for people: "none" / "TOVA" / "H2O" / "SnapKV"
const char* to_string(KVPooling p);  // "max" / "avg"
bool parse_kv_pooling(const std::string& name, KVPooling* out);
// SnapKV's defaults: the paper's LongBench runs use an observation window of
// 32 and a pooling kernel of 7 with max pooling. The window must be shorter
// than the budget N: for N <= 32 the default window is max(1, N / 4).
inline constexpr int kSnapWindowDefault = 32;
inline constexpr int kSnapPoolDefault = 7;
constexpr int snap_default_window(int budget) {
  return budget > kSnapWindowDefault ? kSnapWindowDefault : (budget / 4 > 1 ? budget / 4 : 1);
}

const char* to_string(KVDtype d);  // "f32" / "f16" / "q8_0" / "q4_0"
// Parses one of the names above; false when unknown.
bool parse_kv_dtype(const std::string& name, KVDtype* out);
// Every dtype, in the order above.
const std::vector<KVDtype>& all_kv_dtypes();
// Bytes of n values stored as d: f32 4n, f16 2n, q8_0 34 per block of 32
// values (32 int8 + fp16 scale), q4_0 18 per 32 (16 bytes of nibbles + fp16
// scale), a last partial block counted whole. A cache row's n is a multiple
// of 32 for the block formats.
uint64_t kv_row_bytes(KVDtype d, uint64_t n);

// The KV layout, one type from the CLI's flags to the window: what a user
// chooses (the flags, the Cache panel, settings.json and the page's kv_layout
// command, serve's --kv-dtype/--kv-block) and, once on_model() has put it on a
// model, the shape the cache is built with. Before a model the shape is 0;
// on_model fills it from the config, resolves SnapKV's defaults and bounds the
// window by the model's own. Its JSON form is kv_layout_json.h.
struct KVLayout {
  // The choices.
  KVDtype dtype = KVDtype::kF32;
  int window = 0;                  // 0 = keep every position, else W >= 1
  int sinks = 0;                   // with a window: positions [0, S) are always kept, 0 <= S < W
  int block = 0;                   // 0 = one contiguous reservation per sequence, else paged with B positions per block
  KVEvict evict = KVEvict::kNone;  // eviction by attention score (not with a window)
  int budget = 0;                  // with evict: positions each layer keeps after a forward, N >= 1
  // SnapKV: the observation window W (1 <= W < N), the pooling kernel K (odd)
  // and its kind. Before on_model, 0 = the default (snap_default_window(budget), kSnapPoolDefault).
  int snap_window = 0, snap_pool = 0;
  KVPooling snap_pooling = KVPooling::kMax;
  // The model's shape (0 before on_model).
  int n_layer = 0, n_kv_head = 0, head_dim = 0;
  int n_ctx = 0;  // the last position a sequence may reach is n_ctx - 1
  // With a window: positions held beyond it so that truncate() can roll back
  // up to this many (speculative decoding's rejected drafts). Queries still
  // see only the window; the extra rows are real memory, counted by bytes().
  int rollback = 0;

  // The model's dense f32 cache (GPT-2: as many K/V heads as query heads).
  static KVLayout for_model(const Config& c);
  // These choices on model `c`, validated (throws kvscope::Error; UsageError
  // for a choice the model refuses: a page size past its context, eviction
  // beside its own sliding window).
  KVLayout on_model(const Config& c) const;
  // The checks that need no model (one eviction rule at a time, a budget
  // needs a rule, sinks fewer than the window, ...), for choices made before
  // one loads.
  void check_without_model() const;

  int kv_dim() const { return n_kv_head * head_dim; }  // values per K (or V) row
  bool paged() const { return block > 0; }
  bool windowed() const { return window > 0; }
  bool evicting() const { return evict != KVEvict::kNone; }
  // Each K/V head of a layer holds its own positions (SnapKV).
  bool per_head() const { return evict == KVEvict::kSnapKV; }
  bool is_default() const { return dtype == KVDtype::kF32 && window == 0 && sinks == 0 && block == 0 && !evicting(); }
  uint64_t row_bytes() const { return kv_row_bytes(dtype, kv_dim()); }
  // K and V of one position across every layer.
  uint64_t bytes_per_position() const { return 2ull * static_cast<uint64_t>(n_layer) * row_bytes(); }
  // Positions a query at `pos` attends to.
  int visible_count(int pos) const;
  // Throws kvscope::Error naming the setting and the accepted range.
  void validate() const;
  void validate_snap() const;    // SnapKV's window and kernel (validate() calls it)
  std::string describe() const;  // e.g. "q8_0, window 64 + 4 sinks, paged B=16"
  bool operator==(const KVLayout& o) const;
  bool operator!=(const KVLayout& o) const { return !(*this == o); }
};

// The page size paged consumers use when none is asked for (serving, beam search).
inline constexpr int kDefaultKvBlock = 16;
// The largest page size: the model's context as loaded, or without a model
// (flags parsed before it loads, the window's settings) this bound.
inline constexpr int kKvBlockMaxNoModel = 1 << 20;
constexpr int kv_block_max(const Config* c) {
  return c ? c->n_positions : kKvBlockMaxNoModel;
}
// That range as --help states it before a model is loaded.
inline constexpr const char* kKvBlockRangeText = "1..the model's context";
// The one block ceiling: the pages of B positions that `positions` positions fill.
constexpr int kv_pages(int positions, int block) {
  return (positions + block - 1) / block;
}
// A layout that pages by `block` and keeps everything else dense f32 (serving's cache, before --kv-dtype).
inline KVLayout paged_layout(int block) {
  KVLayout l;
  l.block = block;
  return l;
}

// The largest window (and sinks, and eviction budget) before a model is loaded;
// on one, its context.
inline constexpr int kKvWindowMaxNoModel = 1 << 20;

// The ranges of a layout's choices on model `c` (null: before one loads): a
// window of 1..window_max positions (0 = none), sinks 0..sinks_max for the
// window `k.window` (fitted to window_max first; the model's own window, if
// shorter, bounds them), pages of 1..block_max positions (0 = not paged). The
// CLI's flags, the Cache panel's controls and fit_choices end there.
struct KVLayoutLimits {
  int window_max = 0;
  int sinks_max = 0;
  int block_max = 0;
};
KVLayoutLimits kv_layout_limits(const KVLayout& k, const Config* c);

// The one range of a page size (--kv-block, the Cache panel, beam search):
// 0 (not paged) or 1..kv_block_max(&c). Throws UsageError naming --kv-block
// and the range: a setting, not a runtime fault.
void check_kv_block(int block, const Config& c);

// K/V bytes of one position across all layers for a model, in f32 unless
// another dtype is given (the model card's and the panels' per-token cost).
uint64_t kv_bytes_per_position(const Config& c, KVDtype d = KVDtype::kF32);

}  // namespace kvscope
