// Beam search: the bookkeeping on hand-made log-prob tables, then on real
// random checkpoints against the independent float64 NumPy beam search
// (tools/decode_ref.py, Hugging Face conventions): the best sequence and its
// score within 1e-4, every step's running beams, the finished hypotheses,
// and every beam's cumulative log-prob against a no-cache reference forward
// of its tokens. --beams 1 gives greedy's tokens.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "decode_ref_util.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/beam_search.h"
#include "model/decoding/generator.h"
#include "model/kv/kv_cache.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;

std::vector<double> logp(std::vector<double> probs) {
  for (double& p : probs) p = std::log(p);
  return probs;
}

TEST(BeamSearchUnit, KeepsTwoNCandidatesAndFinishesOnEos) {
  // V = 4, EOS = 3, N = 2.
  BeamSettings s;
  s.n_beams = 2;
  s.eos = {3};
  s.max_length = 10;
  BeamSearch bs(s, {7, 7});
  ASSERT_EQ(bs.running().size(), 1u);
  // Step 1 (one beam): EOS is the best candidate -> finished (rank 0 < N);
  // running = the two best others.
  const auto& c1 = bs.step({logp({0.2, 0.3, 0.1, 0.4})});
  ASSERT_EQ(c1.size(), 4u);
  EXPECT_EQ(c1[0].token, 3);
  EXPECT_TRUE(c1[0].finished);
  ASSERT_EQ(bs.finished().size(), 1u);
  EXPECT_NEAR(bs.finished()[0].score, std::log(0.4) / 1.0, 1e-12);
  EXPECT_EQ(bs.finished()[0].gen_len, 1);
  ASSERT_EQ(bs.running().size(), 2u);
  EXPECT_EQ(bs.running()[0].tokens, (std::vector<int>{7, 7, 1}));
  EXPECT_EQ(bs.running()[1].tokens, (std::vector<int>{7, 7, 0}));
  EXPECT_FALSE(bs.done());
  // Step 2: beam 0 (log .3) -> EOS with p .9: sum = log(.27), score = log(.27)/2
  // (rank 0: finished). Beam 1 (log .2) continues.
  bs.step({logp({0.05, 0.03, 0.02, 0.9}), logp({0.7, 0.1, 0.1, 0.1})});
  ASSERT_EQ(bs.finished().size(), 2u);
  EXPECT_NEAR(bs.finished()[0].score, std::log(0.27) / 2, 1e-12);
  EXPECT_NEAR(bs.finished()[1].score, std::log(0.4), 1e-12);
  // Two finished, and the best running beam (0.2 * 0.7: log(.14) / 2 = -0.98)
  // cannot beat the worst of them (log(.4) = -0.92): the search stops.
  EXPECT_TRUE(bs.done());
  EXPECT_EQ(bs.stop(), BeamStop::kBeaten);
  EXPECT_THROW(bs.step({}), Error);
}

TEST(BeamSearchUnit, EosBelowRankNDoesNotFinish) {
  BeamSettings s;
  s.n_beams = 1;
  s.eos = {2};
  s.max_length = 5;
  BeamSearch bs(s, {0});
  const auto& c = bs.step({logp({0.5, 0.2, 0.3})});
  ASSERT_EQ(c.size(), 2u);  // 2N
  EXPECT_EQ(c[1].token, 2);
  EXPECT_FALSE(c[1].finished);  // rank 1 >= N
  EXPECT_TRUE(bs.finished().empty());
  EXPECT_EQ(bs.running()[0].tokens, (std::vector<int>{0, 0}));
}

TEST(BeamSearchUnit, MaximumLengthFinishesTheTopN) {
  BeamSettings s;
  s.n_beams = 2;
  s.eos = {};
  s.max_length = 3;
  s.length_penalty = 2.0;
  BeamSearch bs(s, {5, 5});
  bs.step({logp({0.6, 0.4})});
  EXPECT_TRUE(bs.done());
  EXPECT_EQ(bs.stop(), BeamStop::kMaxLength);
  ASSERT_EQ(bs.finished().size(), 2u);
  EXPECT_NEAR(bs.finished()[0].score, std::log(0.6), 1e-12);  // length 1: 1^2
}

