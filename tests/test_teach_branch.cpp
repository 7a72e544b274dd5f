// The timeline's memory bound at the default model's full context, and
// fork-and-reuse of the cache with exact FLOP savings.
#include <gtest/gtest.h>

#include "teach_test_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace teachtest;

TEST(History, DefaultModelFullContextUnderBudget) {
  // The default model's size at full context, every detail kept: well under 256 MB.
  const std::shared_ptr<const Model> m = teach_model();
  const Config& c = m->config;
  ASSERT_EQ(c.n_layer, 4);
  ASSERT_EQ(c.n_positions, 256);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 1000;
  opt.sampler = sampled(3);
  BranchTree tree;  // the window's budget
  tree.start();
  const auto recs = run(gen, test_prompt(), opt);
  EXPECT_EQ(gen.reason(), StopReason::kContextFull);
  for (const auto& r : recs) tree.push(r);
  const History& h = tree.current_history();
  // The last forward covers the whole context (the engine stops once no
  // further forward fits; 255 or 256 positions depending on where it draws that line).
  const int last = h.back()->seq_len;
  ASSERT_GE(last, 255);
  ASSERT_LE(last, 256);
  ASSERT_EQ(h.size(), static_cast<size_t>(last - 16 + 1));
  EXPECT_FALSE(tree.trimmed().any());
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h.detail(i), static_cast<unsigned>(kDetailAll)) << i;
  // The estimate covers the vectors (independent count of their elements) and little else.
  uint64_t floats = 0;
  for (const auto& r : recs) floats += r->attn.size() + r->q.size() + r->logits.size() + r->k.size() + r->v.size();
  EXPECT_GE(h.bytes(), floats * 4);
  EXPECT_LE(h.bytes(), floats * 4 + recs.size() * 2048);
  // By the shapes: attention 4*4*L per step and its query rows 4*160, logits V, K/V 2*4*160 per new position.
  uint64_t expect = 4ull * 4 * 16 * 16 + 4ull * 16 * 160 + 3257 + 2ull * 4 * 160 * 16;  // the prefill: every prompt row
  for (int L = 17; L <= last; ++L) expect += 4ull * 4 * L + 4ull * 160 + 3257 + 2ull * 4 * 160;
  EXPECT_EQ(floats, expect);
  EXPECT_LT(h.bytes(), kDefaultHistoryBudget);
  EXPECT_LT(h.bytes(), 16ull << 20);  // about 8 MB in fact
}

// One branch under a budget (the policy is BranchTree's, shared by every branch).
BranchTree one_branch(const std::vector<RecordPtr>& recs, uint64_t budget, int keep_recent) {
  BranchTree t(budget, keep_recent);
  t.start();
  for (const auto& r : recs) t.push(r);
  return t;
}

