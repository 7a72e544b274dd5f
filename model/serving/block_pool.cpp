#include "model/serving/block_pool.h"

#include <algorithm>

#include "model/core/error.h"

namespace kvscope {

BlockPool::BlockPool(int n_blocks, bool prefix_caching)
    : refs_(static_cast<size_t>(std::max(0, n_blocks)), 0),
      key_of_block_(refs_.size(), kNoKey),
      in_free_(refs_.size()),
      is_free_(refs_.size(), true),
      caching_(prefix_caching) {
  for (int b = 0; b < n_blocks; ++b) in_free_[static_cast<size_t>(b)] = free_.insert(free_.end(), b);
}

int BlockPool::cached_free_count() const {
  int n = 0;
  for (int b : free_) n += cached(b) ? 1 : 0;
  return n;
}

int BlockPool::allocate() {
  if (free_.empty()) return -1;
  const int b = free_.front();
  free_.pop_front();
  const size_t i = static_cast<size_t>(b);
  is_free_[i] = false;
  refs_[i] = 1;
  if (key_of_block_[i] != kNoKey) {
    block_of_key_.erase(key_of_block_[i]);
    key_of_block_[i] = kNoKey;
  }
  return b;
}

int64_t BlockPool::key(int64_t parent, const std::vector<int>& tokens) {
  auto it = keys_.emplace(std::make_pair(parent, tokens), static_cast<int64_t>(keys_.size())).first;
  return it->second;
}

int BlockPool::lookup(int64_t key) const {
  if (!caching_) return -1;
  auto it = block_of_key_.find(key);
  return it == block_of_key_.end() ? -1 : it->second;
}

void BlockPool::ref(int block) {
  const size_t i = static_cast<size_t>(block);
  if (is_free_.at(i)) {
    free_.erase(in_free_[i]);
    is_free_[i] = false;
  }
  ++refs_[i];
}

void BlockPool::release(const std::vector<int>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    const size_t i = static_cast<size_t>(*it);
    if (refs_.at(i) <= 0) throw Error("block pool: release of free block " + std::to_string(*it));
    if (--refs_[i] == 0) {
      is_free_[i] = true;
      in_free_[i] = free_.insert(free_.end(), *it);
    }
  }
}

void BlockPool::set_key(int block, int64_t key) {
  if (!caching_) return;
  const size_t i = static_cast<size_t>(block);
  if (key_of_block_.at(i) != kNoKey || block_of_key_.count(key)) return;
  key_of_block_[i] = key;
  block_of_key_[key] = block;
}

}  // namespace kvscope
