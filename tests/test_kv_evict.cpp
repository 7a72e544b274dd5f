// Eviction by attention score (TOVA, H2O), per layer: generation against the
// independent float64 reference of the same rules (tools/numpy_ref.py evref,
// tools/numpy_ref_llama.py evref) for GPT-2 and Llama-family checkpoints,
// every row format, paged and contiguous; the rules worked by hand on the
// cache alone (ties, H2O's recent half, slots reused, pages returned); and the
// CLI's flags and their refusals.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
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
// f16 rows: a K or V value that sits at a half-precision rounding boundary is
// stored as neighbouring halves by the f32 engine and the float64 reference
// (1.2e-4 seen on a Llama checkpoint); the same bound as the layouts test.
constexpr double kF16Tol = 1e-3;

struct EvictCase {
  const char* ckpt;
  bool llama;
  KVEvict rule;
  KVDtype dtype;
  int budget, block;
  int n_prompt = 8, steps = 10;
};

std::string describe(const EvictCase& ec) {
  KVLayout l;
  l.dtype = ec.dtype;
  l.block = ec.block;
  l.evict = ec.rule;
  l.budget = ec.budget;
  return std::string(ec.ckpt) + " " + l.describe();
}

// What the reference says each layer holds after step s.
std::vector<std::vector<int>> ref_held(const json& st) {
  return st.at("held").get<std::vector<std::vector<int>>>();
}

void check_counters(const EvictCase& ec, const Config& c, const StepRecord& r, int max_rows, const std::string& where) {
  const uint64_t row = kv_row_bytes(ec.dtype, c.kv_heads() * c.head_dim());
  std::set<int> all;
  uint64_t rows = 0;
  int widest = 0;
  for (const std::vector<int>& h : r.kv_held_by_layer) {
    all.insert(h.begin(), h.end());
    rows += h.size();
    widest = std::max(widest, static_cast<int>(h.size()));
  }
  EXPECT_EQ(r.kv_held.positions(), std::vector<int>(all.begin(), all.end())) << where;
  if (ec.block) {
    // Pages hold every layer's rows; a dropped row's slot is taken by the next
    // position of its layer, so no layer needs more slots than it ever held at once.
    EXPECT_EQ(r.kv_bytes, static_cast<uint64_t>(r.kv_blocks) * ec.block * 2 * c.n_layer * row) << where;
    EXPECT_GE(r.kv_blocks * ec.block, widest) << where;
    EXPECT_LE(r.kv_blocks, (max_rows + ec.block - 1) / ec.block) << where;
  } else {
    EXPECT_EQ(r.kv_bytes, rows * 2 * row) << where;  // each layer's K and V rows of what it holds
  }
}