TEST(History, BudgetDropsOldDetailKeepsTokensAndCounters) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 60;
  opt.sampler = sampled(8);
  const auto recs = run(gen, test_prompt(), opt);
  History full;
  for (const auto& r : recs) full.push(r);
  const uint64_t all_bytes = full.bytes();

  // A budget of a half: attention and logits of the oldest go first.
  const BranchTree half = one_branch(recs, all_bytes / 2, 8);
  const History& h = half.current_history();
  EXPECT_LE(h.bytes(), half.budget());
  EXPECT_EQ(h.bytes(), half.bytes());
  EXPECT_TRUE(half.trimmed().any());
  EXPECT_GT(half.trimmed().attention_dropped, 0);
  EXPECT_EQ(half.trimmed().kv_dropped, 0);  // pass 1 was enough
  EXPECT_EQ(h.bytes() + half.trimmed().bytes_freed, all_bytes);
  ASSERT_EQ(h.size(), recs.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const StepRecord& a = *h[i];
    const StepRecord& b = *recs[i];
    // Tokens, candidates and counters stay for every step.
    EXPECT_EQ(a.token, b.token);
    EXPECT_EQ(a.prob, b.prob);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.seq_len, b.seq_len);
    EXPECT_EQ(a.flops, b.flops);
    EXPECT_EQ(a.flops_total, b.flops_total);
    EXPECT_EQ(a.kv_bytes, b.kv_bytes);
    EXPECT_EQ(a.ms, b.ms);
    EXPECT_EQ(a.top.size(), b.top.size());
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
    EXPECT_EQ(a.n_kv, b.n_kv);
    if (static_cast<int>(i) < half.trimmed().first_full) {
      EXPECT_TRUE(a.attn.empty());
      EXPECT_EQ(a.n_rows, 0);
      EXPECT_TRUE(a.logits.empty());
      EXPECT_EQ(a.k, b.k);
    } else {
      EXPECT_EQ(h[i].get(), recs[i].get());  // untouched: the very same record
    }
  }
  EXPECT_GE(half.trimmed().first_full, 1);
  EXPECT_LE(half.trimmed().first_full, static_cast<int>(h.size()) - 8);  // the newest 8 kept whole
  EXPECT_EQ(h.tokens_before(h.size()), full.tokens_before(full.size()));

  // A tiny budget: K/V rows go too, the newest 8 still whole.
  const BranchTree tiny_tree = one_branch(recs, 1, 8);
  const History& tiny = tiny_tree.current_history();
  EXPECT_GT(tiny_tree.trimmed().kv_dropped, 0);
  for (size_t i = 0; i + 8 < tiny.size(); ++i) EXPECT_EQ(tiny.detail(i), 0u) << i;
  for (size_t i = tiny.size() - 8; i < tiny.size(); ++i) EXPECT_EQ(tiny[i].get(), recs[i].get());

  // Raising the budget later does not restore detail (it was dropped), lowering it enforces at once.
  BranchTree later = one_branch(recs, 0, 4);
  EXPECT_FALSE(later.trimmed().any());
  later.set_budget(all_bytes / 2);
  EXPECT_LE(later.bytes(), all_bytes / 2);
  EXPECT_TRUE(later.trimmed().any());
}

TEST(History, ScrubbingAndTokensBefore) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 10;
  const auto recs = run(gen, test_prompt(), opt);
  History h;
  expect_error([&] { h.push(recs[1]); }, {"prefill"}, "first not prefill");
  for (const auto& r : recs) h.push(r);
  for (size_t i = 0; i < h.size(); ++i) {
    const auto upto = h.upto(i);
    ASSERT_EQ(upto.size(), i + 1);
    EXPECT_EQ(upto.back().get(), recs[i].get());
    const std::vector<int> before = h.tokens_before(i);
    EXPECT_EQ(static_cast<int>(before.size()), recs[i]->seq_len);
    EXPECT_TRUE(std::equal(before.begin(), before.end(), gen.tokens().begin()));
  }
  EXPECT_EQ(h.tokens_before(h.size()), gen.tokens());
  EXPECT_EQ(h.upto(1000).size(), h.size());
  h.truncate(4);
  EXPECT_EQ(h.size(), 4u);
  uint64_t b = 0;
  for (size_t i = 0; i < 4; ++i) b += record_bytes(*recs[i]);
  EXPECT_EQ(h.bytes(), b);
}

// ===========================================================================
// 5. Branching

TEST(Branch, ForkCostFormula) {
  const Config c = testutil::gpt2_124m_config();
  for (int P : {1, 2, 7, 100, 1023}) {
    const uint64_t d = 768, p = static_cast<uint64_t>(P), L = 12, V = 50257;
    const ForkCost kv = fork_cost(c, P, true);
    // Written out: one new position attending to P + 1 keys, vs all P + 1 positions.
    EXPECT_EQ(kv.flops_reuse, L * (24 * d * d + 4 * d * (p + 1)) + 2 * d * V) << P;
    EXPECT_EQ(kv.flops_recompute, L * (24 * (p + 1) * d * d + 4 * d * ((p + 1) * (p + 2) / 2)) + 2 * d * V) << P;
    EXPECT_EQ(kv.flops_saved, L * (24 * p * d * d + 2 * d * p * (p + 1))) << P;
    EXPECT_EQ(kv.flops_saved, forward_flops(c, P, P) - 2 * d * V) << P;
    EXPECT_EQ(kv.flops_next, kv.flops_reuse);
    EXPECT_EQ(kv.reused_positions, P);
    const ForkCost nc = fork_cost(c, P, false);
    EXPECT_EQ(nc.flops_saved, 0u);
    EXPECT_EQ(nc.flops_next, nc.flops_recompute);
    EXPECT_EQ(nc.reused_positions, 0);
  }
  expect_error([&] { fork_cost(c, 0, true); }, {"fork"}, "P = 0");
}

