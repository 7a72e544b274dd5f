// The serving scheduler's rules (vLLM V1's scheduler and automatic prefix
// caching, docs/serving.md), on scripted arrivals without a model: each
// expected plan below is derived by hand from the rules, not recorded.
#include <gtest/gtest.h>

#include <vector>

#include "model/serving/block_pool.h"
#include "model/serving/scheduler.h"

namespace kvscope {
namespace {

std::vector<int> seq(int from, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

// Requests with their prompt lengths and max_new; run() plays the model:
// each sampling chunk yields token 1000 + req, and a request finishes once it
// has max_new tokens.
struct Harness {
  Scheduler s;
  std::vector<int> n_prompt, max_new;
  Harness(const SchedulerConfig& c, int block) : s(c, block) {}
  int add(const std::vector<int>& prompt, int max_new_tokens, int arrive = 0) {
    n_prompt.push_back(static_cast<int>(prompt.size()));
    max_new.push_back(max_new_tokens);
    return s.add(SchedRequest{prompt, arrive});
  }
  Plan run(int step) {
    const Plan p = s.schedule(step);
    complete(p);
    return p;
  }
  void complete(const Plan& p) {
    std::vector<Sampled> out;
    for (const Chunk& c : p.chunks) {
      if (!c.samples) continue;
      const size_t r = static_cast<size_t>(c.req);
      const int generated = static_cast<int>(s.tokens(c.req).size()) + 1 - n_prompt[r];
      out.push_back(Sampled{c.req, 1000 + c.req, generated >= max_new[r]});
    }
    s.complete(p, out);
  }
};

struct Want {
  int req, first, n;
  bool samples;
};

void expect_chunks(const Plan& p, const std::vector<Want>& want) {
  ASSERT_EQ(p.chunks.size(), want.size()) << "step " << p.step;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.chunks[i].req, want[i].req) << "step " << p.step << " chunk " << i;
    EXPECT_EQ(p.chunks[i].first, want[i].first) << "step " << p.step << " chunk " << i;
    EXPECT_EQ(p.chunks[i].n, want[i].n) << "step " << p.step << " chunk " << i;
    EXPECT_EQ(p.chunks[i].samples, want[i].samples) << "step " << p.step << " chunk " << i;
  }
}

SchedulerConfig config(int pool, int budget, int running) {
  SchedulerConfig c;
  c.pool_blocks = pool;
  c.max_batch_tokens = budget;
  c.max_running = running;
  return c;
}

// Running requests first, then waiting ones in arrival order, under the
// step's token budget: a prompt longer than the budget is prefilled in chunks.
TEST(ServeScheduler, ChunkedPrefillUnderTheTokenBudget) {
  Harness h(config(16, 8, 8), 4);
  const int a = h.add(seq(0, 10), 3), b = h.add(seq(100, 6), 2);
  expect_chunks(h.run(0), {{a, 0, 8, false}});  // the budget ends inside a's prompt; b waits
  EXPECT_EQ(h.s.waiting(), std::vector<int>{b});
  expect_chunks(h.run(1), {{a, 8, 2, true}, {b, 0, 6, true}});   // a first (running), then b with the 6 left
  expect_chunks(h.run(2), {{a, 10, 1, true}, {b, 6, 1, true}});  // one decode token each; b ends (2 tokens)
  EXPECT_EQ(h.s.state(b), ReqState::kDone);
  expect_chunks(h.run(3), {{a, 11, 1, true}});
  EXPECT_TRUE(h.s.all_done());
  EXPECT_EQ(h.s.pool().free_count(), 16) << "finished requests free their blocks";
}

// Admission takes the blocks needed now (not the whole future), --max-running
// caps the running set, and an arrival enters the queue at its step.
TEST(ServeScheduler, AdmissionByArrivalMaxRunningAndBlocksNeededNow) {
  Harness h(config(16, 64, 2), 4);
  const int a = h.add(seq(0, 3), 4), b = h.add(seq(10, 5), 1), c = h.add(seq(20, 2), 1, 1), d = h.add(seq(30, 2), 1, 1);
  Plan p = h.run(0);
  expect_chunks(p, {{a, 0, 3, true}, {b, 0, 5, true}});
  EXPECT_EQ(h.s.blocks(a).size(), 1u) << "3 positions: one block of 4, not a reservation for 3 + 4";
  EXPECT_EQ(h.s.state(b), ReqState::kDone);
  p = h.run(1);  // a decodes; c is admitted (one place free), d waits for R = 2
  expect_chunks(p, {{a, 3, 1, true}, {c, 0, 2, true}});
  EXPECT_EQ(h.s.waiting(), std::vector<int>{d});
  expect_chunks(h.run(2), {{a, 4, 1, true}, {d, 0, 2, true}});
  EXPECT_EQ(h.s.blocks(a).size(), 2u) << "position 4 opened a second block";
}

// A running request that needs a block when none is free preempts the most
// recently admitted one: its blocks are freed, it goes to the queue's front
// and recomputes prompt + generated tokens on readmission; no admissions in
// a step that preempted.
TEST(ServeScheduler, PreemptsTheNewestAndRecomputes) {
  Harness h(config(4, 64, 8), 2);
  const int a = h.add(seq(0, 3), 4), b = h.add(seq(10, 3), 3), c = h.add(seq(20, 1), 1, 2);
  expect_chunks(h.run(0), {{a, 0, 3, true}, {b, 0, 3, true}});  // 2 blocks each: the pool is full
  expect_chunks(h.run(1), {{a, 3, 1, true}, {b, 3, 1, true}});  // position 3 fits the second blocks
  EXPECT_EQ(h.s.pool().free_count(), 0);
  // Step 2: a needs a block for position 4; b (admitted last) is preempted; c arrived but is not admitted.
  Plan p = h.run(2);
  EXPECT_EQ(p.preempted, std::vector<int>{b});
  expect_chunks(p, {{a, 4, 1, true}});
  EXPECT_EQ(h.s.waiting(), (std::vector<int>{b, c})) << "the preempted request goes to the front";
  EXPECT_EQ(h.s.computed(b), 0);
  EXPECT_EQ(h.s.tokens(b).size(), 5u) << "its generated tokens are kept, to be recomputed";
  EXPECT_EQ(h.s.preemptions(b), 1);
  // Step 3: a decodes its last token (position 5, in its third block) and ends; b needs 3 blocks, 1 is free.
  expect_chunks(h.run(3), {{a, 5, 1, true}});
  EXPECT_EQ(h.s.state(a), ReqState::kDone);
  // Step 4: b recomputes its 3 prompt + 2 generated tokens and samples its third; c fits beside it.
  p = h.run(4);
  expect_chunks(p, {{b, 0, 5, true}, {c, 0, 1, true}});
  EXPECT_EQ(h.s.preemptions_total(), 1);
}

// The preempting request preempts itself when it is the newest.
TEST(ServeScheduler, TheNewestPreemptsItself) {
  Harness h(config(3, 64, 8), 2);
  const int a = h.add(seq(0, 2), 3), b = h.add(seq(10, 2), 3);
  expect_chunks(h.run(0), {{a, 0, 2, true}, {b, 0, 2, true}});  // one block each, 1 free
  Plan p = h.run(1);  // a takes the free block; b finds none and is itself the newest
  expect_chunks(p, {{a, 2, 1, true}});
  EXPECT_EQ(p.preempted, std::vector<int>{b});
  expect_chunks(h.run(2), {{a, 3, 1, true}});  // b needs 2 blocks, 1 is free: it waits
  expect_chunks(h.run(3), {{b, 0, 3, true}});  // recomputes its prompt and its first token
}

// Block keys, reference counts and the LRU free queue of the prefix cache.
TEST(ServeScheduler, BlockPoolKeysAndLruEviction) {
  BlockPool pool(4, true);
  const int64_t k0 = pool.key(BlockPool::kNoKey, {1, 2}), k1 = pool.key(k0, {3, 4});
  EXPECT_EQ(pool.key(BlockPool::kNoKey, {1, 2}), k0) << "same parent and tokens: same key";
  EXPECT_NE(pool.key(k1, {1, 2}), k0) << "same tokens after another parent: another key";
  for (int b = 0; b < 4; ++b) EXPECT_EQ(pool.allocate(), b) << "never-used blocks in order";
  EXPECT_EQ(pool.allocate(), -1);
  pool.set_key(0, k0);
  pool.set_key(1, k1);
  pool.set_key(2, k0);  // the key is already cached: block 2 stays uncached
  EXPECT_FALSE(pool.cached(2));
  pool.release({0, 1, 2, 3});  // last block first: the free queue is 3, 2, 1, 0
  EXPECT_EQ(pool.free_count(), 4);
  EXPECT_EQ(pool.cached_free_count(), 2);
  EXPECT_EQ(pool.lookup(k1), 1) << "freed blocks stay cached";
  pool.ref(0);  // a prefix hit takes a cached free block back out of the queue
  EXPECT_EQ(pool.refs(0), 1);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 1) << "the least recently freed goes first";
  EXPECT_EQ(pool.lookup(k1), -1) << "reallocating a cached block evicts its key";
  EXPECT_EQ(pool.lookup(k0), 0);
  EXPECT_EQ(pool.allocate(), -1);
}

