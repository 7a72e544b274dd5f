// The serving pool's blocks as the scheduler accounts them (no K/V rows
// here: the driver maps them onto KVCache blocks): reference counts, the
// prefix cache's block keys, and the free queue in least-recently-used
// order, as vLLM's automatic prefix caching defines them.
// - A full block's key is (its parent block's key, its token ids), interned
//   exactly (no hash collisions): equal keys = equal token prefixes.
// - A block referenced by several requests (a shared prefix) is freed when
//   the last one lets go; freed blocks join the back of the free queue and
//   keep their key (cached-but-free) until allocate() pops them from the
//   front for new contents, which evicts the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <utility>
#include <vector>

namespace kvscope {

class BlockPool {
 public:
  static constexpr int64_t kNoKey = -1;

  BlockPool(int n_blocks, bool prefix_caching);

  int n_blocks() const { return static_cast<int>(refs_.size()); }
  int free_count() const { return static_cast<int>(free_.size()); }  // cached-but-free included
  int cached_free_count() const;                                     // free blocks still holding a key
  int used_count() const { return n_blocks() - free_count(); }       // referenced by some request
  int refs(int block) const { return refs_.at(static_cast<size_t>(block)); }
  bool cached(int block) const { return key_of_block_.at(static_cast<size_t>(block)) != kNoKey; }

  // The front of the free queue, referenced once; a cached block loses its
  // key. -1 when no block is free.
  int allocate();
  // The key of a full block following `parent` (kNoKey for the first block)
  // holding `tokens`; the same arguments always give the same key.
  int64_t key(int64_t parent, const std::vector<int>& tokens);
  // The block cached under `key`, or -1.
  int lookup(int64_t key) const;
  // One more reference (a prefix hit); a free block leaves the free queue.
  void ref(int block);
  // Drops one reference of each block, the last block first: blocks reaching
  // no reference join the back of the free queue in that order (a request's
  // tail blocks are evicted before its prefix).
  void release(const std::vector<int>& blocks);
  // Caches `block` (full, computed) under `key` unless another block already
  // holds that key (then this one stays uncached, as vLLM does).
  void set_key(int block, int64_t key);

 private:
  std::vector<int> refs_;
  std::vector<int64_t> key_of_block_;  // (block) its key or kNoKey
  std::vector<std::list<int>::iterator> in_free_;
  std::vector<bool> is_free_;
  std::list<int> free_;  // front = least recently freed (taken first)
  std::map<std::pair<int64_t, std::vector<int>>, int64_t> keys_;
  std::map<int64_t, int> block_of_key_;
  bool caching_ = false;
};

}  // namespace kvscope
