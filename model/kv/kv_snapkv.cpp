// SnapKV (Li et al. 2024, "SnapKV: LLM Knows What You are Looking for Before
// Generation"; FasterDecoding/SnapKV's update_kv), per K/V head: the prefill
// runs dense, then each head keeps the prompt positions its group of query
// heads' last W prompt queries looked at most (pooled over neighbours), plus
// the window itself. Decoding then appends with no further eviction.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/core/error.h"
#include "model/core/index_check.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

const char* evict_name(KVEvict e) {
  static const char* const kNames[] = {"none", "TOVA", "H2O", "SnapKV"};
  return kNames[static_cast<int>(e)];
}

const char* to_string(KVPooling p) {
  return p == KVPooling::kMax ? "max" : "avg";
}

bool parse_kv_pooling(const std::string& name, KVPooling* out) {
  for (KVPooling p : {KVPooling::kMax, KVPooling::kAvg}) {
    if (name == to_string(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool KVCache::snap_pending(SeqId s) const {
  return layout_.per_head() && !seq(s).snapped;
}

void KVCache::observe_heads(SeqId s, int layer, int pos, int n_keys, int n_head, const double* w) {
  Sequence& q = seq(s);
  if (!layout_.per_head() || q.snapped || pos < q.length - layout_.snap_window) return;
  KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
  LayerHeld& h = q.layers[static_cast<size_t>(layer)];
  if (n_keys < 0 || n_keys > static_cast<int>(h.pos.size()))
    throw Error("KV cache: observed " + std::to_string(n_keys) + " keys, the layer holds " +
                std::to_string(h.pos.size()));
  const size_t L = static_cast<size_t>(q.length);
  h.win.resize(static_cast<size_t>(n_head) * L, 0.0);
  for (int hq = 0; hq < n_head; ++hq)
    for (int k = 0; k < n_keys; ++k)
      h.win[static_cast<size_t>(hq) * L + static_cast<size_t>(h.pos[static_cast<size_t>(k)])] +=
          w[static_cast<size_t>(hq) * static_cast<size_t>(n_keys) + static_cast<size_t>(k)];
}

namespace {

// x pooled over positions with kernel K, stride 1, padding K / 2: max pooling
// pads with -inf (the window's positions that exist), average pooling counts
// the zero padding (torch's max_pool1d / avg_pool1d, count_include_pad).
std::vector<double> pool1d(const std::vector<double>& x, int K, KVPooling kind) {
  const int n = static_cast<int>(x.size()), r = K / 2;
  std::vector<double> y(x.size());
  for (int j = 0; j < n; ++j) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int i = std::max(0, j - r); i <= std::min(n - 1, j + r); ++i) {
      m = std::max(m, x[static_cast<size_t>(i)]);
      sum += x[static_cast<size_t>(i)];
    }
    y[static_cast<size_t>(j)] = kind == KVPooling::kMax ? m : sum / K;
  }
  return y;
}

// One layer: each K/V head's score of the prompt positions before the window
// (the window's summed weights, pooled per query head, averaged over the
// heads sharing the K/V head), its top N - W of them (ties keep the later
// position) and the window. Returns the (head) rows dropped.
int snap_layer(const KVLayout& lay, int L, const std::vector<double>& win, std::vector<std::vector<int>>& head_pos,
               std::vector<double>& best) {
  const int W = lay.snap_window, M = L - W, H = static_cast<int>(win.size()) / L;
  const int group = H / lay.n_kv_head;
  best.assign(static_cast<size_t>(M), -std::numeric_limits<double>::infinity());
  int dropped = 0;
  for (int g = 0; g < lay.n_kv_head; ++g) {
    std::vector<double> score(static_cast<size_t>(M), 0.0);
    for (int hq = g * group; hq < (g + 1) * group; ++hq) {
      const auto row = win.begin() + static_cast<std::ptrdiff_t>(hq) * L;
      const std::vector<double> pooled = pool1d(std::vector<double>(row, row + M), lay.snap_pool, lay.snap_pooling);
      for (int j = 0; j < M; ++j) score[static_cast<size_t>(j)] += pooled[static_cast<size_t>(j)];
    }
    for (double& v : score) v /= group;
    std::vector<int> order(static_cast<size_t>(M));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
      return sa != sb ? sa > sb : a > b;
    });
    order.resize(static_cast<size_t>(lay.budget - W));
    std::sort(order.begin(), order.end());
    for (int p = M; p < L; ++p) order.push_back(p);
    dropped += L - static_cast<int>(order.size());
    head_pos[static_cast<size_t>(g)] = order;
    for (int j = 0; j < M; ++j)
      best[static_cast<size_t>(j)] = std::max(best[static_cast<size_t>(j)], score[static_cast<size_t>(j)]);
  }
  return dropped;
}

}  // namespace

int KVCache::snap_compress(Sequence& q) {
  if (q.snapped) {
    for (LayerHeld& h : q.layers) h.dropped.clear();
    return 0;
  }
  q.snapped = true;
  const int L = q.length;
  int dropped = 0;
  for (LayerHeld& h : q.layers) {
    h.dropped.clear();
    std::vector<double> win;
    win.swap(h.win);
    if (L <= layout_.budget) continue;  // nothing to compress: every head holds the whole prompt
    if (h.pos.size() != static_cast<size_t>(L) || win.empty())
      throw Error("KV cache: SnapKV compresses after a prefill of every position from 0 (held " +
                  std::to_string(h.pos.size()) + " of " + std::to_string(L) + ")");
    std::vector<double> best;
    dropped += snap_layer(layout_, L, win, h.head_pos, best);
    // The layer keeps a position's row while some head holds it, scored by its best head
    // (the window's positions are kept unscored: 0).
    std::vector<uint8_t> any(static_cast<size_t>(L), 0);
    for (const std::vector<int>& hp : h.head_pos)
      for (int p : hp) any[static_cast<size_t>(p)] = 1;
    for (size_t i = 0; i < h.pos.size(); ++i)
      h.score[i] = h.pos[i] < L - layout_.snap_window ? best[static_cast<size_t>(h.pos[i])] : 0.0;
    drop_rows(h, any);  // (h.pos is 0..L-1 here: `any` is indexed by position and by entry alike)
  }
  release_empty_blocks(q);
  return dropped;
}

}  // namespace kvscope
