// Eviction by score (TOVA, H2O) in the window, from real generations on test
// checkpoints: each layer's stack shows the positions that layer holds
// (StepRecord::kv_held_by_layer), a block dropped by a step sinks away on that
// step, and the score bars and the records' scores are the attention weights
// the records carry, averaged over the query heads (TOVA: the forward's last
// query; H2O: summed over every query so far), recomputed here independently
// of the cache's bookkeeping.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "numpy_ref_util.h"
#include "render/scene/scene.h"
#include "render/scene/scene_kv.h"

namespace kvscope {
namespace {

constexpr const char* kCkpt = "l2h2d32_f32_prefix_buffers";  // GPT-2: 2 layers, 2 heads
constexpr const char* kGqa = "llama_gqa3_bf16_untied_sharded_llama3";

std::vector<RecordPtr> generate(const std::string& dir, KVEvict rule, int budget, int steps, int block = 0) {
  Generator gen(load_model(dir));
  GenerateOptions opt;
  opt.max_new = steps + 1;
  opt.sampler.greedy = true;
  opt.ignore_eos = true;
  opt.kv.evict = rule;
  opt.kv.budget = budget;
  opt.kv.block = block;
  gen.start_tokens({1, 2, 3, 4, 5, 6, 7}, opt);
  std::vector<RecordPtr> out;
  while (RecordPtr r = gen.step()) out.push_back(r);
  return out;
}

bool holds(const StepRecord& r, int layer, int pos) {
  const std::vector<int>& h = r.kv_held_by_layer.at(static_cast<size_t>(layer));
  return std::binary_search(h.begin(), h.end(), pos);
}

// The KV block of (pos, layer) in the scene (single-position columns).
const BlockInstance* kv_block(const Scene& s, int pos, int layer) {
  for (const BlockInstance& b : s.kv)
    if (b.pos == pos && b.span == 1 && b.layer == layer) return &b;
  return nullptr;
}

// The filled score bar under (pos, layer), or null.
const BlockInstance* score_bar(const Scene& s, int pos, int layer) {
  for (const BlockInstance& b : s.cache_marks)
    if (b.mark == CacheMark::kScore && b.pos == pos && b.layer == layer && b.colour.a > 0) return &b;
  return nullptr;
}

// Scores by the rules' definition from the attention the records carry:
// acc[l][p] = sum over every query row so far of the head-averaged weight on
// key p; last[l][p] = the newest query row's head-averaged weight.
struct Recomputed {
  std::vector<std::map<int, double>> acc, last;
};

void add_record(Recomputed& rc, const StepRecord& r) {
  rc.acc.resize(static_cast<size_t>(r.n_layer));
  rc.last.assign(static_cast<size_t>(r.n_layer), {});
  for (int l = 0; l < r.n_layer; ++l)
    for (int row = 0; row < r.n_rows; ++row)
      for (int p = 0; p < r.seq_len; ++p) {
        double w = 0;
        for (int h = 0; h < r.n_head; ++h) w += r.attention(l, h, row, p);
        w /= r.n_head;
        rc.acc[static_cast<size_t>(l)][p] += w;
        if (row == r.n_rows - 1) rc.last[static_cast<size_t>(l)][p] = w;
      }
}

TEST(SceneEvict, EachLayerStackShowsItsOwnSurvivors) {
  // (budgets at which this checkpoint's two layers come to disagree)
  for (const auto& [rule, budget] : {std::pair<KVEvict, int>{KVEvict::kTova, 3}, {KVEvict::kH2O, 5}}) {
    const std::vector<RecordPtr> recs = generate(testutil::suite_checkpoint(kCkpt), rule, budget, 8);
    ASSERT_GE(recs.size(), 9u);
    int layers_differ = 0, dropped_now = 0;
    for (size_t i = 0; i < recs.size(); ++i) {
      const StepRecord& r = *recs[i];
      ASSERT_EQ(r.kv_held_by_layer.size(), 2u);
      const Scene s = build_scene(recs, i + 1, ViewOptions(), 1.0f);
      for (int p = 0; p < r.seq_len; ++p) {
        layers_differ += holds(r, 0, p) != holds(r, 1, p);
        for (int l = 0; l < 2; ++l) {
          const std::string where = std::string(to_string(rule)) + " record " + std::to_string(i) + " position " +
                                    std::to_string(p) + " layer " + std::to_string(l);
          const BlockInstance* b = kv_block(s, p, l);
          ASSERT_NE(b, nullptr) << where;
          EXPECT_EQ(is_held(b->state), holds(r, l, p)) << where;
          // Dropped by this forward: held by the layer before it, or computed by it.
          const bool had = (i > 0 && p < recs[i - 1]->seq_len && holds(*recs[i - 1], l, p)) || p >= r.first;
          const KvState gone = had ? KvState::kEvicting : KvState::kEvicted;
          if (!holds(r, l, p)) {
            EXPECT_EQ(b->state, gone) << where;
          }
          if (!holds(r, l, p) && had) {
            ++dropped_now;
            // It sinks away as the window's evictions do: lower and shorter than when the step began.
            const Scene s0 = build_scene(recs, i + 1, ViewOptions(), 0.0f);
            const BlockInstance* b0 = kv_block(s0, p, l);
            ASSERT_NE(b0, nullptr) << where;
            EXPECT_LT(b->center.y, b0->center.y) << where;
            EXPECT_LT(b->size.y, b0->size.y) << where;
          }
        }
      }
    }
    // The generation must exercise the point: some position held by one layer and not the other.
    EXPECT_GT(layers_differ, 0) << to_string(rule);
    EXPECT_GT(dropped_now, 0) << to_string(rule);
  }
}

void check_scores(const std::string& dir, KVEvict rule, int budget, int block) {
  const std::vector<RecordPtr> recs = generate(dir, rule, budget, 8, block);
  Recomputed rc;
  int dropped = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    const StepRecord& r = *recs[i];
    add_record(rc, r);
    const auto& want = rule == KVEvict::kTova ? rc.last : rc.acc;
    ASSERT_EQ(r.kv_score_by_layer.size(), static_cast<size_t>(r.n_layer));
    ASSERT_EQ(r.kv_dropped_by_layer.size(), static_cast<size_t>(r.n_layer));
    const Scene s = build_scene(recs, i + 1, ViewOptions(), 1.0f);
    for (int l = 0; l < r.n_layer; ++l) {
      const std::string where =
          dir + " " + to_string(rule) + " record " + std::to_string(i) + " layer " + std::to_string(l);
      const std::vector<int>& held = r.kv_held_by_layer[static_cast<size_t>(l)];
      const std::vector<double>& sc = r.kv_score_by_layer[static_cast<size_t>(l)];
      ASSERT_EQ(sc.size(), held.size()) << where;
      double top = 0;
      for (size_t k = 0; k < held.size(); ++k) {
        EXPECT_NEAR(sc[k], want[static_cast<size_t>(l)].at(held[k]), 1e-5) << where << " held " << held[k];
        top = std::max(top, want[static_cast<size_t>(l)].at(held[k]));
      }
      // The bar under each held block is its score against the layer's highest.
      for (int p : held) {
        const BlockInstance* bar = score_bar(s, p, l);
        ASSERT_NE(bar, nullptr) << where << " position " << p;
        const double w = want[static_cast<size_t>(l)].at(p);
        EXPECT_NEAR(bar->score, w, 1e-5) << where;
        EXPECT_NEAR(bar->size.x, std::max(0.02, Layout().block_w * w / top), 1e-4) << where;
      }
      // What this forward dropped, with the score it lost with; the hover reads it back from the scene's state.
      const SequenceState seq = build_sequence(recs, i + 1);
      for (const KVDrop& d : r.kv_dropped_by_layer[static_cast<size_t>(l)]) {
        ++dropped;
        EXPECT_FALSE(std::binary_search(held.begin(), held.end(), d.pos)) << where;
        EXPECT_NEAR(d.score, want[static_cast<size_t>(l)].at(d.pos), 1e-5) << where << " dropped " << d.pos;
        EXPECT_EQ(seq.dropped_at_step(d.pos, l), r.index) << where;
        EXPECT_NEAR(seq.dropped_with_score(d.pos, l), d.score, 1e-12) << where;
        // A dropped block's bar, in the evicted colour, shows the score that lost.
        const BlockInstance* bar = score_bar(s, d.pos, l);
        ASSERT_NE(bar, nullptr) << where << " dropped " << d.pos;
        EXPECT_NEAR(bar->score, d.score, 1e-12) << where;
      }
    }
  }
  EXPECT_GT(dropped, 0) << dir;
}

TEST(SceneEvict, ScoresAreTheHeadAveragedAttentionTheRecordsCarry) {
  check_scores(testutil::suite_checkpoint(kCkpt), KVEvict::kTova, 4, 0);
  check_scores(testutil::suite_checkpoint(kCkpt), KVEvict::kH2O, 4, 2);
  // Grouped-query attention: the average is over every query head.
  check_scores(testutil::llama_suite_dir() + "/" + kGqa, KVEvict::kH2O, 5, 0);
  check_scores(testutil::llama_suite_dir() + "/" + kGqa, KVEvict::kTova, 5, 4);
}

TEST(SceneEvict, CaptionNamesTheRuleAndTheBudget) {
  for (KVEvict rule : {KVEvict::kTova, KVEvict::kH2O}) {
    const std::vector<RecordPtr> recs = generate(testutil::suite_checkpoint(kCkpt), rule, 4, 2);
    const Scene s = build_scene(recs, recs.size(), ViewOptions(), 1.0f);
    bool found = false;
    for (const Label& lab : s.labels)
      if (lab.kind == LabelKind::kCacheMark)
        found |= lab.text.find(rule == KVEvict::kTova ? "TOVA" : "H2O") != std::string::npos &&
                 lab.text.find(rule == KVEvict::kTova ? "keeps the 4 keys" : "keeps its 2 newest + 2 heaviest") !=
                     std::string::npos;
    EXPECT_TRUE(found) << to_string(rule);
    // The banner says what each layer kept and how many rows this forward dropped.
    EXPECT_NE(s.banner_sub.find("each layer keeps 4"), std::string::npos) << s.banner_sub;
    EXPECT_NE(s.banner_sub.find("dropped " + std::to_string(recs.back()->evicted)), std::string::npos) << s.banner_sub;
  }
}

// SnapKV compresses the prompt once, per K/V head: the prefill's banner says what each head kept, a decode
// step's that nothing is dropped (and its record drops nothing).
TEST(SceneEvict, SnapKVBannerSaysThePromptIsCompressedOnce) {
  const std::vector<RecordPtr> recs = generate(testutil::suite_checkpoint(kCkpt), KVEvict::kSnapKV, 4, 2);
  ASSERT_GE(recs.size(), 2u);
  const Scene prefill = build_scene(recs, 1, ViewOptions(), 1.0f);
  EXPECT_NE(prefill.banner_sub.find("each K/V head keeps 4 (SnapKV)"), std::string::npos) << prefill.banner_sub;
  const Scene decode = build_scene(recs, recs.size(), ViewOptions(), 1.0f);
  EXPECT_NE(decode.banner_sub.find("decoding drops nothing"), std::string::npos) << decode.banner_sub;
  EXPECT_EQ(recs.back()->evicted, 0);
}

}  // namespace
}  // namespace kvscope