// A request whose prompt starts with cached full blocks shares them
// (reference counted) and computes only the rest; the last prompt token is
// always computed, so a fully cached prompt hits all but its last block.
TEST(ServeScheduler, PrefixHitsShareFullBlocks) {
  SchedulerConfig c = config(8, 64, 8);
  c.prefix_caching = true;
  Harness h(c, 4);
  std::vector<int> pb = seq(0, 8);
  for (int t : seq(50, 3)) pb.push_back(t);
  const int a = h.add(seq(0, 10), 2), b = h.add(pb, 1, 1), d = h.add(seq(0, 8), 1, 2);
  EXPECT_EQ(h.run(0).prefix_hit_blocks, 0);
  Plan p = h.s.schedule(1);  // a decodes; b finds blocks 0 and 1 (positions 0..7) cached
  expect_chunks(p, {{a, 10, 1, true}, {b, 8, 3, true}});
  EXPECT_EQ(p.prefix_hit_blocks, 2);
  // Both end at this step and give their blocks back, so compare before completing it.
  ASSERT_GE(h.s.blocks(a).size(), 2u);
  ASSERT_GE(h.s.blocks(b).size(), 2u);
  EXPECT_EQ(h.s.blocks(b)[0], h.s.blocks(a)[0]);
  EXPECT_EQ(h.s.blocks(b)[1], h.s.blocks(a)[1]);
  h.complete(p);
  EXPECT_EQ(h.s.state(a), ReqState::kDone);
  EXPECT_EQ(h.s.pool().cached_free_count(), 2) << "a's and b's prefix stays cached after both end";
  p = h.run(2);  // d's 8 tokens are two cached blocks: it takes one and computes positions 4..7
  expect_chunks(p, {{d, 4, 4, true}});
  EXPECT_EQ(p.prefix_hit_blocks, 1);
  EXPECT_EQ(h.s.prefix_hit_blocks_total(), 3);
}