TEST(BeamSearchUnit, StopsOnEveryIdOfAnEosList) {
  // V = 5, EOS ids {4, 2} (a Llama config's list), N = 2. Step 1: token 2
  // (the list's second id) ranks first and finishes; token 4 ranks second
  // and finishes too; the two best others run on.
  BeamSettings s;
  s.n_beams = 2;
  s.eos = {4, 2};
  s.max_length = 10;
  BeamSearch bs(s, {0});
  const auto& c = bs.step({logp({0.1, 0.15, 0.4, 0.05, 0.3})});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].token, 2);
  EXPECT_TRUE(c[0].stops && c[0].finished);
  EXPECT_EQ(c[1].token, 4);
  EXPECT_TRUE(c[1].stops && c[1].finished);
  EXPECT_FALSE(c[2].stops);
  ASSERT_EQ(bs.finished().size(), 2u);
  EXPECT_TRUE(bs.finished()[0].eos && bs.finished()[1].eos);
  EXPECT_NEAR(bs.finished()[0].score, std::log(0.4), 1e-12);
  EXPECT_NEAR(bs.finished()[1].score, std::log(0.3), 1e-12);
  // The best running beam (log .15) cannot beat the worse of them (log .3): done.
  EXPECT_TRUE(bs.done());
  EXPECT_EQ(bs.stop(), BeamStop::kBeaten);
}

struct BeamCase {
  std::string name, dir;
  std::vector<int> prompt;
  int n_beams = 0, max_new = 0;
  double length_penalty = 1;
  json ref;
};

std::vector<BeamCase> beam_cases() {
  const std::string root = testutil::beam_suite_dir();
  std::vector<BeamCase> out;
  const json suite = testutil::read_json(root + "/beam_suite.json");
  for (const json& c : suite.at("checkpoints")) {
    BeamCase b;
    b.name = c.at("name");
    b.dir = root + "/" + c.at("dir").get<std::string>();
    b.prompt = c.at("prompt").get<std::vector<int>>();
    b.n_beams = c.at("n_beams");
    b.max_new = c.at("max_new");
    b.length_penalty = c.at("length_penalty");
    b.ref = testutil::read_json(b.dir + "/beam_ref.json");
    out.push_back(std::move(b));
  }
  return out;
}

std::map<std::vector<int>, double> beams_by_tokens(const json& arr, const char* score_key) {
  std::map<std::vector<int>, double> m;
  for (const json& b : arr) m[b.at("tokens").get<std::vector<int>>()] = b.at(score_key).get<double>();
  return m;
}

TEST(BeamSearchReference, MatchesNumpyBeamSearch) {
  const std::vector<BeamCase> cases = beam_cases();
  ASSERT_GE(cases.size(), 5u);
  std::set<std::string> reasons;
  int list_cases = 0;
  for (const BeamCase& bc : cases) {
    SCOPED_TRACE(bc.name);
    auto model = load_model(bc.dir);
    BeamGenerator gen(model);
    BeamOptions opt;
    opt.n_beams = bc.n_beams;
    opt.max_new = bc.max_new;
    opt.length_penalty = bc.length_penalty;
    gen.start_tokens(bc.prompt, opt);
    const json& steps = bc.ref.at("steps");
    size_t s = 0;
    while (BeamRecordPtr r = gen.step()) {
      ASSERT_LT(s, steps.size()) << "more steps than the reference";
      const json& rs = steps[s];
      // Running beams: the same token sequences with the same cumulative log-prob.
      std::map<std::vector<int>, double> mine;
      for (const Beam& b : r->running) mine[b.tokens] = b.logprob;
      const auto ref_running = beams_by_tokens(rs.at("running"), "logprob");
      ASSERT_EQ(mine.size(), ref_running.size()) << "step " << s;
      for (const auto& [toks, lp] : ref_running) {
        ASSERT_TRUE(mine.count(toks)) << "step " << s << ": a reference beam is missing";
        EXPECT_NEAR(mine[toks], lp, kTol) << "step " << s;
      }
      // Every step computes one position per running beam (the prompt first).
      EXPECT_EQ(r->positions, s == 0 ? static_cast<int>(bc.prompt.size()) : static_cast<int>(r->expanded.size()));
      EXPECT_LE(r->kv_bytes_shared, r->kv_bytes_independent);
      ++s;
    }
    EXPECT_EQ(s, steps.size());
    EXPECT_EQ(to_string(gen.reason()), bc.ref.at("reason").get<std::string>());
    reasons.insert(to_string(gen.reason()));
    const auto& fin = gen.search().finished();
    const json& rf = bc.ref.at("finished");
    ASSERT_EQ(fin.size(), rf.size());
    for (size_t i = 0; i < fin.size(); ++i) {
      EXPECT_EQ(fin[i].tokens, rf[i].at("tokens").get<std::vector<int>>()) << "hypothesis " << i;
      EXPECT_NEAR(fin[i].score, rf[i].at("score").get<double>(), kTol) << "hypothesis " << i;
      EXPECT_NEAR(fin[i].sum_logprob, rf[i].at("sum_logprob").get<double>(), kTol) << "hypothesis " << i;
      EXPECT_EQ(fin[i].gen_len, rf[i].at("gen_len").get<int>());
    }
    EXPECT_EQ(fin.front().tokens, bc.ref.at("best").at("tokens").get<std::vector<int>>());
    EXPECT_NEAR(fin.front().score, bc.ref.at("best").at("score").get<double>(), kTol);
    // A config whose eos_token_id is a list: a hypothesis ended on an id
    // other than the first (the suite picks such a prompt), so every id counts.
    const std::vector<int>& eos = model->config.eos_token_ids;
    if (eos.size() > 1) {
      ++list_cases;
      EXPECT_TRUE(std::any_of(fin.begin(), fin.end(), [&](const Hypothesis& h) {
        return h.eos && std::find(eos.begin() + 1, eos.end(), h.tokens.back()) != eos.end();
      }));
    }
  }
  EXPECT_EQ(list_cases, 1);
  // The suite exercises every way a search ends.
  EXPECT_TRUE(reasons.count("eos") && reasons.count("max_new") && reasons.count("context_full"));
}

