#include "model/kv/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "model/core/error.h"
#include "model/core/index_check.h"
#include "model/kv/kv_quant.h"

namespace kvscope {

// --- pool and sequences -------------------------------------------------------

void KVCache::reset(const KVLayout& layout) {
  layout.validate();
  const bool same_geometry = layout.n_layer == layout_.n_layer && layout.row_bytes() == layout_.row_bytes() &&
                             layout.paged() == layout_.paged() && layout.block == layout_.block &&
                             layout.n_ctx == layout_.n_ctx;
  layout_ = layout;
  seqs_.clear();
  copies_ = 0;
  if (!same_geometry) {
    slabs_.clear();
    refs_.clear();
    free_.clear();
  } else {
    free_.clear();
    for (int b = static_cast<int>(refs_.size()) - 1; b >= 0; --b) {
      refs_[static_cast<size_t>(b)] = 0;
      free_.push_back(b);
    }
  }
}

const KVCache::Sequence& KVCache::seq(SeqId s) const {
  if (s < 0 || s >= static_cast<int>(seqs_.size()) || !seqs_[static_cast<size_t>(s)].live)
    throw Error("KV cache: no sequence " + std::to_string(s));
  return seqs_[static_cast<size_t>(s)];
}
KVCache::Sequence& KVCache::seq(SeqId s) {
  return const_cast<Sequence&>(static_cast<const KVCache&>(*this).seq(s));
}

SeqId KVCache::add_sequence() {
  if (!ready()) throw Error("KV cache: no layout (reset it with the model's layout first)");
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].live) {
      seqs_[i] = Sequence();
      seqs_[i].live = true;
      return static_cast<SeqId>(i);
    }
  }
  seqs_.emplace_back();
  seqs_.back().live = true;
  return static_cast<SeqId>(seqs_.size() - 1);
}

bool KVCache::has_sequence(SeqId s) const {
  return s >= 0 && s < static_cast<int>(seqs_.size()) && seqs_[static_cast<size_t>(s)].live;
}

std::vector<SeqId> KVCache::sequences() const {
  std::vector<SeqId> out;
  for (size_t i = 0; i < seqs_.size(); ++i)
    if (seqs_[i].live) out.push_back(static_cast<SeqId>(i));
  return out;
}

int KVCache::length(SeqId s) const {
  return seq(s).length;
}

bool KVCache::held(const Sequence& s, int pos) const {
  if (pos < 0 || pos >= s.length) return false;
  if (layout_.evicting()) {
    for (const LayerHeld& h : s.layers)
      if (std::binary_search(h.pos.begin(), h.pos.end(), pos)) return true;
    return false;
  }
  return pos >= s.lo || (layout_.windowed() && pos < layout_.sinks);
}

bool KVCache::holds(SeqId s, int pos) const {
  return held(seq(s), pos);
}

int KVCache::n_held(SeqId s) const {
  const Sequence& q = seq(s);
  if (layout_.evicting()) return static_cast<int>(positions(s).size());
  const int sink = layout_.windowed() ? std::min(layout_.sinks, std::min(q.lo, q.length)) : 0;
  return sink + std::max(0, q.length - q.lo);
}

std::vector<int> KVCache::positions(SeqId s) const {
  const Sequence& q = seq(s);
  std::vector<int> out;
  for (int p = 0; p < q.length; ++p)
    if (held(q, p)) out.push_back(p);
  return out;
}

void KVCache::FreeBytes::operator()(uint8_t* p) const {
  std::free(p);
}

KVCache::Slab::Slab(size_t n) : data(static_cast<uint8_t*>(std::calloc(n, 1))), bytes(n) {
  if (!data) throw Error("KV cache: cannot allocate " + std::to_string(n) + " bytes for the block pool");
}
KVCache::Slab::Slab(const Slab& o) : Slab(o.bytes) {
  std::memcpy(data.get(), o.data.get(), bytes);
}
KVCache::Slab& KVCache::Slab::operator=(const Slab& o) {
  if (this != &o) *this = Slab(o);
  return *this;
}

void KVCache::add_slab() {
  const int n = blocks_per_slab(), first = static_cast<int>(refs_.size());
  slabs_.emplace_back(static_cast<size_t>(2 * layout_.n_layer) * n * slots_per_block() * layout_.row_bytes());
  refs_.resize(refs_.size() + static_cast<size_t>(n), 0);
  // Taken from the back: in ascending order, so a growing sequence's blocks follow each other.
  for (int b = first + n - 1; b >= first; --b) free_.push_back(b);
}

