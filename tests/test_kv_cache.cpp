// The KV cache as its own concept: sequences (add, fork sharing a prefix,
// truncate, release), the paged pool (reference counts, copy-on-write,
// shuffled free lists), byte counters against the formats' formulas, and
// batched forwards over several sequences against one-sequence forwards.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

const char* const kCkpt = "l2h4d64_f16_prefix_u8buffers";  // 2 layers, 4 heads, d 64, ctx 96

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = load_model(testutil::suite_checkpoint(kCkpt));
  return m;
}

std::vector<int> tokens(int n, int salt = 0) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11 + salt * 101) % 300);
  return t;
}

KVLayout layout(KVDtype dt = KVDtype::kF32, int window = 0, int sinks = 0, int block = 0) {
  KVLayout s;
  s.dtype = dt;
  s.window = window;
  s.sinks = sinks;
  s.block = block;
  return s.on_model(model()->config);
}

// Runs `toks` through `cache` sequence `seq`: a prefill of `prefill` positions, then one at a time.
std::vector<std::vector<float>> run(Engine& eng, KVCache& cache, SeqId seq, const std::vector<int>& toks, int prefill) {
  std::vector<std::vector<float>> logits;
  int pos = cache.length(seq);
  while (pos < static_cast<int>(toks.size())) {
    const int n = pos == 0 ? prefill : 1;
    std::vector<BatchEntry> batch;
    for (int i = 0; i < n; ++i)
      batch.push_back(BatchEntry{seq, pos + i, toks[static_cast<size_t>(pos + i)], i == n - 1, false});
    logits.push_back(eng.forward(batch, cache).logits);
    pos += n;
  }
  return logits;
}

