// The counters and lessons of beam search and speculative decoding
// (app/lessons/decode.*), on runs of the shipped models, against what
// they must be by construction: one batched forward per beam-search step,
// the cache's bytes from the published formula (2 x layers x width x 4 bytes
// per position) and the distinct prefixes of the beams, one target forward
// and K draft forwards per speculative iteration, and the acceptance test
// stopping at the first rejection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "app/lessons/decode.h"
#include "app/platform/assets.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/speculative_generator.h"

namespace kvscope {
namespace {

std::shared_ptr<const Model> shipped(const std::string& name) {
  return load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/" + name);
}

uint64_t bytes_per_position(const Config& c) {
  return 2ull * static_cast<uint64_t>(c.n_layer) * static_cast<uint64_t>(c.n_embd) * 4ull;
}

TEST(TeachDecode, BeamTotalsCountWhatTheSearchRan) {
  auto model = shipped("kvscope-tiny");
  const uint64_t per = bytes_per_position(model->config);
  BeamGenerator gen(model);
  BeamOptions opt;
  opt.n_beams = 4;
  opt.max_new = 10;
  opt.block = 1;  // one position per block: the cache holds one row per distinct prefix
  gen.start("Once upon a time", opt);
  std::vector<BeamRecordPtr> recs;
  while (BeamRecordPtr r = gen.step()) recs.push_back(r);
  ASSERT_GT(recs.size(), 3u);
  const int prompt = static_cast<int>(recs[0]->prompt_pieces.size());
  int64_t positions = prompt;
  for (int s = 0; s < static_cast<int>(recs.size()); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const BeamStepRecord& r = *recs[static_cast<size_t>(s)];
    const BeamTotals t = beam_totals(recs, s);
    if (s > 0) positions += static_cast<int64_t>(r.expanded.size());  // one new position per expanded beam
    EXPECT_EQ(t.step, s);
    EXPECT_EQ(t.forwards, s + 1);
    EXPECT_EQ(t.positions, positions);
    EXPECT_EQ(t.positions_step, s == 0 ? prompt : static_cast<int>(r.expanded.size()));
    EXPECT_EQ(t.prompt_tokens, prompt);
    EXPECT_EQ(t.running, static_cast<int>(r.running.size()));
    uint64_t separate = 0;
    std::set<std::vector<int>> prefixes;
    for (const Beam& b : r.expanded) {
      separate += b.tokens.size() * per;
      for (size_t n = 1; n <= b.tokens.size(); ++n) prefixes.emplace(b.tokens.begin(), b.tokens.begin() + n);
    }
    EXPECT_EQ(t.kv_separate, separate);
    EXPECT_EQ(t.kv_shared, prefixes.size() * per);
    EXPECT_NEAR(t.saved_fraction(), 1.0 - static_cast<double>(prefixes.size()) / static_cast<double>(separate / per),
                1e-12);
  }
  EXPECT_GT(beam_totals(recs, static_cast<int>(recs.size()) - 1).saved_fraction(), 0.3);
  // Out-of-range steps clamp; none before the first record.
  EXPECT_EQ(beam_totals(recs, 1000).step, static_cast<int>(recs.size()) - 1);
  EXPECT_EQ(beam_totals({}, 0).step, -1);
}

TEST(TeachDecode, SpecTotalsCountWhatTheIterationsRan) {
  auto target = shipped("kvscope-tiny");
  auto draft = shipped("kvscope-draft");
  const uint64_t per_target = bytes_per_position(target->config);
  const uint64_t per_draft = bytes_per_position(draft->config);
  SpeculativeDecoder dec(target, draft);
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = 20;
  opt.sampler.greedy = false;
  opt.sampler.temperature = 0.9f;
  opt.sampler.seed = 3;
  dec.start("Once upon a time", opt);
  std::vector<SpecIterationPtr> its;
  while (SpecIterationPtr it = dec.step()) its.push_back(it);
  ASSERT_GT(its.size(), 2u);
  const int prompt = static_cast<int>(its[0]->prompt.size());
  int generated = 0, drafted = 0, accepted = 0, tested = 0;
  for (int s = 0; s < static_cast<int>(its.size()); ++s) {
    SCOPED_TRACE("iteration " + std::to_string(s));
    const SpecIteration& it = *its[static_cast<size_t>(s)];
    generated += static_cast<int>(it.emitted.size());
    drafted += it.k;
    accepted += it.n_accepted;
    // The test reaches every accepted token and the first rejected one.
    tested += it.n_accepted + (it.n_accepted < it.k ? 1 : 0);
    const SpecTotals t = spec_totals(its, s);
    EXPECT_EQ(t.generated, generated);
    EXPECT_EQ(t.drafted, drafted);
    EXPECT_EQ(t.accepted, accepted);
    EXPECT_EQ(t.tested, tested);
    EXPECT_EQ(t.target_forwards, s + 1);   // one verify forward per iteration
    EXPECT_EQ(t.draft_forwards, drafted);  // one draft forward per drafted token
    EXPECT_EQ(t.forwards_saved, generated - (s + 1));
    EXPECT_DOUBLE_EQ(t.alpha(), static_cast<double>(accepted) / drafted);
    // Both caches hold the text so far but its newest token (not yet run).
    const uint64_t held = static_cast<uint64_t>(prompt + generated - 1);
    EXPECT_EQ(t.target_kv, held * per_target);
    EXPECT_LE(t.draft_kv, held * per_draft);
  }
  EXPECT_EQ(dec.n_generated(), generated);
  EXPECT_EQ(spec_totals(its, 1000).iteration, static_cast<int>(its.size()) - 1);
  EXPECT_EQ(spec_totals({}, 0).iteration, -1);
}

// The window names a shipped draft by its folder, however its path is spelled.
TEST(TeachDecode, ShippedModelsAreNamedByTheirFolder) {
  const std::string src = std::string(KVSCOPE_SOURCE_DIR) + "/assets";
  ASSERT_EQ(setenv("KVSCOPE_ASSETS", src.c_str(), 1), 0);
  const std::vector<std::string> names = shipped_models();
  EXPECT_NE(std::find(names.begin(), names.end(), "kvscope-draft"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "kvscope-tiny"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "PROVENANCE.md"), names.end());
  EXPECT_EQ(shipped_model_name(asset_path("models/kvscope-draft")), "kvscope-draft");
  EXPECT_EQ(shipped_model_name(src + "/models/../models/kvscope-tiny/"), "kvscope-tiny");
  EXPECT_EQ(shipped_model_name("/nonexistent/kvscope-draft"), "");
  EXPECT_EQ(shipped_model_name(src + "/models"), "");
  EXPECT_EQ(shipped_model_name(""), "");
  unsetenv("KVSCOPE_ASSETS");
}

}  // namespace
}  // namespace kvscope
