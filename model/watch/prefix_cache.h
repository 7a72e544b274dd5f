// A server's prefix cache as its KV events describe it: the blocks it holds,
// each under its hash, linked to the block before it (its parent), so the
// cached prompts form a tree. Built only from what the events say:
// - a block stored before we attached is not known until an event names it
//   (as the parent of a new block, or removed): it is kept as an *unknown*
//   block, drawn as such, and counted apart;
// - BlockRemoved drops the named blocks (their children stay: a server
//   evicts by its own order, and a child may outlive its parent);
// - AllBlocksCleared (and a server restart) empties everything.
// Blocks are keyed by (medium, KV cache group, hash): a server that offloads
// publishes the same hash for its GPU and CPU copies.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "model/watch/kv_events.h"

namespace kvscope {

struct CachedBlockKey {
  std::string medium;  // KvEvent::medium
  int64_t group = 0;
  BlockHash hash;
  bool operator<(const CachedBlockKey& o) const {
    if (medium != o.medium) return medium < o.medium;
    if (group != o.group) return group < o.group;
    return hash < o.hash;
  }
};

struct CachedBlock {
  std::optional<BlockHash> parent;  // none: a prompt's first block (or unknown)
  bool known = true;                // false: stored before we attached, seen only as a parent
  int tokens = 0;                   // token ids the event carried for this block (0: unknown)
};

// What applying one batch did.
struct ApplyCounts {
  int stored = 0;          // blocks stored (new or re-stored)
  int removed = 0;         // blocks removed that we held (known or unknown)
  int removed_unseen = 0;  // removals of blocks we never saw (stored before the attach)
  int clears = 0;          // AllBlocksCleared events
};

class PrefixCacheState {
 public:
  ApplyCounts apply(const KvEventBatch& batch);
  void clear();  // a server restart

  const std::map<CachedBlockKey, CachedBlock>& blocks() const { return blocks_; }
  int known_count() const { return known_; }                                       // blocks stored since the attach
  int unknown_count() const { return static_cast<int>(blocks_.size()) - known_; }  // from before it
  int root_count() const;                         // blocks whose parent is none or not held
  int leaf_count() const;                         // blocks no held block follows
  int max_depth() const;                          // longest chain of held blocks, in blocks
  int block_size() const { return block_size_; }  // the last BlockStored's (0: none seen)

 private:
  void store(const KvEvent& e, ApplyCounts& c);
  void remove(const KvEvent& e, ApplyCounts& c);

  std::map<CachedBlockKey, CachedBlock> blocks_;
  int known_ = 0;
  int block_size_ = 0;
};

}  // namespace kvscope
