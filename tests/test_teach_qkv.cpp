// The Q·Kᵀ/√d → softmax → ·V inspector on real generations: the query rows
// and K/V rows it shows reproduce the engine's attention weights (the
// beams), and the head output it shows is the weighted sum of the V rows it
// shows.
#include <gtest/gtest.h>

#include <cmath>

#include "app/lessons/qkv.h"
#include "app/session/history.h"
#include "numpy_ref_util.h"
#include "teach_test_util.h"

namespace kvscope {
namespace {

using namespace teachtest;

// Recomputes from the displayed numbers only, in double.
void check_consistent(const QkvInspection& in, const StepRecord& r) {
  ASSERT_TRUE(in.ok) << in.missing;
  ASSERT_EQ(in.n(), r.seq_len);
  ASSERT_EQ(static_cast<int>(in.q.size()), in.head_dim);
  double wsum = 0;
  for (int j = 0; j < in.n(); ++j) {
    // The weights shown are the beams' weights.
    EXPECT_EQ(in.weights[j], r.attention(in.layer, in.head, r.n_rows - 1, in.positions[j]));
    wsum += in.weights[j];
    // q·k/√d of the shown rows gives the shown score.
    double s = 0;
    for (int i = 0; i < in.head_dim; ++i) s += static_cast<double>(in.q[i]) * in.k_row(j)[i];
    EXPECT_NEAR(in.scores[j], s / std::sqrt(static_cast<double>(in.head_dim)), 1e-5);
  }
  EXPECT_NEAR(wsum, 1.0, 1e-5);
  // softmax of the shown scores = the engine's weights: q and K are the real rows.
  // The engine sums q·k in float over the head's width (scores of tens here),
  // the inspector in double: they agree to float rounding of the scores, a few
  // 1e-6 of a weight (1.04e-5 seen after a refill), far below any other row's.
  EXPECT_LT(in.max_weight_diff, 3e-5f);
  // The head output = Σ weight × v over the shown rows.
  for (int i = 0; i < in.head_dim; ++i) {
    double o = 0;
    for (int j = 0; j < in.n(); ++j) o += static_cast<double>(in.weights[j]) * in.v_row(j)[i];
    EXPECT_NEAR(in.output[i], o, 1e-5) << "output[" << i << "]";
  }
}

TEST(QkvInspector, RecomputesTheEnginesWeightsAndTheHeadOutput) {
  const auto m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 8;
  // KV CACHE, then NO CACHE, then back (a refill): the rows come from whichever record computed them.
  const std::vector<RecordPtr> recs =
      run(gen, test_prompt(12), opt, [](int s) { return s >= 3 && s < 5 ? CacheMode::kNoCache : CacheMode::kKV; });
  ASSERT_GE(recs.size(), 7u);
  const Config& c = m->config;
  for (int step : {0, 1, 3, 4, 5, static_cast<int>(recs.size()) - 1})
    for (int layer : {0, c.n_layer - 1})
      for (int head : {0, c.n_head - 1}) {
        SCOPED_TRACE("step " + std::to_string(step) + " layer " + std::to_string(layer) + " head " +
                     std::to_string(head));
        check_consistent(inspect_qkv(recs, step, layer, head), *recs[static_cast<size_t>(step)]);
        if (HasFatalFailure()) return;
      }
}

// Grouped-query attention (a Qwen2-shaped checkpoint: 8 query heads sharing
// 2 K/V heads): every query head is shown the K/V head it reads, at the
// record's head width, and the shown rows still reproduce the weights.
TEST(QkvInspector, GroupedQueryHeadsReadTheirSharedKvHead) {
  const auto m = load_model(testutil::llama_suite_dir() + "/qwen2_gqa4_f32_bias_sharded");
  ASSERT_LT(m->config.kv_heads(), m->config.n_head);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 3;
  gen.start_tokens({1, 2, 3, 4, 5}, opt);
  std::vector<RecordPtr> recs;
  while (RecordPtr r = gen.step()) recs.push_back(r);
  ASSERT_EQ(recs.size(), 3u);
  const Config& c = m->config;
  for (int step = 0; step < 3; ++step)
    for (int layer : {0, c.n_layer - 1})
      for (int head = 0; head < c.n_head; ++head) {
        SCOPED_TRACE("step " + std::to_string(step) + " layer " + std::to_string(layer) + " head " +
                     std::to_string(head));
        const QkvInspection in = inspect_qkv(recs, step, layer, head);
        check_consistent(in, *recs[static_cast<size_t>(step)]);
        if (HasFatalFailure()) return;
        EXPECT_EQ(in.head_dim, c.head_dim());
        // The shown K row of the newest position is the K/V head's slice.
        const StepRecord& r = *recs[static_cast<size_t>(step)];
        const float* k = r.k_row(layer, r.n_kv - 1, head / (c.n_head / c.kv_heads()));
        EXPECT_EQ(std::vector<float>(k, k + c.head_dim()),
                  std::vector<float>(in.k_row(in.n() - 1), in.k_row(in.n() - 1) + in.head_dim));
      }
}

TEST(QkvInspector, SaysWhatIsMissing) {
  const auto m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 4;
  std::vector<RecordPtr> recs = run(gen, test_prompt(8), opt);
  EXPECT_FALSE(inspect_qkv(recs, 2, -1, 0).ok);  // the mean over layers has no single query
  EXPECT_FALSE(inspect_qkv(recs, 9, 0, 0).ok);
  recs[0] = strip_detail(*recs[0], kDetailKV);  // the prompt's K/V dropped by the history budget
  const QkvInspection in = inspect_qkv(recs, 2, 0, 0);
  EXPECT_FALSE(in.ok);
  EXPECT_NE(in.missing.find("position 0"), std::string::npos) << in.missing;
  recs[2] = strip_detail(*recs[2], kDetailAttention);
  EXPECT_NE(inspect_qkv(recs, 2, 0, 0).missing.find("attention"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