TEST(BeamSearchReference, CumulativeLogProbsEqualNoCacheReferenceForward) {
  for (const BeamCase& bc : beam_cases()) {
    SCOPED_TRACE(bc.name);
    auto model = load_model(bc.dir);
    BeamGenerator gen(model);
    BeamOptions opt;
    opt.n_beams = bc.n_beams;
    opt.max_new = bc.max_new;
    opt.length_penalty = bc.length_penalty;
    gen.start_tokens(bc.prompt, opt);
    std::vector<std::vector<int>> seqs;
    std::vector<double> mine;
    while (BeamRecordPtr r = gen.step()) {
      for (const Beam& b : r->running) {
        seqs.push_back(b.tokens);
        mine.push_back(b.logprob);
      }
    }
    for (const Hypothesis& h : gen.search().finished()) {
      seqs.push_back(h.tokens);
      mine.push_back(h.sum_logprob);
    }
    testutil::TempDir tmp("beam-score");
    testutil::write_file(tmp / "in.json", json{{"n_prompt", bc.prompt.size()}, {"sequences", seqs}}.dump());
    testutil::run_decode_ref("score --model " + testutil::shell_quote(bc.dir) + " --in " +
                                 testutil::shell_quote(tmp / "in.json") + " --out " +
                                 testutil::shell_quote(tmp / "out.json"),
                             tmp / "log.txt");
    const std::vector<double> ref = testutil::read_json(tmp / "out.json").at("sums").get<std::vector<double>>();
    ASSERT_EQ(ref.size(), mine.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(mine[i], ref[i], kTol) << "sequence " << i;
  }
}

// --beams 1 is greedy decoding: the same tokens as the sampler's argmax.
void expect_one_beam_is_greedy(std::shared_ptr<const Model> model, const std::vector<int>& prompt, int max_new) {
  GenerateOptions g;
  g.max_new = max_new;
  Generator plain(model);
  plain.start_tokens(prompt, g);
  while (plain.step()) {
  }
  BeamGenerator gen(model);
  BeamOptions opt;
  opt.n_beams = 1;
  opt.max_new = max_new;
  gen.start_tokens(prompt, opt);
  while (gen.step()) {
  }
  ASSERT_FALSE(gen.search().finished().empty());
  EXPECT_EQ(gen.search().finished().front().tokens, plain.tokens());
  EXPECT_EQ(to_string(gen.reason()), std::string(to_string(plain.reason())));
}

// The cache's row format changes the numbers exactly as stored rows do in
// the reference: beam search with f16 and q8_0 K/V (paged, 4 positions per
// block) against the NumPy search whose attention reads every K/V row
// rounded to the same format (numpy_ref.py's forward_kv).
TEST(BeamSearchReference, RowFormatsMatchTheReferenceReadingStoredRows) {
  const BeamCase bc = beam_cases().front();  // rows of 32 values: q8_0's blocks fit
  auto model = load_model(bc.dir);
  ASSERT_EQ(model->config.n_embd % 32, 0);
  std::string prompt;
  for (int t : bc.prompt) prompt += (prompt.empty() ? "" : ",") + std::to_string(t);
  testutil::TempDir tmp("beam-dtype");
  for (KVDtype dt : {KVDtype::kF16, KVDtype::kQ8_0}) {
    SCOPED_TRACE(to_string(dt));
    const std::string out = tmp / (std::string(to_string(dt)) + ".json");
    testutil::run_decode_ref("beam --model " + testutil::shell_quote(bc.dir) + " --prompt " + prompt + " --beams " +
                                 std::to_string(bc.n_beams) + " --max-new " + std::to_string(bc.max_new) +
                                 " --length-penalty " + std::to_string(bc.length_penalty) + " --kv-dtype " +
                                 to_string(dt) + " --out " + testutil::shell_quote(out),
                             tmp / "log.txt");
    const json ref = testutil::read_json(out);
    BeamGenerator gen(model);
    BeamOptions opt;
    opt.n_beams = bc.n_beams;
    opt.max_new = bc.max_new;
    opt.length_penalty = bc.length_penalty;
    opt.block = 4;
    opt.dtype = dt;
    gen.start_tokens(bc.prompt, opt);
    while (gen.step()) {
    }
    const auto& fin = gen.search().finished();
    const json& rf = ref.at("finished");
    ASSERT_EQ(fin.size(), rf.size());
    for (size_t i = 0; i < fin.size(); ++i) {
      EXPECT_EQ(fin[i].tokens, rf[i].at("tokens").get<std::vector<int>>()) << "hypothesis " << i;
      EXPECT_NEAR(fin[i].score, rf[i].at("score").get<double>(), kTol) << "hypothesis " << i;
    }
    // The format matters: the f32 reference's best score differs by more than the tolerance.
    EXPECT_GT(std::abs(fin.front().score - bc.ref.at("best").at("score").get<double>()), kTol);
  }
}

TEST(BeamSearchReference, OneBeamIsGreedy) {
  for (const BeamCase& bc : beam_cases()) {
    SCOPED_TRACE(bc.name);
    expect_one_beam_is_greedy(load_model(bc.dir), bc.prompt, bc.max_new);
  }
}

TEST(BeamSearchReference, OneBeamIsGreedyOnTheShippedModel) {
  auto model = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  for (const char* p : {"Once upon a time", "The capital of France is", "def "})
    expect_one_beam_is_greedy(model, model->tokenizer.encode(p), 24);
}

// All beams in one cache. Paged with one position per block, the cache
// holds exactly one row per distinct prefix of the expanded beams (counted
// here from their tokens); with 16 positions per block whole blocks, shared
// ones copied on the first write; with one contiguous reservation per
// sequence every beam's first write copies its parent's whole reservation,
// so nothing stays shared: as much as independent caches. Same beams in all.
TEST(BeamSearchReference, SharedPrefixHoldsLessThanIndependentCaches) {
  auto model = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const uint64_t per = kv_bytes_per_position(model->config);
  std::vector<std::vector<int>> best;
  for (int block : {1, 16, 0}) {
    SCOPED_TRACE("block " + std::to_string(block));
    BeamGenerator gen(model);
    BeamOptions opt;
    opt.n_beams = 4;
    opt.max_new = 24;
    opt.block = block;
    gen.start("Once upon a time there was", opt);
    int sharing_steps = 0;
    uint64_t copies = 0;
    while (BeamRecordPtr r = gen.step()) {
      EXPECT_EQ(r->forwards, 1);
      EXPECT_LE(r->kv_bytes_shared, r->kv_bytes_independent);
      if (block == 1) {
        std::set<std::vector<int>> prefixes;
        for (const Beam& b : r->expanded)
          for (size_t n = 1; n <= b.tokens.size(); ++n) prefixes.emplace(b.tokens.begin(), b.tokens.begin() + n);
        EXPECT_EQ(r->kv_bytes_shared, prefixes.size() * per) << "step " << r->index;
      }
      if (block == 16) {
        EXPECT_EQ(r->kv_bytes_independent % (16 * per), 0u);
      }
      if (block == 0) {
        EXPECT_EQ(r->kv_bytes_shared, r->kv_bytes_independent) << "step " << r->index;
      }
      sharing_steps += r->kv_bytes_shared < r->kv_bytes_independent ? 1 : 0;
      copies = r->cow_copies;
    }
    if (block != 0) {
      EXPECT_GT(sharing_steps, 0);
    }
    if (block == 16) {
      EXPECT_GT(copies, 0u);  // beams forked inside a block wrote into their own copy
    }
    best.push_back(gen.search().finished().front().tokens);
  }
  EXPECT_EQ(best[0], best[1]);
  EXPECT_EQ(best[0], best[2]);
}

}  // namespace
}  // namespace kvscope
