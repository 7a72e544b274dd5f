// The speculative-decoding scene, from real iterations of the shipped pair:
// ghosts in the draft colour appear one by one, the verify pass lights the
// K/V of every verified position at once, then accepted ghosts solidify and
// the K/V of rejected positions roll back, as the iteration's counters say.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "decode_ref_util.h"
#include "model/arch/model.h"
#include "model/decoding/speculative_generator.h"
#include "render/scene/scene_spec.h"

namespace kvscope {
namespace {

size_t count_state(const Scene& s, KvState st) {
  size_t n = 0;
  for (const BlockInstance& b : s.kv) n += b.state == st ? 1 : 0;
  return n;
}

// Every iteration of the shipped pair, greedy, K = 4, from "Once upon a time".
std::vector<SpecIterationPtr> greedy_pair_iterations(int max_new) {
  const std::string root = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/";
  SpeculativeDecoder d(load_model(root + "kvscope-tiny"), load_model(root + "kvscope-draft"));
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = max_new;
  d.start("Once upon a time", opt);
  std::vector<SpecIterationPtr> its;
  while (SpecIterationPtr it = d.step()) its.push_back(it);
  return its;
}

TEST(SceneSpec, StagesFollowTheIteration) {
  const std::string root = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/";
  auto target = load_model(root + "kvscope-tiny");
  auto draft = load_model(root + "kvscope-draft");
  SpeculativeDecoder d(target, draft);
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = 40;
  opt.sampler.greedy = false;
  opt.sampler.seed = 11;
  d.start("Once upon a time", opt);
  std::vector<SpecIterationPtr> its;
  while (SpecIterationPtr it = d.step()) its.push_back(it);
  ASSERT_GE(its.size(), 3u);
  const size_t NL = static_cast<size_t>(target->config.n_layer);
  int rejections = 0;
  for (size_t c = 1; c <= its.size(); ++c) {
    const SpecIteration& it = *its[c - 1];
    const size_t k = static_cast<size_t>(it.k);
    // Drafting: some ghosts, nothing verified yet.
    const Scene drafting = build_spec_scene(its, c, 0.2f);
    EXPECT_EQ(count_state(drafting, KvState::kNew), 0u);
    size_t ghosts = 0;
    for (const BlockInstance& b : drafting.tokens) ghosts += glm::vec3(b.colour) == kDraftColour ? 1 : 0;
    EXPECT_GE(ghosts, k > 0 ? 1u : 0u);
    EXPECT_LE(ghosts, k);
    EXPECT_EQ(drafting.drafts, ghosts > 0);  // the legend's draft-colour entry: on screen
    EXPECT_FALSE(drafting.rolled_back);
    // Verifying: k + 1 positions computed at once.
    const Scene verify = build_spec_scene(its, c, 0.5f);
    EXPECT_EQ(count_state(verify, KvState::kNew), (k + 1) * NL) << "iteration " << it.index;
    // Each drafted token's tag names the token over its p and q (one box: no
    // separate label it could hide), with the decoder's own numbers.
    for (size_t i = 0; i < k; ++i) {
      const DraftVerdict& dv = it.drafted[i];
      char pq[64];
      std::snprintf(pq, sizeof pq, "\np %.2f\nq %.2f", dv.p, dv.q);
      const std::string want = visible_piece(it.drafted_pieces[i]) + pq;
      const int pos = it.first + static_cast<int>(i);
      int tags = 0, labels = 0;
      for (const Label& l : verify.labels) {
        tags += l.kind == LabelKind::kHead && l.pos == pos && l.text == want;
        labels += l.kind == LabelKind::kToken && l.pos == pos;
      }
      EXPECT_EQ(tags, 1) << want;
      EXPECT_EQ(labels, 0) << "position " << pos;
    }
    // Resolved: the rejected positions' K/V roll back; the rest stays.
    const Scene done = build_spec_scene(its, c, 1.0f);
    EXPECT_EQ(count_state(done, KvState::kNewDropped), static_cast<size_t>(it.target_rolled_back) * NL);
    EXPECT_EQ(count_state(done, KvState::kNew) + count_state(done, KvState::kNewDropped), (k + 1) * NL);
    // The legend's rollback entry: exactly when a drafted token was rejected.
    EXPECT_EQ(done.rolled_back, it.n_accepted < it.k) << "iteration " << it.index;
    rejections += it.bonus ? 0 : 1;
    EXPECT_NE(done.banner.find("SPECULATIVE"), std::string::npos);
  }
  EXPECT_GT(rejections, 0);
}

// Predict mode (ViewOptions::hide_newest): the shown iteration waits at its
// draft stage, so no label names the target's p, a verdict or the token it
// emits, and the banner does not say how many were accepted, at any phase.
TEST(SceneSpec, PredictModeHoldsTheIterationAtItsDraft) {
  const std::vector<SpecIterationPtr> its = greedy_pair_iterations(12);
  ASSERT_GE(its.size(), 2u);
  for (size_t c = 1; c <= its.size(); ++c) {
    const SpecIteration& it = *its[c - 1];
    const int emitted_at = it.first + it.n_accepted;  // the replacement or bonus token
    const std::string emitted_text = visible_piece(it.next_piece);
    for (const float anim : {0.2f, 0.6f, 1.0f}) {
      ViewOptions v;
      v.hide_newest = true;
      const Scene s = build_spec_scene(its, c, anim, v);
      for (const Label& l : s.labels) {
        EXPECT_EQ(l.text.find("p "), std::string::npos) << l.text;  // the target's probability
        EXPECT_EQ(l.text.find("\nok"), std::string::npos) << l.text;
        EXPECT_EQ(l.text.find("\nno"), std::string::npos) << l.text;
        EXPECT_FALSE(l.pos == emitted_at && l.text == emitted_text) << l.text;  // the token the target emits
      }
      EXPECT_EQ(s.banner_sub.find("accepted"), std::string::npos) << s.banner_sub;
      v.hide_newest = false;
      const Scene shown = build_spec_scene(its, c, 1.0f, v);
      int emitted = 0;
      for (const Label& l : shown.labels) emitted += l.pos == emitted_at && l.text == emitted_text ? 1 : 0;
      EXPECT_EQ(emitted, 1);
      EXPECT_NE(shown.banner_sub.find("accepted"), std::string::npos) << shown.banner_sub;
    }
  }
}

// Once the verdict is in, the banner names the token the target emits (the
// replacement drawn from max(0, p - q), or the bonus token): the replacement
// drops in under the rejected token's tag, which covers its own label.
TEST(SceneSpec, TheBannerNamesTheReplacementOrBonusToken) {
  const std::vector<SpecIterationPtr> its = greedy_pair_iterations(16);
  int replaced = 0;
  for (size_t c = 1; c <= its.size(); ++c) {
    const SpecIteration& it = *its[c - 1];
    const std::string names = (it.bonus ? "bonus token " : "replaced by ") + visible_piece(it.next_piece);
    EXPECT_EQ(build_spec_scene(its, c, 0.3f, ViewOptions{}).banner_sub.find(names), std::string::npos);
    const std::string sub = build_spec_scene(its, c, 1.0f, ViewOptions{}).banner_sub;
    EXPECT_NE(sub.find(names), std::string::npos) << sub;
    replaced += it.bonus ? 0 : 1;
  }
  EXPECT_GT(replaced, 0);
}

// Nothing drafted: a draft whose context (4 positions, as --ctx 4 loads it)
// is shorter than the prompt drafts nothing, and the banner says so while the
// iteration runs instead of "the draft proposes 0 tokens"; with nothing
// drafted so far the acceptance rate is undefined: "n/a", not 0.00.
TEST(SceneSpec, NothingDraftedSaysSoAndHasNoAcceptanceRate) {
  const std::string suite = testutil::llama_suite_dir();
  auto target = load_model(suite + "/mistral_gqa4_bf16_untied_window");
  LoadControl short_ctx;
  short_ctx.context = 4;
  auto draft = load_model(suite + "/llama_gqa1_f32_tied_single", short_ctx);
  ASSERT_EQ(draft->config.n_positions, 4);
  const std::vector<int> prompt =
      testutil::read_json(suite + "/mistral_gqa4_bf16_untied_window/ref.json").at("prompt").get<std::vector<int>>();
  ASSERT_GT(prompt.size(), 4u);
  SpeculativeDecoder d(target, draft);
  SpecOptions opt;
  opt.max_new = 3;
  d.start_tokens(prompt, opt);
  std::vector<SpecIterationPtr> its;
  while (SpecIterationPtr it = d.step()) its.push_back(it);
  ASSERT_FALSE(its.empty());
  ASSERT_TRUE(its[0]->draft_context_full);
  ASSERT_EQ(its[0]->drafted_total, 0);
  for (float t : {0.2f, 0.5f}) {
    const Scene running = build_spec_scene(its, 1, t);
    EXPECT_NE(running.banner_sub.find("the draft's context is shorter than the text"), std::string::npos)
        << running.banner_sub;
  }
  const Scene done = build_spec_scene(its, 1, 1.0f);
  EXPECT_NE(done.banner_sub.find("\xCE\xB1 = n/a"), std::string::npos) << done.banner_sub;
  EXPECT_EQ(done.banner_sub.find("0.00"), std::string::npos) << done.banner_sub;
}

}  // namespace
}  // namespace kvscope
