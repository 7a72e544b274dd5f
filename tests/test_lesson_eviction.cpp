// The eviction lesson's numbers, worked by hand on records built here: what
// each layer holds, the bytes against every position, the rows dropped, and
// the words seen again after a layer dropped their earlier occurrence.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "app/lessons/eviction.h"

namespace kvscope {
namespace {

RecordPtr record(int index, int seq_len, int first, int n_new, std::vector<std::vector<int>> held, int evicted,
                 int token, const std::string& piece) {
  auto r = std::make_shared<StepRecord>();
  r->index = index;
  r->prefill = index == 0;
  r->seq_len = seq_len;
  r->first = first;
  r->n_new = n_new;
  r->n_layer = 2;
  r->kv_layout.n_layer = 2;
  r->kv_layout.n_kv_head = 1;
  r->kv_layout.head_dim = 4;
  r->kv_layout.n_ctx = 16;
  r->kv_layout.evict = KVEvict::kTova;
  r->kv_layout.budget = 3;
  r->kv_held_by_layer = std::move(held);
  r->evicted = evicted;
  r->kv_bytes = 6 * 2 * 16;  // 3 rows per layer, K and V of 4 f32
  r->token = token;
  r->piece = piece;
  if (r->prefill) {
    r->prompt_tokens = {10, 11, 12, 13};
    r->prompt_pieces = {" Lily", " and", " Tom", " ran"};
  }
  return r;
}

TEST(EvictionLesson, NumbersAndReturnsWorkedByHand) {
  // Prompt " Lily and Tom ran" (4 positions), then " Lily" (4) and " Tom" (5) come back.
  const std::vector<RecordPtr> recs = {
      record(0, 4, 0, 4, {{1, 2, 3}, {0, 2, 3}}, 2, 10, " Lily"),
      record(1, 5, 4, 1, {{2, 3, 4}, {0, 3, 4}}, 2, 12, " Tom"),
      record(2, 6, 5, 1, {{3, 4, 5}, {0, 4, 5}}, 2, 11, " and"),
  };
  const EvictionLesson e = eviction_lesson(recs, recs.size());
  ASSERT_TRUE(e.active);
  EXPECT_EQ(e.held_per_layer, (std::vector<int>{3, 3}));
  EXPECT_EQ(e.held_by_all, 2);   // 4, 5
  EXPECT_EQ(e.held_by_some, 4);  // 0, 3, 4, 5
  EXPECT_EQ(e.rows_dropped, 6);
  EXPECT_EQ(e.bytes_all, 6u * 2 * 2 * 16);  // 6 positions x 2 layers x K and V x 16 bytes
  ASSERT_EQ(e.misses.size(), 2u);
  // Newest first: " Tom" at 5; layer 1 had dropped 2 at step 1 (layer 0 still held it).
  EXPECT_EQ(e.misses[0].piece, " Tom");
  EXPECT_EQ(e.misses[0].pos, 2);
  EXPECT_EQ(e.misses[0].again, 5);
  EXPECT_EQ(e.misses[0].layers, std::vector<int>{1});
  EXPECT_EQ(e.misses[0].steps, std::vector<int>{1});
  // " Lily" at 4: layer 0 had dropped 0 in the prefill.
  EXPECT_EQ(e.misses[1].pos, 0);
  EXPECT_EQ(e.misses[1].again, 4);
  EXPECT_EQ(e.misses[1].layers, std::vector<int>{0});
  EXPECT_EQ(e.misses[1].steps, std::vector<int>{0});
  EXPECT_NE(eviction_fails_text(e).find("\" Tom\" at position 5"), std::string::npos) << eviction_fails_text(e);
  EXPECT_NE(eviction_keeps_text(e).find("2 are held by every layer and 4 by at least one"), std::string::npos);
  EXPECT_NE(eviction_cost_text(e).find("dropped 6 K/V rows"), std::string::npos) << eviction_cost_text(e);
  // Up to the first step only " Lily" has come back; without eviction there is no lesson.
  EXPECT_EQ(eviction_lesson(recs, 2).misses.size(), 1u);
  auto dense = std::make_shared<StepRecord>(*recs[0]);
  dense->kv_layout.evict = KVEvict::kNone;
  EXPECT_FALSE(eviction_lesson({dense}, 1).active);
}

}  // namespace
}  // namespace kvscope
