// The beam tree scene, from real beam-search records of the shipped model:
// every distinct prefix is drawn once (shared K/V once), each running beam's
// tip sits on the lane of its rank with its cumulative log-prob as label,
// pruned branches fade, and the K/V blocks are exactly the rows computed.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "render/scene/scene_beams.h"

namespace kvscope {
namespace {

std::vector<BeamRecordPtr> run_beams(const std::shared_ptr<const Model>& m, int n, int max_new) {
  BeamGenerator gen(m);
  BeamOptions opt;
  opt.n_beams = n;
  opt.max_new = max_new;
  gen.start("Once upon a time there was", opt);
  std::vector<BeamRecordPtr> recs;
  while (BeamRecordPtr r = gen.step()) recs.push_back(r);
  return recs;
}

TEST(SceneBeams, TreeOfDistinctPrefixes) {
  auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const auto recs = run_beams(m, 4, 8);
  ASSERT_GE(recs.size(), 4u);
  const int P = static_cast<int>(recs[0]->expanded.front().tokens.size());
  for (size_t count = 1; count <= recs.size(); ++count) {
    const std::vector<BeamNode> tree = beam_tree(recs, count);
    const BeamStepRecord& r = *recs[count - 1];
    // One node per distinct prefix of every beam that ever ran or finished.
    std::set<std::vector<int>> prefixes;
    for (size_t i = 0; i < count; ++i) {
      for (const Beam& b : recs[i]->running)
        for (size_t n = 1; n <= b.tokens.size(); ++n) prefixes.emplace(b.tokens.begin(), b.tokens.begin() + n);
      for (const BeamCandidate& c : recs[i]->candidates) {
        if (!c.finished) continue;
        std::vector<int> t = recs[i]->expanded[static_cast<size_t>(c.parent)].tokens;
        t.push_back(c.token);
        prefixes.insert(t);
      }
    }
    EXPECT_EQ(tree.size(), prefixes.size()) << "records " << count;
    // Running tips: on the lane of their rank, at the position after the step.
    for (size_t j = 0; j < r.running.size(); ++j) {
      const Beam& b = r.running[j];
      const auto it = std::find_if(tree.begin(), tree.end(), [&](const BeamNode& n) { return n.id == b.id; });
      ASSERT_NE(it, tree.end());
      EXPECT_TRUE(it->running_tip && it->alive);
      EXPECT_EQ(it->lane, static_cast<int>(j));
      EXPECT_EQ(it->pos, P + static_cast<int>(count) - 1);
    }
    // The prompt sits on lane 0, fed.
    for (const BeamNode& n : tree) {
      if (n.prompt) {
        EXPECT_EQ(n.lane, 0);
        EXPECT_TRUE(n.fed);
      }
    }
    // K/V stacks: one per fed node still on screen, drawn once.
    const Scene s = build_beam_scene(recs, count, m->config.n_layer);
    // Each running tip's tag names its token and its beam's summed log-probability.
    for (const BeamNode& n : tree) {
      if (!n.running_tip) continue;
      char score[32];
      std::snprintf(score, sizeof score, "%.3f", n.logprob);
      const std::string want = visible_piece(n.piece) + "  " + score;
      EXPECT_TRUE(std::any_of(s.labels.begin(), s.labels.end(), [&](const Label& l) {
        return l.kind == LabelKind::kHead && l.pos == n.pos && l.text == want;
      })) << want;
    }
    size_t fed = 0, fed_drawn = 0;
    for (const BeamNode& n : tree) {
      fed += n.fed && !n.finished ? 1 : 0;
      fed_drawn += n.fed && !n.finished && (n.alive || n.pruned_now) ? 1 : 0;
    }
    EXPECT_EQ(s.kv.size(), fed_drawn * static_cast<size_t>(m->config.n_layer));
    size_t drawn = 0;
    for (const BeamNode& n : tree) drawn += n.alive || n.pruned_now ? 1 : 0;
    EXPECT_EQ(s.tokens.size(), drawn);
    // Every computed row is drawn: the prompt, plus one per generated node fed to a forward.
    size_t expanded = 0;
    for (size_t i = 1; i < count; ++i) expanded += recs[i]->expanded.size();
    EXPECT_EQ(fed, static_cast<size_t>(P) + expanded) << "records " << count;
    EXPECT_NE(s.banner.find("BEAM SEARCH"), std::string::npos);
  }
}

TEST(SceneBeams, PrunedInTheShownStepFadesWithTheAnimation) {
  auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const auto recs = run_beams(m, 3, 10);
  for (size_t count = 2; count <= recs.size(); ++count) {
    const std::vector<BeamNode> tree = beam_tree(recs, count);
    int pruned = -1;
    for (size_t i = 0; i < tree.size(); ++i)
      if (tree[i].pruned_now) pruned = static_cast<int>(i);
    if (pruned < 0) continue;
    const Scene start = build_beam_scene(recs, count, m->config.n_layer, 0.0f);
    const Scene end = build_beam_scene(recs, count, m->config.n_layer, 1.0f);
    // The drawn blocks follow the tree's order, skipping what is gone.
    size_t k = 0;
    for (int i = 0; i < pruned; ++i) k += tree[static_cast<size_t>(i)].alive || tree[static_cast<size_t>(i)].pruned_now;
    ASSERT_LT(k, start.tokens.size());
    EXPECT_GT(start.tokens[k].colour.a, 0.9f);
    EXPECT_LT(end.tokens[k].colour.a, 0.2f);
    // Its label goes with it; the living lanes keep theirs, at full strength.
    // (the label with its token's place and opacity; a beam's tip and a
    // finished hypothesis have theirs in the tag with their score).
    auto has_label = [&](const Scene& s, const BlockInstance& t) {
      return std::any_of(s.labels.begin(), s.labels.end(), [&](const Label& l) {
        return (l.kind == LabelKind::kToken || l.kind == LabelKind::kHead) && l.pos == t.pos &&
               std::fabs(l.anchor.z - t.center.z) < 1e-4f && std::fabs(l.colour.a - t.colour.a) < 1e-4f;
      });
    };
    EXPECT_TRUE(has_label(start, start.tokens[k]));
    EXPECT_FALSE(has_label(end, end.tokens[k]));
    for (const BlockInstance& t : end.tokens) {
      if (t.colour.a > 0.9f) {
        EXPECT_TRUE(has_label(end, t)) << "position " << t.pos;
      }
    }
    return;
  }
  // Greedy beam search is deterministic: 3 beams over 10 steps on the
  // shipped model keep 3 of 6 candidates a step, and some step keeps none
  // of a beam's children (beam_tree marks it pruned_now).
  FAIL() << "no step of the deterministic 3-beam run pruned a beam";
}

// Predict mode (ViewOptions::hide_newest): the tokens the shown step chose
// are "?" blocks with no score; nothing else in the scene names them or
// their cumulative log-probability. Without it their pieces and scores show.
TEST(SceneBeams, PredictModeHidesTheTokensTheShownStepChose) {
  auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const auto recs = run_beams(m, 4, 6);
  ASSERT_GE(recs.size(), 3u);
  for (size_t count = 2; count <= recs.size(); ++count) {
    const std::vector<BeamNode> tree = beam_tree(recs, count);
    std::vector<std::string> scores;
    int newest = -1;
    for (const BeamNode& n : tree)
      if (!n.prompt && n.alive && n.born == static_cast<int>(count) - 1) {
        char sc[48];  // the tag's score as the scene writes it
        std::snprintf(sc, sizeof(sc), n.finished ? "done %.3f" : "%.3f", n.finished ? n.score : n.logprob);
        scores.push_back(sc);
        newest = std::max(newest, n.pos);
      }
    ASSERT_FALSE(scores.empty()) << count;
    ViewOptions v;
    for (const bool hide : {false, true}) {
      v.hide_newest = hide;
      const Scene s = build_beam_scene(recs, count, m->config.n_layer, 1.0f, v);
      int named = 0, guesses = 0;
      for (const Label& l : s.labels) {
        for (const std::string& sc : scores) named += l.text.find(sc) != std::string::npos ? 1 : 0;
        if (l.pos == newest && (l.kind == LabelKind::kToken || l.kind == LabelKind::kHead)) {
          if (hide) {
            EXPECT_EQ(l.text, "?") << count;
          }
          ++guesses;
        }
      }
      EXPECT_GT(guesses, 0) << count;
      if (hide) {
        EXPECT_EQ(named, 0) << count;
      } else {
        EXPECT_GT(named, 0) << count;
      }
    }
  }
}

}  // namespace
}  // namespace kvscope
