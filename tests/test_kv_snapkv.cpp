// SnapKV, per K/V head: generation against the independent float64 reference
// of the rule (tools/numpy_ref_snapkv.py) on GPT-2 and grouped-query Llama
// checkpoints, contiguous and paged, max and average pooling; the rule worked
// by hand on the cache alone (pooling, the group's average, the tie rule);
// the defaults; and the CLI's records and usage errors.

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;
constexpr double kF16Tol = 1e-3;  // as test_kv_evict.cpp: a value at a half-precision rounding boundary

struct SnapCase {
  const char* ckpt;
  bool llama;
  KVDtype dtype;
  int budget, window, pool;
  KVPooling pooling;
  int block;
  int n_prompt = 12, steps = 6;
};

std::string describe(const SnapCase& sc) {
  return std::string(sc.ckpt) + " " + to_string(sc.dtype) + " N" + std::to_string(sc.budget) + " W" +
         std::to_string(sc.window) + " K" + std::to_string(sc.pool) + " " + to_string(sc.pooling) + " B" +
         std::to_string(sc.block) + " L" + std::to_string(sc.n_prompt);
}

std::string ckpt_dir(const SnapCase& sc) {
  return sc.llama ? testutil::llama_suite_dir() + "/" + sc.ckpt : testutil::suite_checkpoint(sc.ckpt);
}