TEST(Branch, ForkReusesCacheExactly) {
  // The fork, done with the engine's primitives: a KV generation runs 12
  // steps; we fork at step 5 with its second-best candidate. Cutting the
  // cache back to the fork point and computing one position gives the same
  // logits as recomputing every position, for exactly the FLOPs fork_cost says.
  const std::shared_ptr<const Model> m = teach_model();
  const Config& c = m->config;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 12;
  const auto recs = run(gen, test_prompt(), opt);
  History h;
  for (const auto& r : recs) h.push(r);
  const int step = 5;
  const StepRecord& at = *recs[step];
  const int forced = at.top[1].token;
  ASSERT_NE(forced, at.token);
  std::vector<int> prefix = h.tokens_before(step);
  const int P = static_cast<int>(prefix.size());
  ASSERT_EQ(P, at.seq_len);
  const ForkCost cost = fork_cost(c, P, true);
  std::vector<int> branch = prefix;
  branch.push_back(forced);

  // The parent's cache as the generator left it (every position but the last token's).
  Engine eng(*m);
  KVCache cache(KVLayout::for_model(c));
  const std::vector<int> parent(gen.tokens().begin(), gen.tokens().end() - 1);
  eng.forward(parent, 0, &cache, false);
  ASSERT_EQ(cache.length(0), gen.cache_length());
  cache.truncate(0, P);
  const ForwardOutput reuse = eng.forward(branch, P, &cache, false);
  EXPECT_EQ(reuse.n_new, 1);
  EXPECT_EQ(reuse.flops, cost.flops_reuse);
  EXPECT_EQ(cache.length(0), P + 1);

  Engine eng2(*m);
  const ForwardOutput recompute = eng2.forward(branch, 0, nullptr, false);
  EXPECT_EQ(recompute.flops, cost.flops_recompute);
  EXPECT_EQ(recompute.flops - reuse.flops, cost.flops_saved);
  ASSERT_EQ(reuse.logits.size(), recompute.logits.size());
  float max_diff = 0;
  for (size_t i = 0; i < reuse.logits.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(reuse.logits[i] - recompute.logits[i]));
  EXPECT_LT(max_diff, 1e-3f);
  // Attention of the new position over the reused keys, the same either way.
  ASSERT_EQ(reuse.attn.size(), recompute.attn.size());
  for (size_t i = 0; i < reuse.attn.size(); ++i) ASSERT_NEAR(reuse.attn[i], recompute.attn[i], 1e-4f);

  // A fresh generation forced to the same prefix (recomputing it) continues the same way.
  Generator fresh(m);
  GenerateOptions fo;
  fo.max_new = 1;
  fresh.start_tokens(branch, fo);
  const RecordPtr first = fresh.step();
  EXPECT_EQ(first->flops, forward_flops(c, P + 1, P + 1));
  EXPECT_EQ(first->token,
            static_cast<int>(std::max_element(reuse.logits.begin(), reuse.logits.end()) - reuse.logits.begin()));

  // The generator's own fork does the same: it keeps the prefix and says so.
  gen.fork(prefix, at, forced);
  EXPECT_TRUE(gen.fork_reused_cache());
  EXPECT_EQ(gen.cache_length(), P);
}

// Generator::fork(prefix, at, token): the real fork, cutting the cache back and reusing it.

