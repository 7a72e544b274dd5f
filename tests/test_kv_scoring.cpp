// Per-position scores under a cache layout (what `kvscope eval` sums and the
// Cache panel plots): one batched forward over the text must give the same
// next-token distribution as the generation that produced it step by step
// (a different code path: a cache that really evicted, one row per step),
// and the background scorer returns exactly those scores.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "app/worker/kv_scoring.h"
#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "model/decoding/kv_eval.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

constexpr const char* kCkpt = "l2h2d32_f32_prefix_buffers";

double nll_of(const std::vector<float>& logits, int token) {
  double mx = logits[0], z = 0;
  for (float v : logits) mx = std::max<double>(mx, v);
  for (float v : logits) z += std::exp(v - mx);
  return -(logits[static_cast<size_t>(token)] - mx - std::log(z));
}

TEST(KvScoring, BatchedScoresMatchTheGenerationStepByStep) {
  auto m = load_model(testutil::suite_checkpoint(kCkpt));
  for (KVLayout kv :
       {KVLayout{KVDtype::kF32, 3, 0, 0}, KVLayout{KVDtype::kQ8_0, 4, 1, 2}, KVLayout{KVDtype::kQ4_0, 0, 0, 0}}) {
    Generator gen(m);
    GenerateOptions opt;
    opt.max_new = 8;
    opt.sampler.greedy = true;
    opt.ignore_eos = true;
    opt.kv = kv;
    gen.start_tokens({3, 1, 4, 1, 5}, opt);
    std::vector<RecordPtr> recs;
    while (RecordPtr r = gen.step()) recs.push_back(r);
    const KVLayout lay = kv.on_model(m->config);
    Engine engine(*m);
    KVCache cache(lay), dense(KVLayout::for_model(m->config));
    const LayoutScores sc = score_layout(engine, cache, &dense, gen.tokens());
    ASSERT_EQ(sc.nll.size(), gen.tokens().size() - 1);
    ASSERT_EQ(sc.kl.size(), sc.nll.size());
    for (const RecordPtr& r : recs) {
      const size_t i = static_cast<size_t>(r->seq_len - 1);  // the position that chose r->token
      EXPECT_NEAR(sc.nll[i], nll_of(r->logits, r->token), 1e-4) << lay.describe() << " position " << i;
      EXPECT_GE(sc.kl[i], -1e-9);
    }
    // The cache after the one forward holds what the layout keeps of the whole text.
    const int n = static_cast<int>(gen.tokens().size());
    const int held = lay.windowed() ? std::min(n, lay.window + lay.sinks) : n;
    if (!lay.paged()) {
      EXPECT_EQ(sc.kv_bytes, static_cast<uint64_t>(held) * lay.bytes_per_position()) << lay.describe();
    }
  }
}

LayoutScoreRequest request_for(std::shared_ptr<const Model> m, std::vector<int> tokens,
                               const std::vector<KVLayout>& layouts) {
  LayoutScoreRequest req;
  req.model = std::move(m);
  req.tokens = std::move(tokens);
  req.layouts = layouts;
  req.at = std::make_shared<StepRecord>();
  return req;
}

// Starts `req` on the scorer's thread and waits (up to 30 s) for its result.
std::shared_ptr<const LayoutScoreResult> score_in_background(LayoutScorer& scorer, const LayoutScoreRequest& req) {
  scorer.request(req);
  std::shared_ptr<const LayoutScoreResult> res;
  for (int i = 0; i < 6000 && !(res = scorer.result()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return res;
}

TEST(KvScoring, BackgroundScorerReturnsTheScores) {
  auto m = load_model(testutil::suite_checkpoint(kCkpt));
  KVLayout run = KVLayout::for_model(m->config);
  run.window = 6;
  const std::vector<KVLayout> layouts = layouts_to_compare(run, KVLayout::for_model(m->config));
  ASSERT_EQ(layouts.size(), 3u);  // dense, W=6, W=6 + 4 sinks
  EXPECT_EQ(layouts[2].sinks, 4);
  const LayoutScoreRequest req = request_for(m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, layouts);
  LayoutScorer scorer;
  std::shared_ptr<const LayoutScoreResult> res = score_in_background(scorer, req);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->request.at, req.at);
  ASSERT_TRUE(res->error.empty()) << res->error;
  ASSERT_EQ(res->scores.size(), 3u);
  Engine engine(*m);
  for (size_t l = 0; l < layouts.size(); ++l) {
    KVCache cache(layouts[l]), dense(layouts[0]);
    const LayoutScores want = score_layout(engine, cache, l ? &dense : nullptr, req.tokens);
    EXPECT_EQ(res->scores[l].nll, want.nll) << l;
    EXPECT_EQ(res->scores[l].kl, want.kl) << l;
  }
  EXPECT_FALSE(scorer.busy());
}

// Eviction by score: the plot compares the running rule, the other rule and a
// window with sinks, every one holding the same N positions per layer. Until
// a layer holds more than N positions nothing is evicted, so every layout's
// loss equals the dense cache's there; after that they part.
TEST(KvScoring, EvictionComparesBothRulesAndAWindowAtTheSameBudget) {
  auto m = load_model(testutil::suite_checkpoint(kCkpt));
  const KVLayout dense = KVLayout::for_model(m->config);
  KVLayout run = dense;
  run.evict = KVEvict::kTova;
  run.budget = 10;
  const std::vector<KVLayout> layouts = layouts_to_compare(run, dense);
  ASSERT_EQ(layouts.size(), 4u);  // dense, TOVA 10, window 6 + 4 sinks, H2O 10
  EXPECT_EQ(layouts[1], run);
  EXPECT_EQ(layouts[2].window + layouts[2].sinks, 10);
  EXPECT_EQ(layouts[2].sinks, 4);
  EXPECT_FALSE(layouts[2].evicting());
  EXPECT_EQ(layouts[3].evict, KVEvict::kH2O);
  EXPECT_EQ(layouts[3].budget, 10);
  KVLayout small = run;
  small.budget = 6;  // no room for 4 sinks beside a window of more than 4
  EXPECT_EQ(layouts_to_compare(small, dense)[2].window, 6);
  EXPECT_EQ(layouts_to_compare(small, dense)[2].sinks, 0);

  std::vector<int> tokens;
  for (int t = 1; t <= 24; ++t) tokens.push_back(t % 11 + 1);
  LayoutScorer scorer;
  std::shared_ptr<const LayoutScoreResult> res = score_in_background(scorer, request_for(m, tokens, layouts));
  ASSERT_TRUE(res);
  ASSERT_TRUE(res->error.empty()) << res->error;
  ASSERT_EQ(res->scores.size(), 4u);
  const std::vector<double>& d = res->scores[0].nll;
  for (size_t l = 1; l < 4; ++l) {
    ASSERT_EQ(res->scores[l].nll.size(), d.size()) << l;
    // nll[i] predicts token i + 1 from positions [0, i]: all held while i + 1 <= N.
    for (size_t i = 0; i + 1 < 10 && i < d.size(); ++i) EXPECT_NEAR(res->scores[l].nll[i], d[i], 1e-4) << l << " " << i;
    double apart = 0;
    for (size_t i = 10; i < d.size(); ++i) apart += std::abs(res->scores[l].nll[i] - d[i]);
    EXPECT_GT(apart, 0) << l;
  }
}

}  // namespace
}  // namespace kvscope