json snap_reference(const SnapCase& sc, const testutil::TempDir& tmp, const std::string& extra = "") {
  testutil::run_numpy_ref(std::string("snapref --model ") + ckpt_dir(sc) + (sc.llama ? " --llama" : "") +
                              " --kv-dtype " + to_string(sc.dtype) + " --kv-budget " + std::to_string(sc.budget) +
                              " --kv-snap-window " + std::to_string(sc.window) + " --kv-snap-pool " +
                              std::to_string(sc.pool) + " --kv-snap-pooling " + to_string(sc.pooling) + " --n-prompt " +
                              std::to_string(sc.n_prompt) + " --steps " + std::to_string(sc.steps) + extra + " --out " +
                              (tmp / "ref.json"),
                          tmp / "ref.log", std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_ref_snapkv.py");
  return testutil::read_json(tmp / "ref.json");
}

// Contiguous: each head's K and V slices of what it holds; paged: every allocated page.
void check_bytes(const SnapCase& sc, const Config& c, const StepRecord& r, const std::string& where) {
  uint64_t head_rows = 0;
  for (const auto& layer : r.kv_held_by_head)
    for (const auto& h : layer) head_rows += h.size();
  const uint64_t per_pos = 2ull * c.n_layer * kv_row_bytes(sc.dtype, c.kv_heads() * c.head_dim());
  if (sc.block) {
    EXPECT_EQ(r.kv_bytes, static_cast<uint64_t>(r.kv_blocks) * sc.block * per_pos) << where;
  } else {
    EXPECT_EQ(r.kv_bytes, head_rows * 2 * kv_row_bytes(sc.dtype, c.head_dim())) << where;
  }
}

void check_snap(const SnapCase& sc) {
  testutil::TempDir tmp("kv-snapkv");
  const json ref = snap_reference(sc, tmp);
  std::shared_ptr<const Model> m = load_model(ckpt_dir(sc));
  const Config& c = m->config;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = sc.steps + 1;
  opt.ignore_eos = true;
  opt.sampler.greedy = true;
  opt.kv.dtype = sc.dtype;
  opt.kv.block = sc.block;
  opt.kv.evict = KVEvict::kSnapKV;
  opt.kv.budget = sc.budget;
  opt.kv.snap_window = sc.window;
  opt.kv.snap_pool = sc.pool;
  opt.kv.snap_pooling = sc.pooling;
  gen.start_tokens(ref.at("prompt").get<std::vector<int>>(), opt);
  const std::string who = describe(sc);
  const double tol = sc.dtype == KVDtype::kF16 ? kF16Tol : kTol;
  int steps = 0;
  for (int s = 0;; ++s) {
    RecordPtr r = gen.step();
    if (!r) break;
    ++steps;
    const std::string where = who + " step " + std::to_string(s);
    const json& st = ref.at("steps").at(static_cast<size_t>(s));
    ASSERT_EQ(r->token, st.at("token").get<int>()) << where;
    for (size_t i = 0; i < 5; ++i)
      EXPECT_NEAR(r->top[i].prob, st.at("top").at(i).at(1).get<double>(), tol) << where << " rank " << i;
    ASSERT_EQ(r->kv_held_by_head, (st.at("held_by_head").get<std::vector<std::vector<std::vector<int>>>>())) << where;
    ASSERT_EQ(r->kv_held_by_layer, st.at("held").get<std::vector<std::vector<int>>>()) << where;
    // Rows (one head's K and V) dropped: only by the prefill, L - |held| per head.
    int dropped = 0;
    for (const auto& layer : r->kv_held_by_head)
      for (const auto& h : layer) dropped += s == 0 ? sc.n_prompt - static_cast<int>(h.size()) : 0;
    EXPECT_EQ(r->evicted, dropped) << where;
    check_bytes(sc, c, *r, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(steps, sc.steps + 1) << who;
  EXPECT_EQ(gen.tokens(), ref.at("tokens").get<std::vector<int>>()) << who;
}

class SnapP : public ::testing::TestWithParam<SnapCase> {};

TEST_P(SnapP, MatchesNumpyReference) {
  check_snap(GetParam());
}

const SnapCase kCases[] = {
    {"l2h2d32_f32_prefix_buffers", false, KVDtype::kF32, 8, 3, 3, KVPooling::kMax, 0},
    {"l2h2d32_f32_prefix_buffers", false, KVDtype::kF16, 6, 2, 5, KVPooling::kAvg, 4},
    {"l3h4d48_f16_noprefix", false, KVDtype::kF32, 7, 2, 7, KVPooling::kMax, 3},
    {"l2h2d32_f32_prefix_buffers", false, KVDtype::kF32, 12, 4, 7, KVPooling::kMax, 0, 10, 4},  // L <= N: all kept
    {"llama_gqa3_bf16_untied_sharded_llama3", true, KVDtype::kF32, 7, 2, 3, KVPooling::kMax, 0},
    {"llama_gqa3_bf16_untied_sharded_llama3", true, KVDtype::kF32, 8, 3, 5, KVPooling::kAvg, 4},
    {"llama_gqa2_f16_headdim_linear", true, KVDtype::kF16, 8, 4, 7, KVPooling::kAvg, 0},
    {"llama_gqa2_f16_headdim_linear", true, KVDtype::kF32, 5, 1, 1, KVPooling::kMax, 2},
};

INSTANTIATE_TEST_SUITE_P(SnapKV, SnapP, ::testing::ValuesIn(kCases), [](const ::testing::TestParamInfo<SnapCase>& i) {
  std::string n = describe(i.param);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

// --- the rule by hand, on the cache alone ----------------------------------------

KVLayout snap_layout(int budget, int window, int pool, KVPooling pooling) {
  KVLayout l;
  l.n_layer = 1;
  l.n_kv_head = 2;
  l.head_dim = 4;
  l.n_ctx = 32;
  l.evict = KVEvict::kSnapKV;
  l.budget = budget;
  l.snap_window = window;
  l.snap_pool = pool;
  l.snap_pooling = pooling;
  return l;
}

// A prefill of L positions whose window queries gave query head h the weights w[h] (L each).
KVCache prefill(const KVLayout& lay, const std::vector<std::vector<double>>& w) {
  KVCache kc(lay);
  const SeqId s = kc.add_sequence();
  const int L = static_cast<int>(w[0].size());
  for (int p = 0; p < L; ++p) kc.append(s, p);
  std::vector<double> flat;
  for (const auto& row : w) flat.insert(flat.end(), row.begin(), row.end());
  // One window query carrying every weight (the sums are what count).
  kc.observe_heads(s, 0, L - 1, L, static_cast<int>(w.size()), flat.data());
  kc.commit(s);
  return kc;
}

TEST(KVSnapRule, MaxPoolingSpreadsAPeakAndTiesKeepTheLater) {
  // 4 query heads, 2 K/V heads (groups {0, 1}, {2, 3}); L = 8, W = 2, N = 4: two of positions 0..5 per head.
  const std::vector<std::vector<double>> w = {{0, 0, 0, 0.9, 0, 0, 1, 1},
                                              {0, 0, 0, 0.9, 0, 0, 1, 1},  // head 0: a peak at 3, pooled over 2..4
                                              {0.5, 0, 0, 0, 0, 0.5, 1, 1},
                                              {0.5, 0, 0, 0, 0, 0.5, 1, 1}};  // head 1: equal peaks at 0 and 5
  KVCache kc = prefill(snap_layout(4, 2, 3, KVPooling::kMax), w);
  // Pooled 2, 3, 4 tie at 0.9: the later two (3, 4) stay. Head 1: pooled 0, 1, 4, 5 tie at 0.5: 4, 5 stay.
  EXPECT_EQ(kc.positions(0, 0, 0), (std::vector<int>{3, 4, 6, 7}));
  EXPECT_EQ(kc.positions(0, 0, 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(kc.positions(0, 0), (std::vector<int>{3, 4, 5, 6, 7}));
  // Contiguous: 8 head rows of 4 f32 values, K and V.
  EXPECT_EQ(kc.bytes(), 8u * 2 * 16);
}

TEST(KVSnapRule, AveragePoolingCountsThePaddingAndTheGroupAverages) {
  // Head 0 of group 0 looks at 0, head 1 at 5: averaged, K = 3 with zero padding counted:
  // position 0 pools (0 + 0.6 + 0) / 3 = 0.2 for head 0; position 5 (0 + 0.6 + 0) / 3 for head 1.
  const std::vector<std::vector<double>> w = {{0.6, 0, 0, 0, 0, 0, 1, 1},
                                              {0, 0, 0, 0, 0, 0.3, 1, 1},
                                              {0, 0, 0.2, 0.1, 0, 0, 1, 1},
                                              {0, 0, 0.2, 0.1, 0, 0, 1, 1}};
  KVCache kc = prefill(snap_layout(3, 2, 3, KVPooling::kAvg), w);
  // Group 0 scores: 0:0.1 1:0.1 4:0.05 5:0.05 (others 0): one kept, 1 (later of the tie at 0.1).
  EXPECT_EQ(kc.positions(0, 0, 0), (std::vector<int>{1, 6, 7}));
  // Group 1: 1: 0.2/3, 2: 0.3/3, 3: 0.3/3, 4: 0.1/3: 3 (later of the tie).
  EXPECT_EQ(kc.positions(0, 0, 1), (std::vector<int>{3, 6, 7}));
}

TEST(KVSnapRule, APromptNoLongerThanTheBudgetKeepsEverythingAndDecodeNeverEvicts) {
  KVCache kc = prefill(snap_layout(8, 2, 3, KVPooling::kMax), {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}});
  EXPECT_EQ(kc.positions(0, 0, 1), (std::vector<int>{0, 1, 2, 3}));
  for (int p = 4; p < 12; ++p) {
    kc.append(0, p);
    EXPECT_EQ(kc.commit(0), 0);
  }
  EXPECT_EQ(kc.positions(0, 0, 0).size(), 12u);
}

TEST(KVSnapRule, DefaultsAndRangesNameTheFlag) {
  Config c;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 64;
  c.n_positions = 64;
  KVLayout s;
  s.evict = KVEvict::kSnapKV;
  s.budget = 40;
  KVLayout l = s.on_model(c);
  EXPECT_EQ(l.snap_window, 32);
  EXPECT_EQ(l.snap_pool, 7);
  EXPECT_EQ(l.snap_pooling, KVPooling::kMax);
  s.budget = 8;
  EXPECT_EQ(s.on_model(c).snap_window, 2);
  s.budget = 3;
  EXPECT_EQ(s.on_model(c).snap_window, 1);
  s.snap_window = 3;
  try {
    s.on_model(c);
    ADD_FAILURE() << "W = N accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-snap-window"), std::string::npos) << e.what();
  }
  s.snap_window = 1;
  s.snap_pool = 4;
  EXPECT_THROW(s.on_model(c), Error);
}

// --- the CLI -------------------------------------------------------------------

int (*const run)(const std::string&, std::string&, const testutil::TempDir&) = testutil::run_kvscope;

TEST(CliSnapKV, GenerateJsonCarriesEachHeadsHeldPositionsAsTheReference) {
  testutil::TempDir tmp("cli-snapkv");
  const SnapCase sc{"llama_gqa3_bf16_untied_sharded_llama3", true, KVDtype::kF32, 6, 2, 3, KVPooling::kMax, 0};
  std::shared_ptr<const Model> m = load_model(ckpt_dir(sc));
  const std::string text = "The quick brown fox jumps over the lazy dog";
  std::string ids;
  for (int t : m->tokenizer.encode_prompt(text)) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const json ref = snap_reference(sc, tmp, " --prompt " + ids);
  ASSERT_GE(ref.at("min_margin").get<double>(), 2e-3);
  ASSERT_GE(ref.at("min_evict_margin").get<double>(), 2e-5);
  std::string out;
  ASSERT_EQ(run("generate --model " + ckpt_dir(sc) + " --prompt " + testutil::shell_quote(text) +
                    " --max-new 4 --greedy --json --kv-evict snapkv --kv-budget 6 --kv-snap-window 2 "
                    "--kv-snap-pool 3",
                out, tmp),
            0)
      << out;
  std::istringstream lines(out);
  std::string line;
  size_t s = 0;
  while (std::getline(lines, line) && s < 4) {
    const json j = json::parse(line);
    if (j.at("event") == "done") break;
    const json& st = ref.at("steps").at(s);
    EXPECT_EQ(j.at("token").get<int>(), st.at("token").get<int>()) << "step " << s;
    EXPECT_EQ(j.at("held_by_head"), st.at("held_by_head")) << "step " << s;
    EXPECT_EQ(j.at("held_by_layer"), st.at("held")) << "step " << s;
    ++s;
  }
  EXPECT_EQ(s, 4u);
}

TEST(CliSnapKV, BadSettingsAreUsageErrorsNamingTheFlags) {
  testutil::TempDir tmp("cli-snapkv-bad");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string gen = "generate --model " + dir + " --prompt 'The fox' --max-new 3 ";
  testutil::expect_refused(
      {
          {gen + "--kv-evict snapkv --kv-budget 4 --kv-snap-window 4", {"--kv-snap-window", "W < N"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --kv-snap-window 0", {"--kv-snap-window"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --kv-snap-pool 4", {"--kv-snap-pool", "odd"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --kv-snap-pooling min", {"--kv-snap-pooling"}},
          {gen + "--kv-evict snapkv --kv-budget 1", {"--kv-budget", "N >= 2"}},
          {gen + "--kv-evict tova --kv-budget 4 --kv-snap-window 2", {"--kv-snap-window", "snapkv"}},
          {gen + "--kv-evict snapkv", {"--kv-evict", "--kv-budget"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --kv-window 8", {"--kv-evict", "--kv-window"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --no-cache", {"--no-cache", "--kv-evict"}},
          {gen + "--kv-evict snapkv --kv-budget 4 --beams 2", {"--kv-evict", "--beams"}},
      },
      tmp);
  // A row format the model's heads cannot hold (16 values a head, not whole 32-value blocks): refused
  // when the model is known, as the other row formats a model cannot hold (exit 1).
  testutil::expect_refused({{gen + "--kv-evict snapkv --kv-budget 4 --kv-dtype q8_0",
                             {"--kv-evict snapkv with --kv-dtype q8_0: a head holds 16 values"}}},
                           tmp, 1);
}

}  // namespace
}  // namespace kvscope