template <class G>
void check_generator_fork(const std::shared_ptr<const Model>& m) {
  const Config& c = m->config;
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    const std::string where = to_string(mode);
    G g(m);
    GenerateOptions o;
    o.max_new = 20;
    o.mode = mode;
    g.start_tokens(test_prompt(), o);
    BranchTree tree;
    const int root = tree.start();
    for (int i = 0; i < 12; ++i) tree.push(g.step());
    const std::vector<RecordPtr> recs = tree.branch(root).history.records();
    const StepRecord& at = *recs[5];
    const std::vector<int> prefix = tree.current_history().tokens_before(5);
    const int P = at.seq_len;
    RecordPtr forced = g.fork(prefix, at, at.top[1].token);
    const bool reuse = g.fork_reused_cache();
    EXPECT_EQ(reuse, mode == CacheMode::kKV) << where;
    const ForkCost cost = fork_cost(c, P, reuse);
    EXPECT_EQ(forced->token, at.top[1].token) << where;
    EXPECT_EQ(forced->prob, explain_record(at, prefix).p_temp[static_cast<size_t>(at.top[1].token)]) << where;
    const int b = tree.fork(forced, cost);
    RecordPtr next = g.step();
    tree.push(next);
    EXPECT_EQ(next->index, 6) << where;
    EXPECT_EQ(next->seq_len, P + 1) << where;
    EXPECT_EQ(next->flops, cost.flops_next) << where;  // the saving, exactly as accounted
    EXPECT_EQ(next->flops_total, at.flops_total + next->flops) << where;
    // The branch's time: the parent's up to the fork, then its own (not the abandoned steps 6..11).
    EXPECT_DOUBLE_EQ(next->ms_total, at.ms_total + next->ms) << where;
    EXPECT_DOUBLE_EQ(g.ms_total(), next->ms_total) << where;
    EXPECT_FALSE(next->refill) << where;
    EXPECT_EQ(next->n_kv, 1) << where;
    EXPECT_EQ(branch_tokens(tree.branch(b)), g.tokens()) << where;
    // Back to the first branch's end: KV CACHE kept its sequence beside the
    // new branch's, so the next step computes one position; NO CACHE refills.
    const std::vector<int> other = tree.branch(root).history.tokens_before(11);
    g.fork(other, *recs[11], recs[11]->token);
    const int kept = mode == CacheMode::kKV ? recs[11]->seq_len : 0;
    EXPECT_EQ(g.fork_reused_cache(), mode == CacheMode::kKV) << where;
    EXPECT_EQ(g.cache_length(), kept) << where;
    EXPECT_EQ(g.step()->flops, forward_flops(c, recs[11]->seq_len + 1 - kept, recs[11]->seq_len + 1)) << where;
  }
}

TEST(Branch, GeneratorFork) {
  check_generator_fork<Generator>(teach_model());
}

