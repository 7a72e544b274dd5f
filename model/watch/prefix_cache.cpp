#include "model/watch/prefix_cache.h"

#include <algorithm>
#include <set>
#include <vector>

namespace kvscope {

void PrefixCacheState::clear() {
  blocks_.clear();
  known_ = 0;
}

void PrefixCacheState::store(const KvEvent& e, ApplyCounts& c) {
  if (e.block_size > 0) block_size_ = e.block_size;
  for (size_t i = 0; i < e.hashes.size(); ++i) {
    const std::optional<BlockHash> parent = i == 0 ? e.parent : std::optional<BlockHash>(e.hashes[i - 1]);
    if (parent) {
      // A parent we never saw was stored before the attach (or in a lost batch).
      const CachedBlockKey pk{e.medium, e.group, *parent};
      if (!blocks_.count(pk)) blocks_[pk].known = false;
    }
    auto [it, fresh] = blocks_.try_emplace(CachedBlockKey{e.medium, e.group, e.hashes[i]});
    if (fresh || !it->second.known) ++known_;
    CachedBlock& b = it->second;
    b.known = true;
    b.parent = parent;
    if (e.block_size > 0) {
      const size_t from = i * static_cast<size_t>(e.block_size);
      b.tokens = from < e.token_ids.size()
                     ? static_cast<int>(std::min(e.token_ids.size() - from, static_cast<size_t>(e.block_size)))
                     : 0;
    }
    ++c.stored;
  }
}

void PrefixCacheState::remove(const KvEvent& e, ApplyCounts& c) {
  for (const BlockHash& h : e.hashes) {
    auto it = blocks_.find(CachedBlockKey{e.medium, e.group, h});
    if (it == blocks_.end()) {
      ++c.removed_unseen;
      continue;
    }
    if (it->second.known) --known_;
    blocks_.erase(it);
    ++c.removed;
  }
}

ApplyCounts PrefixCacheState::apply(const KvEventBatch& batch) {
  ApplyCounts c;
  for (const KvEvent& e : batch.events) {
    switch (e.kind) {
      case KvEventKind::kStored:
        store(e, c);
        break;
      case KvEventKind::kRemoved:
        remove(e, c);
        break;
      case KvEventKind::kCleared:
        clear();
        ++c.clears;
        break;
    }
  }
  return c;
}

namespace {
bool parent_held(const std::map<CachedBlockKey, CachedBlock>& blocks, const CachedBlockKey& k, const CachedBlock& b) {
  return b.parent && blocks.count(CachedBlockKey{k.medium, k.group, *b.parent});
}
}  // namespace

int PrefixCacheState::root_count() const {
  int n = 0;
  for (const auto& [k, b] : blocks_) n += parent_held(blocks_, k, b) ? 0 : 1;
  return n;
}

int PrefixCacheState::leaf_count() const {
  std::set<CachedBlockKey> parents;
  for (const auto& [k, b] : blocks_)
    if (parent_held(blocks_, k, b)) parents.insert(CachedBlockKey{k.medium, k.group, *b.parent});
  return static_cast<int>(blocks_.size() - parents.size());
}

int PrefixCacheState::max_depth() const {
  // Depth by walking parents, memoised; a cycle (hash collisions a server
  // would not produce) is cut by the walk's length bound.
  std::map<CachedBlockKey, int> depth;
  int best = 0;
  for (const auto& entry : blocks_) {
    std::vector<CachedBlockKey> chain;
    CachedBlockKey k = entry.first;
    int base = 0;
    while (chain.size() <= blocks_.size()) {
      if (auto d = depth.find(k); d != depth.end()) {
        base = d->second;
        break;
      }
      chain.push_back(k);
      const CachedBlock& b = blocks_.at(k);
      if (!parent_held(blocks_, k, b)) break;
      k = CachedBlockKey{k.medium, k.group, *b.parent};
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) depth[*it] = ++base;
    best = std::max(best, base);
  }
  return best;
}

}  // namespace kvscope
