// Grouped-query attention in the scene, from the real engine's records of a
// random Qwen2-shaped checkpoint (8 query heads sharing 2 K/V heads): each
// layer's KV block is two sub-blocks, a chosen query head's beams land on the
// K/V head it reads, and picking names the sub-block. GPT-2-shaped records
// keep one block per layer.
#include <gtest/gtest.h>

#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "numpy_ref_util.h"
#include "render/scene/scene.h"
#include "scene_fixtures.h"

namespace kvscope {
namespace {

std::vector<RecordPtr> gqa_records() {
  std::shared_ptr<const Model> m = load_model(testutil::llama_suite_dir() + "/qwen2_gqa4_f32_bias_sharded");
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 3;
  opt.sampler.greedy = true;
  gen.start_tokens({1, 2, 3, 4, 5}, opt);
  std::vector<RecordPtr> out;
  while (RecordPtr r = gen.step()) out.push_back(r);
  return out;
}

TEST(SceneGqa, KvHeadsAreSubBlocksAndBeamsLandOnTheSharedOne) {
  const std::vector<RecordPtr> recs = gqa_records();
  ASSERT_EQ(recs.size(), 3u);
  const StepRecord& last = *recs.back();
  ASSERT_EQ(last.n_head, 8);
  ASSERT_EQ(last.n_kv_head, 2);
  ViewOptions view;
  view.layer = 1;
  view.head = 5;  // reads K/V head 5 / (8 / 2) = 1
  const Layout L;
  const Scene s = build_scene(recs, recs.size(), view, 1.0f, L);
  const int n_pos = last.seq_len + 1, n_layer = last.n_layer;
  ASSERT_EQ(s.kv.size(), static_cast<size_t>(n_pos) * n_layer * 2);
  for (size_t i = 0; i < s.kv.size(); i += 2) {
    EXPECT_EQ(s.kv[i].kv_head, 0);
    EXPECT_EQ(s.kv[i + 1].kv_head, 1);
    EXPECT_LT(s.kv[i].center.x, s.kv[i + 1].center.x);
    // The K/V head that query head 5 does not read is dimmed.
    EXPECT_LE(s.kv[i].colour.r, s.kv[i + 1].colour.r);
  }
  ASSERT_FALSE(s.rays.empty());
  for (const RayInstance& b : s.rays) {
    EXPECT_FLOAT_EQ(b.to.x, L.ray_target(b.key, view.layer, n_layer).x + L.kv_head_dx(1, 2));
  }
  // A ray straight down onto sub-block 0 of position 2, layer 0.
  const BlockInstance* target = nullptr;
  for (const BlockInstance& b : s.kv)
    if (b.pos == 2 && b.layer == 0 && b.kv_head == 0) target = &b;
  ASSERT_NE(target, nullptr);
  const Pick p = pick(s, target->center + glm::vec3(0, 0, 5), glm::vec3(0, 0, -1));
  EXPECT_EQ(p.kind, Pick::kKv);
  EXPECT_EQ(p.kv_head, 0);
  EXPECT_EQ(p.pos, 2);
}

TEST(SceneGqa, MultiHeadAttentionKeepsOneBlockPerLayer) {
  const std::vector<RecordPtr> h = scene_fixtures::make_history(5, {CacheMode::kKV});
  const Scene s = build_scene(h, h.size(), ViewOptions());
  for (const BlockInstance& b : s.kv) EXPECT_EQ(b.kv_head, -1);
}

}  // namespace
}  // namespace kvscope