TEST(Branch, ForcedRecordAndTree) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 10;
  opt.sampler = sampled(77, 1.0f, 0, 1.0f, 1.2f);
  const auto recs = run(gen, test_prompt(), opt);
  BranchTree tree;
  const int root = tree.start();
  for (const auto& r : recs) tree.push(r);
  double lp = 0;
  std::string text;
  for (const auto& r : recs) {
    lp += std::log(static_cast<double>(r->prob));
    text += r->raw_piece;
  }
  EXPECT_NEAR(tree.branch(root).log_prob, lp, 1e-9);
  EXPECT_EQ(tree.branch(root).text, text);
  EXPECT_EQ(branch_tokens(tree.branch(root)), gen.tokens());

  const int step = 3;
  const std::vector<int> before = tree.current_history().tokens_before(step);
  const SamplingExplain e = explain_record(*recs[step], before);
  const int forced_token = e.bars[2].token;  // the third-best candidate
  ASSERT_NE(forced_token, recs[step]->token);
  RecordPtr forced = make_forced_record(*recs[step], forced_token, before, m->tokenizer);
  EXPECT_EQ(forced->token, forced_token);
  EXPECT_EQ(forced->prob, e.p_temp[static_cast<size_t>(forced_token)]);
  EXPECT_EQ(forced->raw_piece, m->tokenizer.token_bytes(forced_token));
  EXPECT_EQ(forced->flops, recs[step]->flops);  // the forward that ran is the parent's
  EXPECT_EQ(forced->logits, recs[step]->logits);
  // From the candidates when the logits were dropped.
  RecordPtr light = strip_detail(*recs[step], kDetailAll);
  EXPECT_EQ(make_forced_record(*light, forced_token, before, m->tokenizer)->prob, e.p_temp[forced_token]);

  const ForkCost cost = fork_cost(m->config, recs[step]->seq_len, true);
  const int b1 = tree.fork(forced, cost);
  EXPECT_EQ(tree.current(), b1);
  const Branch& br = tree.branch(b1);
  EXPECT_EQ(br.parent, root);
  EXPECT_EQ(br.fork_step, step);
  ASSERT_EQ(br.history.size(), static_cast<size_t>(step + 1));
  for (int i = 0; i < step; ++i)
    EXPECT_EQ(br.history[static_cast<size_t>(i)].get(), recs[static_cast<size_t>(i)].get());
  double blp = 0;
  for (int i = 0; i < step; ++i) blp += std::log(static_cast<double>(recs[static_cast<size_t>(i)]->prob));
  blp += std::log(static_cast<double>(forced->prob));
  EXPECT_NEAR(br.log_prob, blp, 1e-9);
  EXPECT_NEAR(br.prob(), std::exp(blp), 1e-12);
  EXPECT_EQ(tree.shared_positions(root, b1), recs[step]->seq_len);  // the prompt and the first 3 chosen
  EXPECT_EQ(tree.flops_saved_total(), cost.flops_saved);
  // Shared records are counted once.
  uint64_t unique = 0;
  for (const auto& r : recs) unique += record_bytes(*r);
  unique += record_bytes(*forced);
  EXPECT_EQ(tree.bytes(), unique);

  // Clicking the same candidate again finds the branch; a second fork of the root nests correctly.
  EXPECT_EQ(tree.find_fork(root, step, forced_token), b1);
  EXPECT_EQ(tree.find_fork(root, step, recs[step]->token), -1);
  tree.select(root);
  const std::vector<int> before7 = tree.current_history().tokens_before(7);
  const int b2 = tree.fork(make_forced_record(*recs[7], recs[7]->top[1].token, before7, m->tokenizer),
                           fork_cost(m->config, recs[7]->seq_len, false));
  tree.select(b1);
  const int b3 = tree.fork(make_forced_record(*tree.current_history()[1], recs[1]->top[1].token,
                                              tree.current_history().tokens_before(1), m->tokenizer),
                           fork_cost(m->config, recs[1]->seq_len, true));
  const std::vector<TreeRow> rows = tree.rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].id, root);
  EXPECT_EQ(rows[0].depth, 0);
  EXPECT_EQ(rows[1].id, b1);
  EXPECT_EQ(rows[1].depth, 1);
  EXPECT_EQ(rows[2].id, b3);
  EXPECT_EQ(rows[2].depth, 2);
  EXPECT_EQ(rows[3].id, b2);
  EXPECT_EQ(rows[3].depth, 1);
  EXPECT_EQ(tree.children(root), (std::vector<int>{b1, b2}));
  EXPECT_EQ(tree.branch(b2).fork.flops_saved, 0u);  // NO CACHE fork: recomputed
  expect_error([&] { tree.select(42); }, {"branch 42"}, "no such branch");
  // A record that does not follow the branch is refused.
  tree.select(root);
  expect_error([&] { tree.push(recs[2]); }, {"does not follow"}, "out of order");
}

TEST(Branch, TreeBudgetSharesStrippedRecords) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 40;
  const auto recs = run(gen, test_prompt(), opt);
  BranchTree tree(0, 4);
  const int root = tree.start();
  for (const auto& r : recs) tree.push(r);
  const int b = tree.fork(
      make_forced_record(*recs[30], recs[30]->top[1].token, tree.current_history().tokens_before(30), m->tokenizer),
      fork_cost(m->config, recs[30]->seq_len, true));
  const uint64_t all = tree.bytes();
  tree.set_budget(all / 3);
  EXPECT_LE(tree.bytes(), all / 3);
  EXPECT_TRUE(tree.trimmed().any());
  // Shared prefix records: one stripped copy held by both branches.
  for (size_t i = 0; i < 30; ++i) EXPECT_EQ(tree.branch(root).history[i].get(), tree.branch(b).history[i].get()) << i;
  EXPECT_EQ(tree.branch(root).history[0]->attn.size(), 0u);
  // The current branch's newest 4 records keep their detail.
  const History& cur = tree.current_history();
  for (size_t i = cur.size() - 4; i < cur.size(); ++i) EXPECT_EQ(cur.detail(i) & kDetailLogits, kDetailLogits) << i;
  // Tokens of both branches intact.
  EXPECT_EQ(branch_tokens(tree.branch(root)), gen.tokens());
  EXPECT_EQ(tree.branch(b).history.back()->token, recs[30]->top[1].token);
}

// ===========================================================================
// 6. Saved views

}  // namespace
}  // namespace kvscope
