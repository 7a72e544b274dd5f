// Eviction by attention score (TOVA, H2O): each layer's own held positions,
// their slots and scores, and the drop down to the budget after a forward.
// The rest of the cache is in kv_cache.cpp.
#include <algorithm>
#include <numeric>

#include "model/core/error.h"
#include "model/core/index_check.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

const char* to_string(KVEvict e) {
  switch (e) {
    case KVEvict::kNone:
      return "none";
    case KVEvict::kTova:
      return "tova";
    case KVEvict::kH2O:
      return "h2o";
    case KVEvict::kSnapKV:
      return "snapkv";
  }
  return "?";
}

bool parse_kv_evict(const std::string& name, KVEvict* out) {
  for (KVEvict e : {KVEvict::kNone, KVEvict::kTova, KVEvict::kH2O, KVEvict::kSnapKV}) {
    if (name == to_string(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}

const KVCache::LayerHeld& KVCache::layer_held(const Sequence& q, int layer) const {
  KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
  static const LayerHeld kEmpty;
  return q.layers.empty() ? kEmpty : q.layers[static_cast<size_t>(layer)];
}

std::vector<int> KVCache::positions(SeqId s, int layer) const {
  const Sequence& q = seq(s);
  if (!layout_.evicting()) {
    KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
    return positions(s);
  }
  return layer_held(q, layer).pos;
}

std::vector<int> KVCache::positions(SeqId s, int layer, int kv_head) const {
  if (!layout_.per_head()) return positions(s, layer);
  KVSCOPE_CHECK_INDEX("KV cache K/V head", kv_head, layout_.n_kv_head);
  const LayerHeld& h = layer_held(seq(s), layer);
  return h.head_pos.empty() ? std::vector<int>{} : h.head_pos[static_cast<size_t>(kv_head)];
}

std::vector<double> KVCache::scores(SeqId s, int layer) const {
  if (!layout_.evicting()) return {};
  return layer_held(seq(s), layer).score;
}

std::vector<KVDrop> KVCache::dropped(SeqId s, int layer) const {
  if (!layout_.evicting()) return {};
  return layer_held(seq(s), layer).dropped;
}

KVSlot KVCache::slot_of(SeqId s, int layer, int pos) const {
  const Sequence& q = seq(s);
  if (!layout_.evicting()) {
    KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
    return slot_of(s, pos);
  }
  const LayerHeld& h = layer_held(q, layer);
  const auto it = std::lower_bound(h.pos.begin(), h.pos.end(), pos);
  if (it == h.pos.end() || *it != pos) return KVSlot{};
  const int g = h.slot[static_cast<size_t>(it - h.pos.begin())], B = slots_per_block();
  return KVSlot{q.table[static_cast<size_t>(g / B)], g % B};
}

// Every layer takes the lowest slot it has free (a dropped row's slot is
// reused); a slot in a block the sequence does not hold gets a fresh block.
KVSlot KVCache::append_evicting(Sequence& q, int pos) {
  const int B = slots_per_block();
  if (q.layers.empty()) {
    q.layers.resize(static_cast<size_t>(layout_.n_layer));
    if (layout_.per_head())
      for (LayerHeld& h : q.layers) h.head_pos.resize(static_cast<size_t>(layout_.n_kv_head));
  }
  KVSlot first;
  for (size_t l = 0; l < q.layers.size(); ++l) {
    LayerHeld& h = q.layers[l];
    const auto free_it = std::find(h.used.begin(), h.used.end(), uint8_t{0});
    const int g = static_cast<int>(free_it - h.used.begin());
    const size_t bi = static_cast<size_t>(g / B);
    if (q.table.size() <= bi) q.table.resize(bi + 1, -1);
    if (q.table[bi] < 0) q.table[bi] = new_block();
    for (LayerHeld& o : q.layers) o.used.resize(q.table.size() * static_cast<size_t>(B), 0);
    h.used[static_cast<size_t>(g)] = 1;
    h.pos.push_back(pos);
    h.slot.push_back(g);
    h.score.push_back(0.0);
    for (std::vector<int>& hp : h.head_pos) hp.push_back(pos);  // a new row is every head's
    if (l == 0) first = KVSlot{q.table[bi], g % B};
  }
  q.length = pos + 1;
  return first;
}

namespace {

// Runs of `want` (ascending positions <= pos, a subset of h_pos whose rows are
// at h_slot): consecutive positions in consecutive slots of one block share a run.
void runs_of(const std::vector<int>& want, const std::vector<int>& h_pos, const std::vector<int>& h_slot,
             const std::vector<int>& table, int B, int pos, std::vector<KVRun>& out) {
  out.clear();
  size_t j = 0;
  for (size_t i = 0; i < want.size() && want[i] <= pos; ++i) {
    while (h_pos[j] != want[i]) ++j;
    const int g = h_slot[j], b = table[static_cast<size_t>(g / B)];
    if (!out.empty()) {
      KVRun& r = out.back();
      if (r.block == b && r.slot + r.n == g % B && r.first_pos + r.n == want[i]) {
        ++r.n;
        continue;
      }
    }
    out.push_back(KVRun{b, g % B, want[i], 1});
  }
}

}  // namespace

void KVCache::visible(SeqId s, int layer, int pos, std::vector<KVRun>& out) const {
  if (!layout_.evicting()) {
    KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
    return visible(s, pos, out);
  }
  const Sequence& q = seq(s);
  const LayerHeld& h = layer_held(q, layer);
  runs_of(h.pos, h.pos, h.slot, q.table, slots_per_block(), pos, out);
}

void KVCache::visible(SeqId s, int layer, int kv_head, int pos, std::vector<KVRun>& out) const {
  if (!layout_.per_head()) return visible(s, layer, pos, out);
  KVSCOPE_CHECK_INDEX("KV cache K/V head", kv_head, layout_.n_kv_head);
  const Sequence& q = seq(s);
  const LayerHeld& h = layer_held(q, layer);
  if (h.head_pos.empty()) return out.clear();
  runs_of(h.head_pos[static_cast<size_t>(kv_head)], h.pos, h.slot, q.table, slots_per_block(), pos, out);
}

void KVCache::observe(SeqId s, int layer, int n_keys, const double* w) {
  if (!layout_.evicting()) return;
  Sequence& q = seq(s);
  KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
  LayerHeld& h = q.layers[static_cast<size_t>(layer)];
  if (n_keys < 0 || n_keys > static_cast<int>(h.pos.size()))
    throw Error("KV cache: observed " + std::to_string(n_keys) + " keys, the layer holds " +
                std::to_string(h.pos.size()));
  for (int k = 0; k < n_keys; ++k) {
    if (layout_.evict == KVEvict::kTova) {
      h.score[static_cast<size_t>(k)] = w[k];
    } else {
      h.score[static_cast<size_t>(k)] += w[k];
    }
  }
}

namespace {

// Which of a layer's held entries (ascending positions) to keep: TOVA the
// `budget` best scored; H2O the floor(budget / 2) most recent and the best
// scored among the others. Best = higher score, then newer (ties drop the older).
std::vector<uint8_t> keep_mask(KVEvict rule, int budget, const std::vector<int>& pos,
                               const std::vector<double>& score) {
  const int n = static_cast<int>(pos.size());
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  const int recent = rule == KVEvict::kH2O ? budget / 2 : 0;
  for (int i = n - recent; i < n; ++i) keep[static_cast<size_t>(i)] = 1;
  std::vector<int> order(static_cast<size_t>(n - recent));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
    return sa != sb ? sa > sb : pos[static_cast<size_t>(a)] > pos[static_cast<size_t>(b)];
  });
  for (int i = 0; i < budget - recent && i < static_cast<int>(order.size()); ++i)
    keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  return keep;
}

}  // namespace

int KVCache::drop_to_budget(Sequence& q) {
  if (layout_.per_head()) return snap_compress(q);
  int dropped = 0;
  for (LayerHeld& h : q.layers) {
    h.dropped.clear();
    if (static_cast<int>(h.pos.size()) <= layout_.budget) continue;
    dropped += drop_rows(h, keep_mask(layout_.evict, layout_.budget, h.pos, h.score));
  }
  release_empty_blocks(q);
  return dropped;
}

int KVCache::drop_rows(LayerHeld& h, const std::vector<uint8_t>& keep) {
  size_t w = 0;
  for (size_t i = 0; i < h.pos.size(); ++i) {
    if (!keep[i]) {
      h.used[static_cast<size_t>(h.slot[i])] = 0;
      h.dropped.push_back(KVDrop{h.pos[i], h.score[i]});
      continue;
    }
    h.pos[w] = h.pos[i];
    h.slot[w] = h.slot[i];
    h.score[w] = h.score[i];
    ++w;
  }
  const int n = static_cast<int>(h.pos.size() - w);
  h.pos.resize(w);
  h.slot.resize(w);
  h.score.resize(w);
  return n;
}

void KVCache::release_empty_blocks(Sequence& q) {
  // A block no layer holds a row in goes back to the pool (contiguous: the
  // one reservation stays while anything is held).
  const size_t B = static_cast<size_t>(slots_per_block());
  for (size_t i = 0; i < q.table.size(); ++i) {
    if (q.table[i] < 0) continue;
    bool any = false;
    for (const LayerHeld& h : q.layers)
      any = any || std::any_of(h.used.begin() + static_cast<std::ptrdiff_t>(i * B),
                               h.used.begin() + static_cast<std::ptrdiff_t>((i + 1) * B), [](uint8_t u) { return u; });
    if (!any) {
      unref(q.table[i]);
      q.table[i] = -1;
    }
  }
}

}  // namespace kvscope