int KVCache::new_block() {
  if (free_.empty()) add_slab();
  const int b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KVCache::unref(int b) {
  if (b < 0) return;
  if (--refs_[static_cast<size_t>(b)] == 0) free_.push_back(b);
}

void KVCache::preallocate_shuffled(int n_blocks, uint32_t seed) {
  while (static_cast<int>(refs_.size()) < n_blocks) add_slab();
  std::mt19937 rng(seed);
  std::shuffle(free_.begin(), free_.end(), rng);
}

bool KVCache::can_truncate(SeqId s, int n) const {
  const Sequence& q = seq(s);
  if (n < 0 || n > q.length) return false;
  if (layout_.evicting()) return n == q.length;  // what a rollback needs may be evicted
  if (!layout_.windowed()) return true;
  // A query at n sees [n - W + 1, n - 1] (and sinks): those must still be held.
  const int need_lo = std::max(0, n - layout_.window + 1);
  return q.lo <= std::max(need_lo, std::min(layout_.sinks, n));
}

void KVCache::truncate(SeqId s, int n) {
  if (!can_truncate(s, n)) {
    throw Error("KV cache: cannot roll sequence " + std::to_string(s) + " back to " + std::to_string(n) +
                " positions (it holds " + std::to_string(length(s)) +
                "; a window may have evicted what the next query would need)");
  }
  Sequence& q = seq(s);
  q.length = n;
  if (q.lo > n) q.lo = n;
  // Blocks past the new end go back to the pool.
  const int B = slots_per_block();
  const size_t keep = static_cast<size_t>(kv_pages(n, B));
  for (size_t i = keep; i < q.table.size(); ++i) unref(q.table[i]);
  if (q.table.size() > keep) q.table.resize(keep);
}

SeqId KVCache::fork(SeqId from, int n) {
  if (layout_.evicting()) {
    throw Error(
        "KV cache: cannot fork a sequence under --kv-evict (each layer has dropped positions a branch "
        "would need)");
  }
  if (!can_truncate(from, n)) {
    throw Error("KV cache: cannot fork sequence " + std::to_string(from) + " at " + std::to_string(n) +
                " (outside its positions, or evicted by the window)");
  }
  const SeqId id = add_sequence();
  const Sequence& src = seq(from);
  Sequence& dst = seq(id);
  dst.length = n;
  dst.lo = std::min(src.lo, n);
  const int B = slots_per_block();
  const size_t nb = static_cast<size_t>(kv_pages(n, B));
  dst.table.assign(src.table.begin(), src.table.begin() + static_cast<std::ptrdiff_t>(std::min(nb, src.table.size())));
  for (int b : dst.table)
    if (b >= 0) ++refs_[static_cast<size_t>(b)];
  return id;
}

void KVCache::retain_block(int b) {
  KVSCOPE_CHECK_INDEX("KV cache block", b, refs_.size());
  if (refs_[static_cast<size_t>(b)] <= 0) throw Error("KV cache: retain of free block " + std::to_string(b));
  ++refs_[static_cast<size_t>(b)];
}

void KVCache::release_block(int b) {
  KVSCOPE_CHECK_INDEX("KV cache block", b, refs_.size());
  if (refs_[static_cast<size_t>(b)] <= 0) throw Error("KV cache: release of free block " + std::to_string(b));
  unref(b);
}

SeqId KVCache::add_sequence_on(const std::vector<int>& blocks) {
  if (!layout_.paged() || layout_.windowed())
    throw Error("KV cache: a sequence on given blocks needs a paged layout without a window");
  for (int b : blocks) {
    KVSCOPE_CHECK_INDEX("KV cache block", b, refs_.size());
    if (refs_[static_cast<size_t>(b)] <= 0) throw Error("KV cache: sequence on free block " + std::to_string(b));
  }
  const SeqId id = add_sequence();
  Sequence& q = seq(id);
  q.table = blocks;
  q.length = static_cast<int>(blocks.size()) * layout_.block;
  for (int b : blocks) ++refs_[static_cast<size_t>(b)];
  return id;
}

void KVCache::release(SeqId s) {
  Sequence& q = seq(s);
  for (int b : q.table) unref(b);
  q = Sequence();
}

void KVCache::clear() {
  for (SeqId s : sequences()) release(s);
  seqs_.clear();
}

// --- the forward's side ---------------------------------------------------------

const uint8_t* KVCache::rows(int block, int layer, int kv) const {
  KVSCOPE_CHECK_INDEX("KV cache block", block, refs_.size());
  KVSCOPE_CHECK_INDEX("KV cache layer", layer, layout_.n_layer);
  KVSCOPE_CHECK_INDEX("KV cache K|V", kv, 2);
  const size_t per = static_cast<size_t>(slots_per_block()) * layout_.row_bytes();
  const int n = blocks_per_slab();
  const size_t at = (static_cast<size_t>(kv) * layout_.n_layer + layer) * n + static_cast<size_t>(block % n);
  return slabs_[static_cast<size_t>(block / n)].data.get() + at * per;
}
uint8_t* KVCache::rows(int block, int layer, int kv) {
  return const_cast<uint8_t*>(static_cast<const KVCache&>(*this).rows(block, layer, kv));
}

KVSlot KVCache::append(SeqId s, int pos) {
  Sequence& q = seq(s);
  if (pos != q.length) {
    throw Error("KV cache: sequence " + std::to_string(s) + " continues at position " + std::to_string(q.length) +
                ", got " + std::to_string(pos));
  }
  if (pos >= layout_.n_ctx) {
    throw Error("KV cache: position " + std::to_string(pos) + " is past the context of " +
                std::to_string(layout_.n_ctx));
  }
  if (layout_.evicting()) return append_evicting(q, pos);
  const int B = slots_per_block();
  const size_t bi = static_cast<size_t>(pos / B);
  if (q.table.size() <= bi) q.table.resize(bi + 1, -1);
  int& b = q.table[bi];
  if (b < 0) {
    b = new_block();
  } else if (refs_[static_cast<size_t>(b)] > 1) {
    // Copy on first write: the rows before `pos` in this block stay shared in value.
    const int nb = new_block();
    const size_t rb = layout_.row_bytes(), used = static_cast<size_t>(pos % B) * rb;
    for (int kv = 0; kv < 2; ++kv)
      for (int l = 0; l < layout_.n_layer; ++l) std::memcpy(rows(nb, l, kv), rows(b, l, kv), used);
    unref(b);
    b = nb;
    ++copies_;
  }
  q.length = pos + 1;
  return KVSlot{b, pos % B};
}

void KVCache::write(int layer, KVSlot at, const float* k, const float* v) {
  const size_t rb = layout_.row_bytes();
  const int n = layout_.kv_dim();
  KVSCOPE_CHECK_INDEX("KV cache slot", at.slot, slots_per_block());
  for (int kv = 0; kv < 2; ++kv) {
    const float* x = kv ? v : k;
    uint8_t* dst = rows(at.block, layer, kv) + static_cast<size_t>(at.slot) * rb;
    switch (layout_.dtype) {
      case KVDtype::kF32:
        std::memcpy(dst, x, rb);
        break;
      case KVDtype::kF16:
        quantize_row_f16(x, n, reinterpret_cast<uint16_t*>(dst));
        break;
      case KVDtype::kQ8_0:
        quantize_row_q8_0(x, n, dst);
        break;
      case KVDtype::kQ4_0:
        quantize_row_q4_0(x, n, dst);
        break;
    }
  }
}

void KVCache::read_row(int layer, KVSlot at, bool v, float* out) const {
  KVSCOPE_CHECK_INDEX("KV cache slot", at.slot, slots_per_block());
  const uint8_t* src = rows(at.block, layer, v ? 1 : 0) + static_cast<size_t>(at.slot) * layout_.row_bytes();
  const int n = layout_.kv_dim();
  switch (layout_.dtype) {
    case KVDtype::kF32:
      std::memcpy(out, src, layout_.row_bytes());
      break;
    case KVDtype::kF16:
      dequantize_row_f16(reinterpret_cast<const uint16_t*>(src), n, out);
      break;
    case KVDtype::kQ8_0:
      dequantize_row_q8_0(src, n, out);
      break;
    case KVDtype::kQ4_0:
      dequantize_row_q4_0(src, n, out);
      break;
  }
}

KVSlot KVCache::slot_of(SeqId s, int pos) const {
  const Sequence& q = seq(s);
  if (!held(q, pos)) return KVSlot{};
  if (layout_.evicting()) {
    for (int l = 0; l < layout_.n_layer; ++l) {
      const KVSlot at = slot_of(s, l, pos);
      if (at.block >= 0) return at;
    }
  }
  const int B = slots_per_block();
  return KVSlot{q.table[static_cast<size_t>(pos / B)], pos % B};
}

void KVCache::visible(SeqId s, int pos, std::vector<KVRun>& out) const {
  if (layout_.evicting()) return visible(s, 0, pos, out);
  out.clear();
  const Sequence& q = seq(s);
  const int B = slots_per_block();
  auto add = [&](int p0, int p1) {  // positions [p0, p1), split at block edges
    while (p0 < p1) {
      const int end = std::min(p1, (p0 / B + 1) * B);
      out.push_back(KVRun{q.table[static_cast<size_t>(p0 / B)], p0 % B, p0, end - p0});
      p0 = end;
    }
  };
  if (!layout_.windowed()) {
    add(0, pos + 1);
    return;
  }
  const int lo = std::max(0, pos - layout_.window + 1);
  const int sink_end = std::min(layout_.sinks, lo);
  add(0, sink_end);
  add(lo, pos + 1);
}

void KVCache::free_evicted_blocks(Sequence& q) {
  if (!layout_.paged()) return;
  const int B = slots_per_block();
  for (size_t i = 0; i < q.table.size(); ++i) {
    const int b0 = static_cast<int>(i) * B;
    const bool has_sink = b0 < layout_.sinks;
    if (q.table[i] >= 0 && !has_sink && b0 + B <= q.lo) {
      unref(q.table[i]);
      q.table[i] = -1;
    }
  }
}

int KVCache::commit(SeqId s) {
  Sequence& q = seq(s);
  if (layout_.evicting()) {
    return drop_to_budget(q);
  }
  if (!layout_.windowed()) return 0;
  const int new_lo = std::max(q.lo, q.length - layout_.window - layout_.rollback);
  int evicted = 0;
  for (int p = q.lo; p < new_lo; ++p)
    if (p >= layout_.sinks) ++evicted;
  q.lo = new_lo;
  free_evicted_blocks(q);
  return evicted;
}

// --- counters -----------------------------------------------------------------

std::vector<KVCell> KVCache::cells() const {
  std::vector<KVCell> out;
  std::vector<int> owner;  // per key: index into out, -1 none yet
  for_each_held_row([&](SeqId seq, int pos, KVSlot at, size_t key) {
    if (owner.size() <= key) owner.resize(key + 1, -1);
    if (owner[key] < 0) {
      owner[key] = static_cast<int>(out.size());
      out.push_back(KVCell{pos, at.block, at.slot, {}});
    }
    out[static_cast<size_t>(owner[key])].seqs.push_back(seq);
  });
  std::sort(out.begin(), out.end(),
            [](const KVCell& a, const KVCell& b) { return a.block != b.block ? a.block < b.block : a.slot < b.slot; });
  return out;
}

// cells().size() without building the cells: counted once a step for the
// records, over every held position (8192 at a Llama's full context).
int KVCache::slots_used() const {
  std::vector<uint8_t> seen;  // per key
  int n = 0;
  for_each_held_row([&](SeqId, int, KVSlot, size_t key) {
    if (seen.size() <= key) seen.resize(key + 1, 0);
    n += seen[key] == 0;
    seen[key] = 1;
  });
  return n;
}

int KVCache::blocks_held() const {
  int n = 0;
  for (int r : refs_)
    if (r > 0) ++n;
  return n;
}

int KVCache::slots_wasted() const {
  if (!layout_.paged()) return 0;
  return blocks_held() * layout_.block - slots_used();
}

uint64_t KVCache::bytes() const {
  const uint64_t per = layout_.bytes_per_position();
  if (layout_.paged()) return static_cast<uint64_t>(blocks_held()) * static_cast<uint64_t>(layout_.block) * per;
  if (layout_.evicting()) {
    uint64_t b = 0;
    for (SeqId s : sequences()) b += bytes_alone(s);
    return b;
  }
  return static_cast<uint64_t>(slots_used()) * per;
}

uint64_t KVCache::bytes_alone(SeqId s) const {
  const uint64_t per = layout_.bytes_per_position();
  if (!layout_.paged() && layout_.evicting()) {
    // Each layer's K and V rows of the positions it holds; per K/V head, each
    // head's slice of the row (whole quantization blocks: validate() checks).
    uint64_t rows = 0;
    for (const LayerHeld& h : seq(s).layers) rows += h.pos.size();
    if (!layout_.per_head()) return rows * 2 * layout_.row_bytes();
    rows = 0;
    for (const LayerHeld& h : seq(s).layers)
      for (const std::vector<int>& hp : h.head_pos) rows += hp.size();
    return rows * 2 * kv_row_bytes(layout_.dtype, static_cast<uint64_t>(layout_.head_dim));
  }
  if (!layout_.paged()) return static_cast<uint64_t>(n_held(s)) * per;
  const std::vector<int>& table = seq(s).table;
  const auto blocks = std::count_if(table.begin(), table.end(), [](int b) { return b >= 0; });
  return static_cast<uint64_t>(blocks) * static_cast<uint64_t>(layout_.block) * per;
}

uint64_t KVCache::contiguous_reservation_bytes() const {
  return static_cast<uint64_t>(sequences().size()) * static_cast<uint64_t>(layout_.n_ctx) *
         layout_.bytes_per_position();
}

std::vector<int> KVCache::block_table(SeqId s) const {
  return seq(s).table;
}

int KVCache::block_refs(int block) const {
  KVSCOPE_CHECK_INDEX("block", block, static_cast<int>(refs_.size()));
  return refs_[static_cast<size_t>(block)];
}

}  // namespace kvscope