void check_evict(const EvictCase& ec) {
  testutil::TempDir tmp("kv-evict");
  const std::string dir = ec.llama ? testutil::llama_suite_dir() + "/" + ec.ckpt : testutil::suite_checkpoint(ec.ckpt);
  const std::string script =
      std::string(KVSCOPE_SOURCE_DIR) + (ec.llama ? "/tools/numpy_ref_llama.py" : "/tools/numpy_ref.py");
  testutil::run_numpy_ref(std::string("evref --model ") + dir + " --kv-dtype " + to_string(ec.dtype) + " --kv-evict " +
                              to_string(ec.rule) + " --kv-budget " + std::to_string(ec.budget) + " --n-prompt " +
                              std::to_string(ec.n_prompt) + " --steps " + std::to_string(ec.steps) + " --out " +
                              (tmp / "ref.json"),
                          tmp / "ref.log", script);
  const json ref = testutil::read_json(tmp / "ref.json");
  std::shared_ptr<const Model> m = load_model(dir);
  const Config& c = m->config;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = ec.steps + 1;
  opt.ignore_eos = true;
  opt.sampler.greedy = true;
  opt.kv.dtype = ec.dtype;
  opt.kv.block = ec.block;
  opt.kv.evict = ec.rule;
  opt.kv.budget = ec.budget;
  gen.start_tokens(ref.at("prompt").get<std::vector<int>>(), opt);
  const std::string who = describe(ec);
  const double tol = ec.dtype == KVDtype::kF16 ? kF16Tol : kTol;
  std::vector<std::vector<int>> before(static_cast<size_t>(c.n_layer));
  int steps = 0;
  for (int s = 0;; ++s) {
    RecordPtr r = gen.step();
    if (!r) break;
    ++steps;
    const std::string where = who + " step " + std::to_string(s);
    const json& st = ref.at("steps").at(static_cast<size_t>(s));
    ASSERT_EQ(r->seq_len, st.at("seq_len").get<int>()) << where;
    ASSERT_EQ(r->token, st.at("token").get<int>()) << where;
    EXPECT_NEAR(r->prob, st.at("prob").get<double>(), tol) << where;
    for (size_t i = 0; i < 5; ++i)
      EXPECT_NEAR(r->top[i].prob, st.at("top").at(i).at(1).get<double>(), tol) << where << " rank " << i;
    const auto held = ref_held(st);
    ASSERT_EQ(r->kv_held_by_layer, held) << where;
    // Rows dropped by this forward, summed over layers.
    int dropped = 0;
    for (size_t l = 0; l < held.size(); ++l)
      dropped += static_cast<int>(before[l].size()) + r->n_new - static_cast<int>(held[l].size());
    EXPECT_EQ(r->evicted, dropped) << where;
    before = held;
    check_counters(ec, c, *r, std::max(ec.n_prompt, ec.budget + 1), where);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(steps, ec.steps + 1) << who;
  EXPECT_EQ(gen.tokens(), ref.at("tokens").get<std::vector<int>>()) << who;
}

class EvictP : public ::testing::TestWithParam<EvictCase> {};

TEST_P(EvictP, MatchesNumpyReference) {
  check_evict(GetParam());
}

const EvictCase kCases[] = {
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kTova, KVDtype::kF32, 5, 0},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kH2O, KVDtype::kF32, 5, 0},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kTova, KVDtype::kF16, 4, 2},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kH2O, KVDtype::kQ8_0, 6, 3},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kTova, KVDtype::kQ4_0, 5, 0},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kH2O, KVDtype::kQ4_0, 5, 1},
    {"l2h2d32_f32_prefix_buffers", false, KVEvict::kH2O, KVDtype::kF32, 1, 0},
    {"l3h4d48_f16_noprefix", false, KVEvict::kTova, KVDtype::kF32, 6, 4},
    {"l2h4d64_f16_prefix_u8buffers", false, KVEvict::kH2O, KVDtype::kQ8_0, 7, 0, 10, 8},
    {"llama_gqa3_bf16_untied_sharded_llama3", true, KVEvict::kTova, KVDtype::kF32, 5, 4},
    {"llama_gqa3_bf16_untied_sharded_llama3", true, KVEvict::kTova, KVDtype::kF16, 5, 2},
    {"llama_gqa2_f16_headdim_linear", true, KVEvict::kH2O, KVDtype::kF16, 4, 0},
    {"llama_gqa3_bf16_untied_sharded_llama3", true, KVEvict::kH2O, KVDtype::kF32, 5, 0},
    {"llama_gqa2_f16_headdim_linear", true, KVEvict::kTova, KVDtype::kQ8_0, 4, 0},
    {"llama_gqa2_f16_headdim_linear", true, KVEvict::kH2O, KVDtype::kQ4_0, 5, 2},
};

