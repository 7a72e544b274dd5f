// The needle-in-a-haystack probe: where make_needle_probe puts the needle and
// finds the answer, and run_needle's probabilities, predictions and held
// shares against the independent float64 references of each rule
// (tools/numpy_ref.py evref for TOVA and H2O, tools/numpy_ref_snapkv.py for
// SnapKV, tools/numpy_ref.py ref for the dense cache): the reference decodes
// greedily from a prompt clear of ties, and the probe feeds exactly those
// tokens as its answer, so each answer token's probability is the
// reference's step probability and the held sets after the prefill are its first step's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/needle.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;

struct NeedleCase {
  const char* ckpt;
  bool llama;
  KVEvict rule;
  int budget;
};

json reference(const NeedleCase& nc, const std::string& dir, const testutil::TempDir& tmp) {
  const std::string out = " --n-prompt 12 --steps 3 --out " + (tmp / "ref.json");
  if (nc.rule == KVEvict::kSnapKV) {
    testutil::run_numpy_ref("snapref --model " + dir + (nc.llama ? " --llama" : "") + " --kv-budget " +
                                std::to_string(nc.budget) + " --kv-snap-window 2 --kv-snap-pool 3" + out,
                            tmp / "ref.log", std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_ref_snapkv.py");
  } else {
    const std::string script = nc.llama ? "/tools/numpy_ref_llama.py" : "/tools/numpy_ref.py";
    testutil::run_numpy_ref("evref --model " + dir + " --kv-evict " + to_string(nc.rule) + " --kv-budget " +
                                std::to_string(nc.budget) + out,
                            tmp / "ref.log", std::string(KVSCOPE_SOURCE_DIR) + script);
  }
  return testutil::read_json(tmp / "ref.json");
}

// The share of holders whose positions include all of [first, end), from the reference's held sets.
double ref_share(const json& step, bool per_head, int first, int end) {
  int holders = 0, holding = 0;
  const auto count = [&](std::vector<int> h) {
    std::sort(h.begin(), h.end());
    bool all = true;
    for (int p = first; p < end; ++p) all = all && std::binary_search(h.begin(), h.end(), p);
    ++holders;
    holding += all;
  };
  if (per_head) {
    for (const auto& layer : step.at("held_by_head"))
      for (const auto& h : layer) count(h.get<std::vector<int>>());
  } else {
    for (const auto& h : step.at("held")) count(h.get<std::vector<int>>());
  }
  return static_cast<double>(holding) / holders;
}

class NeedleP : public ::testing::TestWithParam<NeedleCase> {};

TEST_P(NeedleP, MatchesNumpyReference) {
  const NeedleCase nc = GetParam();
  testutil::TempDir tmp("needle");
  const std::string dir = nc.llama ? testutil::llama_suite_dir() + "/" + nc.ckpt : testutil::suite_checkpoint(nc.ckpt);
  const json ref = reference(nc, dir, tmp);
  const std::vector<int> tokens = ref.at("tokens").get<std::vector<int>>();
  NeedleProbe p;
  p.prompt = ref.at("prompt").get<std::vector<int>>();
  const int L = static_cast<int>(p.prompt.size());
  p.answer.assign(tokens.begin() + L, tokens.begin() + L + 3);  // the reference's greedy tokens, fed back
  p.needle_first = 2;  // a "needle" of prompt positions [2, 6), its "answer" the first two of them
  p.needle_end = 6;
  p.answer_first = 0;
  std::shared_ptr<const Model> m = load_model(dir);
  Engine engine(*m);
  KVLayout l;
  l.evict = nc.rule;
  l.budget = nc.budget;
  if (nc.rule == KVEvict::kSnapKV) l.snap_window = 2, l.snap_pool = 3;
  KVCache cache(l.on_model(m->config));
  const NeedleOutcome o = run_needle(engine, cache, p);
  ASSERT_EQ(o.answer_prob.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const json& st = ref.at("steps").at(i);
    EXPECT_NEAR(o.answer_prob[i], st.at("prob").get<double>(), kTol) << "answer token " << i;
    EXPECT_EQ(o.predicted[i], st.at("token").get<int>()) << "answer token " << i;
  }
  EXPECT_TRUE(o.correct);
  const bool per_head = nc.rule == KVEvict::kSnapKV;
  const json& first = ref.at("steps").at(0);
  double needle = 0;
  for (int q = 2; q < 6; ++q) needle += ref_share(first, per_head, q, q + 1) / 4;
  double answer = 0;
  for (int q = 2; q < 5; ++q) answer += ref_share(first, per_head, q, q + 1) / 3;  // the 3 answer positions
  EXPECT_NEAR(o.answer_held, answer, 1e-12);
  EXPECT_NEAR(o.needle_held, needle, 1e-12);
  EXPECT_EQ(cache.bytes(), 0u);  // emptied after
}

INSTANTIATE_TEST_SUITE_P(Rules, NeedleP,
                         ::testing::Values(NeedleCase{"l2h2d32_f32_prefix_buffers", false, KVEvict::kTova, 5},
                                           NeedleCase{"l2h2d32_f32_prefix_buffers", false, KVEvict::kH2O, 6},
                                           NeedleCase{"l2h2d32_f32_prefix_buffers", false, KVEvict::kSnapKV, 6},
                                           NeedleCase{"llama_gqa3_bf16_untied_sharded_llama3", true, KVEvict::kSnapKV,
                                                      7}));

TEST(Needle, ProbePlacesTheNeedleAtSentenceBoundariesAndFindsTheAnswer) {
  auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const Tokenizer& tok = m->tokenizer;
  NeedleText t;
  t.haystack = {"Pip was a mouse.", " He lived in a bakery.", " The bread was warm.", " He liked crumbs.",
                " One night he found a cake."};
  t.needle = " There was also a kind robot named Zubrik.";
  t.question = "\nOne day, Z";
  t.answer = "ubrik";
  const auto ids = [&](const std::string& s) { return tok.encode(s); };
  size_t hay = 0;
  for (const std::string& s : t.haystack) hay += ids(s).size();
  const size_t whole = hay + ids(t.needle).size() + ids(t.question).size();
  for (double depth : {0.0, 0.5, 1.0}) {
    const NeedleProbe p = make_needle_probe(tok, t, depth, static_cast<int>(whole));
    // The prompt decodes to the texts in order, the needle between two sentences.
    std::vector<int> before(p.prompt.begin(), p.prompt.begin() + p.needle_first);
    EXPECT_EQ(tok.decode(std::vector<int>(p.prompt.begin() + p.needle_first, p.prompt.begin() + p.needle_end)),
              t.needle);
    EXPECT_EQ(p.prompt.size(), whole);
    EXPECT_EQ(tok.decode(p.answer), t.answer);
    EXPECT_EQ(std::vector<int>(p.prompt.begin() + p.needle_first + p.answer_first,
                               p.prompt.begin() + p.needle_first + p.answer_first + static_cast<long>(p.answer.size())),
              p.answer);
    EXPECT_NEAR(p.depth, static_cast<double>(before.size()) / static_cast<double>(hay), 1e-12);
    if (depth == 0.0) {
      EXPECT_EQ(p.needle_first, 0);
    }
    if (depth == 1.0) {
      EXPECT_EQ(p.needle_end + static_cast<int>(ids(t.question).size()), static_cast<int>(whole));
    }
  }
  // A shorter prompt keeps the haystack's first sentences.
  const NeedleProbe cut = make_needle_probe(tok, t, 1.0, static_cast<int>(whole - ids(t.haystack.back()).size()));
  EXPECT_EQ(cut.prompt.size(), whole - ids(t.haystack.back()).size());
  // Refused: an answer not on the needle's token boundaries, no room, a depth outside 0..1.
  NeedleText bad = t;
  bad.answer = "brik";
  EXPECT_THROW(make_needle_probe(tok, bad, 0.5, 64), Error);
  bad.answer = "Quillon";
  EXPECT_THROW(make_needle_probe(tok, bad, 0.5, 64), Error);
  EXPECT_THROW(make_needle_probe(tok, t, 0.5, 4), Error);
  EXPECT_THROW(make_needle_probe(tok, t, 1.5, 64), Error);
}

TEST(Needle, CliRefusesWhatItCannotCompare) {
  testutil::TempDir tmp("needle-cli");
  const std::string hay = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny/val/stories.txt";
  std::string out;
  EXPECT_EQ(testutil::run_kvscope("eval --needle --file " + hay + " --kv-window 8", out, tmp), 2) << out;
  EXPECT_NE(out.find("--needle compares its own layouts"), std::string::npos) << out;
  EXPECT_EQ(testutil::run_kvscope("eval --needle --file " + hay + " --budgets 64", out, tmp), 2) << out;
  EXPECT_NE(out.find("--budgets 64: expected fewer positions than the prompt's 64"), std::string::npos) << out;
  EXPECT_EQ(testutil::run_kvscope("eval --file " + hay + " --budgets 8", out, tmp), 2) << out;  // needs --needle
  EXPECT_EQ(testutil::run_kvscope("eval --needle --file " + hay + " --needle-answer brik", out, tmp), 1) << out;
  EXPECT_NE(out.find("is not whole tokens of the needle"), std::string::npos) << out;
  // One JSON record per (depth, layout): 4 placements x (dense + 5 layouts x 3 budgets).
  ASSERT_EQ(testutil::run_kvscope("eval --needle --file " + hay + " --json", out, tmp), 0) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4 * 16) << out;
}

}  // namespace
}  // namespace kvscope