TEST(KVCache, LayoutValidationNamesTheSetting) {
  const Config& c = model()->config;
  auto refuse = [&](KVLayout s, const std::string& needle) {
    try {
      s.on_model(c);
      ADD_FAILURE() << "accepted " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  KVLayout s;
  s.window = -1;
  refuse(s, "--kv-window");
  s = KVLayout();
  s.window = 4;
  s.sinks = 4;
  refuse(s, "--kv-sinks");
  s = KVLayout();
  s.sinks = 2;
  refuse(s, "--kv-sinks");
  s = KVLayout();
  s.block = -3;
  refuse(s, "--kv-block");
  // A K/V row of 48 values cannot be cut into blocks of 32.
  Config c48 = c;
  c48.n_embd = 48;
  c48.n_head = 4;
  for (KVDtype dt : {KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    KVLayout q;
    q.dtype = dt;
    try {
      q.on_model(c48);
      ADD_FAILURE() << "accepted " << to_string(dt) << " with n_embd 48";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
    }
  }
  KVLayout f16;
  f16.dtype = KVDtype::kF16;
  EXPECT_NO_THROW(f16.on_model(c48));
}

TEST(KVCache, DtypeNamesAndRowBytes) {
  for (const char* n : {"f32", "f16", "q8_0", "q4_0"}) {
    KVDtype d;
    ASSERT_TRUE(parse_kv_dtype(n, &d)) << n;
    EXPECT_STREQ(to_string(d), n);
  }
  KVDtype d;
  EXPECT_FALSE(parse_kv_dtype("q8", &d));
  // The formats' sizes: 4 and 2 bytes per value; 34 and 18 bytes per 32 values (scale included).
  EXPECT_EQ(kv_row_bytes(KVDtype::kF32, 768), 768u * 4);
  EXPECT_EQ(kv_row_bytes(KVDtype::kF16, 768), 768u * 2);
  EXPECT_EQ(kv_row_bytes(KVDtype::kQ8_0, 768), 768u / 32 * 34);
  EXPECT_EQ(kv_row_bytes(KVDtype::kQ4_0, 768), 768u / 32 * 18);
  EXPECT_EQ(kv_bytes_per_position(testutil::gpt2_124m_config()), 2ull * 12 * 768 * 4);
}

TEST(KVCache, SequencesForkTruncateRelease) {
  KVCache cache(layout());
  const SeqId a = cache.add_sequence();
  Engine eng(*model());
  run(eng, cache, a, tokens(10), 10);
  EXPECT_EQ(cache.length(a), 10);
  EXPECT_EQ(cache.n_held(a), 10);
  const SeqId b = cache.fork(a, 6);
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.length(b), 6);
  // Contiguous layout: shared until either side writes, then the writer copies its block.
  EXPECT_EQ(cache.blocks_held(), 1);
  EXPECT_EQ(cache.bytes(), 10 * cache.layout().bytes_per_position());
  run(eng, cache, b, tokens(8, 1), 1);
  EXPECT_EQ(cache.blocks_copied(), 1u);
  EXPECT_EQ(cache.blocks_held(), 2);
  EXPECT_EQ(cache.bytes(), (10 + 8) * cache.layout().bytes_per_position());
  cache.truncate(a, 4);
  EXPECT_EQ(cache.length(a), 4);
  EXPECT_EQ(cache.positions(a), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(cache.truncate(a, 5), Error);
  cache.release(a);
  EXPECT_FALSE(cache.has_sequence(a));
  EXPECT_EQ(cache.sequences(), std::vector<SeqId>{b});
  EXPECT_EQ(cache.bytes(), 8 * cache.layout().bytes_per_position());
  EXPECT_THROW(cache.length(a), Error);
  // A batch entry must continue its sequence.
  std::vector<BatchEntry> gap{BatchEntry{b, 9, 1, true, false}};
  EXPECT_THROW(eng.forward(gap, cache), Error);
  EXPECT_EQ(cache.length(b), 8) << "a refused batch changes nothing";
}

// The paged pool: a fork shares every block, the first write into the shared
// last block copies exactly that one, and released blocks return to the pool.
TEST(KVCache, PagedForkCopiesOneBlockOnFirstWrite) {
  const int B = 4;
  KVCache cache(layout(KVDtype::kF32, 0, 0, B));
  Engine eng(*model());
  const SeqId a = cache.add_sequence();
  run(eng, cache, a, tokens(10), 10);  // blocks: [0,4) [4,8) [8,10)
  EXPECT_EQ(cache.blocks_held(), 3);
  EXPECT_EQ(cache.slots_used(), 10);
  EXPECT_EQ(cache.slots_wasted(), 2);
  EXPECT_EQ(cache.bytes(), 3ull * B * cache.layout().bytes_per_position());
  EXPECT_EQ(cache.contiguous_reservation_bytes(), 96ull * cache.layout().bytes_per_position());
  const SeqId b = cache.fork(a, 10);
  EXPECT_EQ(cache.block_table(b), cache.block_table(a));
  EXPECT_EQ(cache.blocks_held(), 3) << "a fork shares every block";
  std::vector<BatchEntry> step{BatchEntry{b, 10, 5, true, false}};
  eng.forward(step, cache);
  EXPECT_EQ(cache.blocks_copied(), 1u);
  EXPECT_EQ(cache.blocks_held(), 4);
  // Rows shared by both sequences count once: 8 in the two shared blocks,
  // 2 + 3 in a's and b's own copies of the third.
  EXPECT_EQ(cache.slots_used(), 13);
  EXPECT_EQ(static_cast<size_t>(cache.slots_used()), cache.cells().size());
  const std::vector<int> ta = cache.block_table(a), tb = cache.block_table(b);
  EXPECT_EQ(ta[0], tb[0]);
  EXPECT_EQ(ta[1], tb[1]);
  EXPECT_NE(ta[2], tb[2]);
  // The rows both share read the same bytes; the copied block holds a's rows too.
  std::vector<float> ra(64), rb(64);
  for (int p = 0; p < 10; ++p) {
    cache.read_row(1, cache.slot_of(a, p), true, ra.data());
    cache.read_row(1, cache.slot_of(b, p), true, rb.data());
    EXPECT_EQ(ra, rb) << "position " << p;
  }
  // A second write into b's own block copies nothing.
  eng.forward(std::vector<BatchEntry>{BatchEntry{b, 11, 6, true, false}}, cache);
  EXPECT_EQ(cache.blocks_copied(), 1u);
  cache.release(a);
  EXPECT_EQ(cache.blocks_held(), 3) << "a's own last block went back to the pool";
  cache.release(b);
  EXPECT_EQ(cache.blocks_held(), 0);
  EXPECT_EQ(cache.bytes(), 0u);
}

// Paged attention reads rows from scattered blocks in place: the logits are
// bit-identical to the contiguous cache's, for any block size and free-list order.
TEST(KVCache, PagedShuffledFreeListIdenticalToDense) {
  Engine eng(*model());
  const std::vector<int> toks = tokens(40);
  KVCache dense(layout());
  const auto want = run(eng, dense, dense.add_sequence(), toks, 9);
  for (int B : {1, 16, 64}) {
    KVCache paged(layout(KVDtype::kF32, 0, 0, B));
    paged.preallocate_shuffled(96 / B + 4, 77u + static_cast<uint32_t>(B));
    const auto got = run(eng, paged, paged.add_sequence(), toks, 9);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < got.size(); ++s) ASSERT_EQ(got[s], want[s]) << "B=" << B << " forward " << s;
    const int blocks = (40 + B - 1) / B;
    EXPECT_EQ(paged.blocks_held(), blocks);
    EXPECT_EQ(paged.slots_wasted(), blocks * B - 40);
    EXPECT_EQ(paged.bytes(), static_cast<uint64_t>(blocks) * B * paged.layout().bytes_per_position());
  }
}

// Window >= the sequence: the same keys in the same order, bit-identical logits.
TEST(KVCache, WideWindowIdenticalToDense) {
  Engine eng(*model());
  const std::vector<int> toks = tokens(30);
  KVCache dense(layout());
  const auto want = run(eng, dense, dense.add_sequence(), toks, 7);
  for (auto [w, s] : {std::pair<int, int>{30, 0}, {96, 3}, {40, 39}}) {
    KVCache win(layout(KVDtype::kF32, w, s));
    const auto got = run(eng, win, win.add_sequence(), toks, 7);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "W=" << w << " S=" << s << " forward " << i;
  }
}

// Several sequences in one batch give what each gives alone (up to the
// rounding of a matrix product over several rows instead of one).
TEST(KVCache, BatchOfSequencesMatchesSeparateForwards) {
  Engine eng(*model());
  const std::vector<int> base = tokens(12);
  KVCache cache(layout(KVDtype::kF32, 0, 0, 8));
  const SeqId a = cache.add_sequence();
  run(eng, cache, a, base, 12);
  const SeqId b = cache.fork(a, 12);
  const SeqId c = cache.fork(a, 7);
  // One forward: a and b each decode one token, c three (the verify rows of speculative decoding).
  std::vector<BatchEntry> batch{{a, 12, 5, true, true},
                                {b, 12, 6, true, true},
                                {c, 7, 8, true, false},
                                {c, 8, 9, true, false},
                                {c, 9, 10, true, true}};
  ForwardTaps taps;
  taps.query = true;
  const ForwardOutput out = eng.forward(batch, cache, taps);
  ASSERT_EQ(out.logit_entries.size(), 5u);
  ASSERT_EQ(out.tap_entries, (std::vector<int>{0, 1, 4}));
  const Config& cf = model()->config;
  EXPECT_EQ(out.width, 13);
  EXPECT_EQ(out.q.size(), static_cast<size_t>(cf.n_layer) * 3 * cf.n_embd);
  auto alone = [&](std::vector<int> toks, int upto) {
    Engine e2(*model());
    const ForwardOutput o = e2.forward(toks, 0, nullptr, false, true);
    return std::vector<float>(o.logits.begin() + static_cast<std::ptrdiff_t>(upto) * cf.vocab_size,
                              o.logits.begin() + static_cast<std::ptrdiff_t>(upto + 1) * cf.vocab_size);
  };
  std::vector<int> ta = base, tb = base, tc(base.begin(), base.begin() + 7);
  ta.push_back(5);
  tb.push_back(6);
  tc.insert(tc.end(), {8, 9, 10});
  const std::vector<std::vector<float>> want = {alone(ta, 12), alone(tb, 12), alone(tc, 7), alone(tc, 8), alone(tc, 9)};
  for (size_t e = 0; e < 5; ++e) {
    float worst = 0;
    for (int t = 0; t < cf.vocab_size; ++t)
      worst = std::max(
          worst, std::fabs(out.logits[e * cf.vocab_size + static_cast<size_t>(t)] - want[e][static_cast<size_t>(t)]));
    EXPECT_LE(worst, 2e-4) << "entry " << e;
  }
  // Attention rows: zero past the entry's position, summing to 1.
  for (int r = 0; r < 3; ++r) {
    const int pos = batch[static_cast<size_t>(out.tap_entries[static_cast<size_t>(r)])].pos;
    double sum = 0;
    for (int k = 0; k < out.width; ++k) {
      const float p = out.attn[(static_cast<size_t>(1 * cf.n_head + 2) * 3 + r) * out.width + k];
      if (k > pos) {
        EXPECT_EQ(p, 0.0f);
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  EXPECT_EQ(cache.length(a), 13);
  EXPECT_EQ(cache.length(c), 10);
}

// The generator's branching forks its sequence at the prefix and keeps the
// old branch's sequence beside it: both share the prefix's full pages, the
// partial one is copied on the new branch's first write, and the bytes count
// every page once. Under a budget too small for both, the old one goes.
TEST(KVCache, GeneratorForkKeepsTheOldBranchSharingThePrefix) {
  for (const uint64_t budget : {uint64_t{256} << 20, uint64_t{0}}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    Generator gen(model());
    GenerateOptions opt;
    opt.max_new = 10;
    opt.kv.block = 4;
    opt.branch_cache_budget = budget;
    gen.start_tokens(tokens(9), opt);
    std::vector<RecordPtr> recs;
    while (RecordPtr r = gen.step()) recs.push_back(r);
    const int old_len = recs.back()->seq_len;  // 18 positions: 5 pages
    const StepRecord& at = *recs[4];
    const int p = at.seq_len;  // 13: 3 full pages + 1 of 4 slots
    std::vector<int> prefix(gen.tokens().begin(), gen.tokens().begin() + p);
    const uint64_t copies = gen.cache().blocks_copied();
    RecordPtr forced = gen.fork(prefix, at, at.top[1].token);
    EXPECT_EQ(gen.cache_length(), p);
    RecordPtr next = gen.step();
    EXPECT_FALSE(next->refill);
    EXPECT_EQ(next->n_new, 1);
    const uint64_t page = 4 * gen.cache().layout().bytes_per_position();
    const int old_pages = (old_len + 3) / 4, new_pages = (p + 1 + 3) / 4, shared = p / 4;
    if (budget == 0) {
      EXPECT_EQ(gen.cache().sequences().size(), 1u);
      EXPECT_EQ(next->kv_sequences, 1);
      EXPECT_EQ(gen.cache().blocks_copied(), copies) << "the old branch was released: nothing shared is left to copy";
      EXPECT_EQ(next->kv_blocks, new_pages);
      continue;
    }
    EXPECT_EQ(forced->kv_sequences, 2);
    ASSERT_FALSE(forced->kv_page_runs.empty());
    for (const PageRun& run : forced->kv_page_runs)
      EXPECT_EQ(run.refs, 2) << "at the fork every page of the prefix is shared";
    EXPECT_EQ(gen.cache().sequences().size(), 2u);
    EXPECT_EQ(next->kv_sequences, 2);
    EXPECT_EQ(gen.cache().blocks_copied(), copies + 1) << "the shared partial page, copied on first write";
    EXPECT_EQ(next->kv_blocks, old_pages + new_pages - shared);
    EXPECT_EQ(next->kv_bytes, static_cast<uint64_t>(old_pages + new_pages - shared) * page);
    EXPECT_EQ(next->kv_bytes_separate, static_cast<uint64_t>(old_pages + new_pages) * page);
    EXPECT_EQ(next->kv_bytes, gen.cache().bytes());
    ASSERT_EQ(next->kv_held.count(), p + 1);
    for (int q = 0; q <= p; ++q) {
      const PageRun* run = next->page_at(q);
      ASSERT_NE(run, nullptr) << q;
      EXPECT_EQ(run->refs, q < shared * 4 ? 2 : 1) << q;
    }
    // Back to the old branch's end: its kept sequence is taken over, no refill.
    std::vector<int> old_prefix(prefix);
    for (size_t i = 5; i < recs.size(); ++i) old_prefix.push_back(recs[i - 1]->token);
    ASSERT_EQ(static_cast<int>(old_prefix.size()), old_len);
    gen.fork(old_prefix, *recs.back(), recs.back()->token);
    EXPECT_EQ(gen.cache_length(), old_len);
    EXPECT_EQ(gen.cache().sequences().size(), 2u) << "the branch left holds a position the other lacks";
  }
}

}  // namespace
}  // namespace kvscope