INSTANTIATE_TEST_SUITE_P(Evict, EvictP, ::testing::ValuesIn(kCases), [](const ::testing::TestParamInfo<EvictCase>& i) {
  std::string n = describe(i.param);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

// --- the rules by hand, on the cache alone --------------------------------------

KVLayout tiny_layout(KVEvict rule, int budget, int block) {
  KVLayout l;
  l.n_layer = 2;
  l.n_kv_head = 1;
  l.head_dim = 4;
  l.n_ctx = 32;
  l.block = block;
  l.evict = rule;
  l.budget = budget;
  return l;
}

// Appends positions [from, to) and writes a row for each layer.
void append(KVCache& kc, SeqId s, int from, int to) {
  const float row[4] = {1, 2, 3, 4};
  for (int p = from; p < to; ++p) {
    kc.append(s, p);
    for (int l = 0; l < kc.layout().n_layer; ++l) kc.write(l, kc.slot_of(s, l, p), row, row);
  }
}

TEST(KVEvictRules, TovaKeepsTheLastQuerysBestAndDropsTheOlderOnATie) {
  KVCache kc(tiny_layout(KVEvict::kTova, 2, 0));
  const SeqId s = kc.add_sequence();
  append(kc, s, 0, 4);
  const double w0[4] = {0.1, 0.4, 0.2, 0.3}, w1[4] = {0.3, 0.2, 0.2, 0.3};
  kc.observe(s, 0, 4, w0);
  kc.observe(s, 1, 4, w1);
  EXPECT_EQ(kc.commit(s), 4);
  EXPECT_EQ(kc.positions(s, 0), (std::vector<int>{1, 3}));
  EXPECT_EQ(kc.positions(s, 1), (std::vector<int>{0, 3}));  // 0.3 twice: kept both; 0.2 twice: both dropped
  EXPECT_EQ(kc.positions(s), (std::vector<int>{0, 1, 3}));
  // Contiguous: each layer's K and V rows of what it holds.
  EXPECT_EQ(kc.bytes(), 4u * 2 * 16);
  KVCache tie(tiny_layout(KVEvict::kTova, 2, 0));
  const SeqId t = tie.add_sequence();
  append(tie, t, 0, 3);
  const double eq[3] = {0.25, 0.25, 0.25};
  tie.observe(t, 0, 3, eq);
  tie.observe(t, 1, 3, eq);
  tie.commit(t);
  EXPECT_EQ(tie.positions(t, 0), (std::vector<int>{1, 2}));  // equal weights: the older goes first
}

TEST(KVEvictRules, H2OKeepsTheRecentHalfAndTheHeaviestOfTheRest) {
  KVCache kc(tiny_layout(KVEvict::kH2O, 3, 0));  // R = 1 recent, 2 heavy hitters
  const SeqId s = kc.add_sequence();
  append(kc, s, 0, 5);
  // Two queries' weights accumulate: position 4 (the newest) is kept whatever its score.
  const double a[5] = {0.5, 0.1, 0.1, 0.3, 0.0}, b[5] = {0.1, 0.1, 0.6, 0.1, 0.1};
  for (int l = 0; l < 2; ++l) {
    kc.observe(s, l, 5, a);
    kc.observe(s, l, 5, b);
  }
  kc.commit(s);
  EXPECT_EQ(kc.positions(s, 0), (std::vector<int>{0, 2, 4}));  // sums 0.6, 0.2, 0.7, 0.4 | recent 4
  const std::vector<double> sc = kc.scores(s, 0);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_NEAR(sc[0], 0.6, 1e-12);
  EXPECT_NEAR(sc[1], 0.7, 1e-12);
  EXPECT_NEAR(sc[2], 0.1, 1e-12);
  // The next query adds to what survived; position 5 is now the recent one, 4 competes by score.
  append(kc, s, 5, 6);
  const double c[4] = {0.0, 0.0, 0.5, 0.5};
  kc.observe(s, 0, 4, c);
  kc.commit(s);
  EXPECT_EQ(kc.positions(s, 0), (std::vector<int>{2, 4, 5}));  // 0.6, 0.7, 0.6 | 5: the tie drops 0, the older
}

TEST(KVEvictRules, PagedSlotsAreReusedAndEmptyPagesReturned) {
  KVCache kc(tiny_layout(KVEvict::kTova, 2, 2));
  const SeqId s = kc.add_sequence();
  append(kc, s, 0, 6);  // slots 0..5 in 3 pages of 2, in both layers
  EXPECT_EQ(kc.blocks_held(), 3);
  const double w[6] = {0.4, 0.3, 0.1, 0.1, 0.05, 0.05};
  kc.observe(s, 0, 6, w);
  kc.observe(s, 1, 6, w);
  kc.commit(s);
  // Both layers keep 0 and 1 (slots 0, 1 of the first page): the other two pages go back.
  EXPECT_EQ(kc.blocks_held(), 1);
  EXPECT_EQ(kc.bytes(), 1u * 2 * 2 * 2 * 16);  // one page of 2 positions, K and V, 2 layers, 16-byte rows
  const int first_page = kc.slot_of(s, 0, 0).block;
  // Position 6 needs a slot: the lowest free one is slot 2, in a page taken afresh.
  append(kc, s, 6, 7);
  EXPECT_EQ(kc.blocks_held(), 2);
  const double w6[3] = {0.5, 0.1, 0.4};  // layer 0 drops 1 (slot 1); layer 1 drops 6
  const double v6[3] = {0.5, 0.4, 0.1};
  kc.observe(s, 0, 3, w6);
  kc.observe(s, 1, 3, v6);
  kc.commit(s);
  EXPECT_EQ(kc.positions(s, 0), (std::vector<int>{0, 6}));
  EXPECT_EQ(kc.positions(s, 1), (std::vector<int>{0, 1}));
  EXPECT_EQ(kc.blocks_held(), 2);  // layer 0 still holds 6 in the second page
  // Position 7 takes layer 0's freed slot 1 (the first page) and layer 1's slot 2.
  append(kc, s, 7, 8);
  EXPECT_EQ(kc.slot_of(s, 0, 7).block, first_page);
  EXPECT_EQ(kc.slot_of(s, 0, 7).slot, 1);
  EXPECT_EQ(kc.slot_of(s, 1, 7).slot, 0);
  EXPECT_NE(kc.slot_of(s, 1, 7).block, first_page);
  // Layer 0 keeps 0 and 7, layer 1 keeps 0 and 1: nothing in the second page any more.
  const double x0[3] = {0.5, 0.1, 0.4}, x1[3] = {0.5, 0.4, 0.1};
  kc.observe(s, 0, 3, x0);
  kc.observe(s, 1, 3, x1);
  kc.commit(s);
  EXPECT_EQ(kc.positions(s, 0), (std::vector<int>{0, 7}));
  EXPECT_EQ(kc.blocks_held(), 1);
  EXPECT_FALSE(kc.can_truncate(s, 3));
  EXPECT_THROW(kc.fork(s, 8), Error);
}

TEST(KVEvictRules, LayoutRefusesAWindowAndAMissingBudget) {
  KVLayout l = tiny_layout(KVEvict::kTova, 4, 0);
  l.window = 8;
  EXPECT_THROW(l.validate(), Error);
  l = tiny_layout(KVEvict::kH2O, 0, 0);
  EXPECT_THROW(l.validate(), Error);
  l = tiny_layout(KVEvict::kNone, 3, 0);
  EXPECT_THROW(l.validate(), Error);
  EXPECT_EQ(tiny_layout(KVEvict::kTova, 4, 0).visible_count(10), 5);
}

// --- the CLI -------------------------------------------------------------------

// Runs the CLI; returns the exit code, stdout+stderr in `out` (numpy_ref_util.h).
int (*const run)(const std::string&, std::string&, const testutil::TempDir&) = testutil::run_kvscope;

TEST(CliEvict, GenerateJsonCarriesEachLayersHeldPositionsAsTheReference) {
  testutil::TempDir tmp("cli-evict");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  std::shared_ptr<const Model> m = load_model(dir);
  const std::string text = "The quick brown fox jumps over the lazy dog";
  std::string id_list;
  for (int t : m->tokenizer.encode(text)) id_list += (id_list.empty() ? "" : ",") + std::to_string(t);
  testutil::run_numpy_ref("evref --model " + dir + " --kv-evict h2o --kv-budget 4 --kv-dtype f16 --prompt " + id_list +
                              " --steps 6 --out " + (tmp / "ref.json"),
                          tmp / "ref.log");
  const json ref = testutil::read_json(tmp / "ref.json");
  // This prompt's choices are clear of ties (else f32 rounding could flip one).
  ASSERT_GE(ref.at("min_margin").get<double>(), 2e-3);
  ASSERT_GE(ref.at("min_evict_margin").get<double>(), 2e-5);
  ASSERT_GE(ref.at("min_qmargin").get<double>(), 3e-4);
  std::string out;
  ASSERT_EQ(run("generate --model " + dir + " --prompt " + testutil::shell_quote(text) +
                    " --max-new 7 --greedy --json --kv-evict h2o --kv-budget 4 --kv-dtype f16 --kv-block 2",
                out, tmp),
            0)
      << out;
  std::istringstream lines(out);
  std::string line;
  size_t s = 0;
  std::vector<std::vector<int>> before_cli(2);
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    if (j.at("event") == "done") break;
    const json& st = ref.at("steps").at(s);
    EXPECT_EQ(j.at("token").get<int>(), st.at("token").get<int>()) << "step " << s;
    EXPECT_EQ(j.at("held_by_layer"), st.at("held")) << "step " << s;
    EXPECT_EQ(j.at("kv_bytes").get<uint64_t>() % (2ull * 2 * 2 * kv_row_bytes(KVDtype::kF16, 32)), 0u);
    // Each held position has its score; the rows dropped are what the layer held before, plus
    // the forward's new positions, less what it holds now (the reference's sets).
    const auto held = ref_held(st);
    for (size_t l = 0; l < held.size(); ++l) {
      EXPECT_EQ(j.at("scores_by_layer").at(l).size(), held[l].size()) << "step " << s;
      std::set<int> gone(before_cli[l].begin(), before_cli[l].end());
      const int seq_len = st.at("seq_len").get<int>();
      for (int p = s == 0 ? 0 : seq_len - 1; p < seq_len; ++p) gone.insert(p);
      for (int p : held[l]) gone.erase(p);
      std::set<int> dropped;
      for (const json& d : j.at("dropped_by_layer").at(l)) dropped.insert(d.at(0).get<int>());
      EXPECT_EQ(dropped, gone) << "step " << s << " layer " << l;
    }
    before_cli = held;
    ++s;
  }
  EXPECT_EQ(s, 7u);
}

TEST(CliEvict, BadCombinationsAreUsageErrorsNamingTheFlags) {
  testutil::TempDir tmp("cli-evict-bad");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string gen = "generate --model " + dir + " --prompt 'The fox' --max-new 3 ";
  testutil::expect_refused(
      {
          {gen + "--kv-evict tova --kv-budget 4 --kv-window 8", {"--kv-evict", "--kv-window"}},
          {gen + "--kv-evict tova", {"--kv-evict", "--kv-budget"}},
          {gen + "--kv-budget 4", {"--kv-budget", "--kv-evict"}},
          {gen + "--kv-evict lru --kv-budget 4", {"--kv-evict"}},
          {gen + "--kv-evict h2o --kv-budget 0", {"--kv-budget"}},
          {gen + "--kv-evict h2o --kv-budget 4 --no-cache", {"--no-cache", "--kv-evict"}},
          {gen + "--kv-evict h2o --kv-budget 4 --beams 2", {"--kv-evict", "--beams"}},
          {"eval --model " + dir + " --file " + dir + "/merges.txt --kv-evict tova --kv-budget 4 --kv-window 8",
           {"--kv-evict", "--kv-window"}},
          // A model with its own sliding window (Mistral's): the user's rule against the model's.
          {"generate --model " + testutil::llama_suite_dir() +
               "/mistral_gqa4_bf16_untied_window --prompt 'The fox' --max-new 3 --kv-evict tova --kv-budget 4",
           {"--kv-evict tova", "sliding_window = 8"}},
      },
      tmp);
}

}  // namespace
}  // namespace kvscope
