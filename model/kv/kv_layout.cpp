// The KV memory layout and its row formats (declared in kv_layout.h): names,
// byte counts, the layout a model's config and the user's settings give, and
// its checks. The cache's storage is kv_cache.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "model/core/error.h"
#include "model/kv/kv_layout.h"
#include "model/kv/kv_quant.h"

namespace kvscope {

const char* to_string(KVDtype d) {
  switch (d) {
    case KVDtype::kF32:
      return "f32";
    case KVDtype::kF16:
      return "f16";
    case KVDtype::kQ8_0:
      return "q8_0";
    case KVDtype::kQ4_0:
      return "q4_0";
  }
  return "?";
}

const std::vector<KVDtype>& all_kv_dtypes() {
  static const std::vector<KVDtype> all = {KVDtype::kF32, KVDtype::kF16, KVDtype::kQ8_0, KVDtype::kQ4_0};
  return all;
}

bool parse_kv_dtype(const std::string& name, KVDtype* out) {
  for (KVDtype d : all_kv_dtypes()) {
    if (name == to_string(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

uint64_t kv_row_bytes(KVDtype d, uint64_t v) {
  const uint64_t blocks = (v + kQuantBlock - 1) / kQuantBlock;
  switch (d) {
    case KVDtype::kF32:
      return 4 * v;
    case KVDtype::kF16:
      return 2 * v;
    case KVDtype::kQ8_0:
      return blocks * kQ8_0BlockBytes;
    case KVDtype::kQ4_0:
      return blocks * kQ4_0BlockBytes;
  }
  return 0;
}

uint64_t kv_bytes_per_position(const Config& c, KVDtype d) {
  KVLayout l = KVLayout::for_model(c);
  l.dtype = d;
  return l.bytes_per_position();
}

namespace {

// `l` with the shape of model `c` (its choices as they are).
KVLayout with_shape(KVLayout l, const Config& c) {
  l.n_layer = c.n_layer;
  l.n_kv_head = c.kv_heads();
  l.head_dim = c.head_dim();
  l.n_ctx = c.n_positions;
  return l;
}

// SnapKV's 0s (the defaults) as the values they stand for; without SnapKV its
// settings are not the layout's (a choice kept for when the rule is chosen again).
void resolve_snap(KVLayout& l) {
  if (!l.per_head()) {
    l.snap_window = l.snap_pool = 0;
    l.snap_pooling = KVPooling::kMax;
    return;
  }
  if (l.snap_window == 0) l.snap_window = snap_default_window(l.budget);
  if (l.snap_pool == 0) l.snap_pool = kSnapPoolDefault;
}

}  // namespace

KVLayout KVLayout::for_model(const Config& c) {
  KVLayout l = with_shape(KVLayout(), c);
  l.window = c.sliding_window;  // Mistral's: the model itself attends to the last W positions only
  return l;
}

KVLayoutLimits kv_layout_limits(const KVLayout& k, const Config* c) {
  KVLayoutLimits lim;
  lim.window_max = c ? c->n_positions : kKvWindowMaxNoModel;
  // Sinks sit inside the window the cache keeps (the model's own, if shorter).
  const int window = std::clamp(k.window, 0, lim.window_max);
  const int kept = c && c->sliding_window > 0 && window > 0 ? std::min(window, c->sliding_window) : window;
  lim.sinks_max = std::max(0, kept - 1);
  lim.block_max = kv_block_max(c);
  return lim;
}

void check_kv_block(int block, const Config& c) {
  if (block == 0 || (block >= 1 && block <= kv_block_max(&c))) return;
  throw UsageError("--kv-block: " + std::to_string(block) + " is outside 1.." + std::to_string(kv_block_max(&c)) +
                   " (a block holds 1 up to the model's context of " + std::to_string(c.n_positions) + " positions)");
}

KVLayout KVLayout::on_model(const Config& c) const {
  check_kv_block(block, c);
  if (evicting() && c.sliding_window > 0)  // the user's choice against the model's: a usage error
    throw UsageError(std::string("--kv-evict ") + to_string(evict) + ": this model has its own sliding window (" +
                     "config.json sliding_window = " + std::to_string(c.sliding_window) +
                     "), and one eviction rule applies at a time; drop --kv-evict for this model");
  KVLayout l = with_shape(*this, c);
  resolve_snap(l);
  // A model's own window bounds the user's (a query never sees more than W positions).
  const int own = c.sliding_window;
  l.window = window == 0 ? own : own == 0 ? window : std::min(window, own);
  l.validate();
  return l;
}

void KVLayout::check_without_model() const {
  KVLayout l = *this;
  l.n_layer = l.n_kv_head = l.n_ctx = 1;
  l.head_dim = kQuantBlock;  // (whether a quantized row fits depends on the model)
  l.rollback = 0;
  resolve_snap(l);
  // Sinks without a window wait for the model: its own sliding window may be the window.
  if (l.window == 0 && l.sinks > 0) l.window = l.sinks + 1;
  l.validate();
}

int KVLayout::visible_count(int pos) const {
  // SnapKV compresses the prompt once and then holds every decoded position:
  // at most every position (what it holds depends on the prompt's length).
  if (per_head()) return pos + 1;
  if (evicting()) return std::min(pos + 1, budget + 1);
  if (!windowed()) return pos + 1;
  const int lo = std::max(0, pos - window + 1);
  return (pos - lo + 1) + std::min(sinks, lo);
}

void KVLayout::validate() const {
  if (n_layer < 1 || n_kv_head < 1 || head_dim < 1 || n_ctx < 1) {
    throw Error("KV cache layout: layers, K/V heads, head width and context must be positive (got " +
                std::to_string(n_layer) + ", " + std::to_string(n_kv_head) + ", " + std::to_string(head_dim) + ", " +
                std::to_string(n_ctx) + ")");
  }
  if ((dtype == KVDtype::kQ8_0 || dtype == KVDtype::kQ4_0) && kv_dim() % kQuantBlock != 0) {
    throw Error(std::string("--kv-dtype ") + to_string(dtype) + ": the K/V row has " + std::to_string(kv_dim()) +
                " values, not a multiple of 32 (the quantization block); use f32 or f16 for this model");
  }
  if (window < 0) throw Error("--kv-window: expected 0 (off) or a window of at least 1, got " + std::to_string(window));
  if (sinks < 0) throw Error("--kv-sinks: expected 0 or more, got " + std::to_string(sinks));
  if (sinks > 0 && window == 0) throw Error("--kv-sinks: sinks need a window (--kv-window W, with sinks < W)");
  if (window > 0 && sinks >= window) {
    throw Error("--kv-sinks: expected 0 <= S < W = " + std::to_string(window) + ", got " + std::to_string(sinks));
  }
  if (block < 0) throw Error("--kv-block: expected a block size of at least 1, got " + std::to_string(block));
  if (rollback < 0) throw Error("KV cache layout: rollback must be 0 or more, got " + std::to_string(rollback));
  if (evicting() && budget < 1)
    throw Error("--kv-budget: expected at least 1 position per layer with --kv-evict, got " + std::to_string(budget));
  if (!evicting() && budget != 0) throw Error("--kv-budget: needs --kv-evict tova|h2o|snapkv");
  validate_snap();
  if (evicting() && windowed()) {
    throw Error(std::string("--kv-evict ") + to_string(evict) +
                " and --kv-window: one eviction rule at a time (a window of " + std::to_string(window) +
                " is set, by the flag or the model's sliding_window: drop one of them)");
  }
}

void KVLayout::validate_snap() const {
  if (!per_head()) {
    if (snap_window != 0 || snap_pool != 0) throw Error("--kv-snap-window, --kv-snap-pool: need --kv-evict snapkv");
    return;
  }
  if (snap_window < 1 || snap_window >= budget) {
    throw Error("--kv-snap-window: expected 1 <= W < N = " + std::to_string(budget) + " (the budget), got " +
                std::to_string(snap_window));
  }
  if (snap_pool < 1 || snap_pool % 2 == 0)
    throw Error("--kv-snap-pool: expected an odd kernel K >= 1, got " + std::to_string(snap_pool));
  // A head's row is a slice of the position's row: whole quantization blocks only.
  if ((dtype == KVDtype::kQ8_0 || dtype == KVDtype::kQ4_0) && head_dim % kQuantBlock != 0) {
    throw Error(std::string("--kv-evict snapkv with --kv-dtype ") + to_string(dtype) + ": a head holds " +
                std::to_string(head_dim) + " values, not a multiple of 32 (the quantization block); use f32 or f16");
  }
}

std::string KVLayout::describe() const {
  std::string s = to_string(dtype);
  if (windowed()) {
    s += ", window " + std::to_string(window);
    if (sinks) s += " + " + std::to_string(sinks) + " sinks";
  }
  if (per_head()) {
    s += ", SnapKV budget " + std::to_string(budget) + " window " + std::to_string(snap_window) + " pool " +
         std::to_string(snap_pool) + " " + to_string(snap_pooling);
  } else if (evicting()) {
    s += std::string(", ") + evict_name(evict) + " budget " + std::to_string(budget);
  }
  s += paged() ? ", paged B=" + std::to_string(block) : ", contiguous";
  return s;
}

bool KVLayout::operator==(const KVLayout& o) const {
  return n_layer == o.n_layer && n_kv_head == o.n_kv_head && head_dim == o.head_dim && n_ctx == o.n_ctx &&
         dtype == o.dtype && window == o.window && sinks == o.sinks && block == o.block && rollback == o.rollback &&
         evict == o.evict && budget == o.budget && snap_window == o.snap_window && snap_pool == o.snap_pool &&
         snap_pooling == o.snap_pooling;
}

}  // namespace kvscope