// Without prefix caching nothing is shared.
TEST(ServeScheduler, NoHitsWithoutPrefixCaching) {
  Harness h(config(8, 64, 8), 4);
  h.add(seq(0, 10), 1);
  h.add(seq(0, 10), 1, 1);
  h.run(0);
  const Plan p = h.run(1);
  EXPECT_EQ(p.prefix_hit_blocks, 0);
  EXPECT_EQ(p.chunks.at(0).first, 0);
}

// Static batching: a batch holds its places until its longest request ends.
TEST(ServeScheduler, StaticBatchWaitsForItsLongestRequest) {
  for (ServePolicy policy : {ServePolicy::kContinuous, ServePolicy::kStatic}) {
    SchedulerConfig c = config(16, 64, 2);
    c.policy = policy;
    Harness h(c, 4);
    const int a = h.add(seq(0, 2), 1), b = h.add(seq(10, 2), 4), late = h.add(seq(20, 2), 1, 1);
    h.run(0);  // a ends at once, b goes on
    const Plan p = h.run(1);
    if (policy == ServePolicy::kContinuous) {
      expect_chunks(p, {{b, 2, 1, true}, {late, 0, 2, true}});
    } else {
      expect_chunks(p, {{b, 2, 1, true}});
      h.run(2);
      h.run(3);  // b's fourth token
      EXPECT_EQ(h.s.state(b), ReqState::kDone);
      expect_chunks(h.run(4), {{late, 0, 2, true}});
    }
    (void)a;
  }
}

}  // namespace
}  // namespace kvscope
