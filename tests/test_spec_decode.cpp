// Speculative decoding on real models (model/decoding/speculative_generator.*): with greedy
// settings it writes exactly plain greedy's tokens for K = 1..8, on random
// checkpoint pairs (the target's tokens also equal the float64 NumPy greedy
// reference) and on the shipped pair; after every rollback both caches
// equal a fresh prefill of the accepted prefix (values and bytes); sampled,
// the first emitted token follows the target's distribution from the
// reference; a draft with another tokenizer is refused naming both folders;
// models with their own sliding window (target, draft, both) roll back and
// still write the reference's tokens; a stop token ends the text as in plain
// decoding.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "decode_ref_util.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"

namespace kvscope {
namespace {

using testutil::json;

const std::string kTarget = "l2h2d32_f32_prefix_buffers";  // numpy_ref suite: prompt with clear greedy margins

std::string assets(const std::string& name) {
  return std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/" + name;
}

// A random draft sharing the suite target's tokenizer (and vocabulary).
std::string make_draft(const testutil::TempDir& tmp, const std::string& name, const std::string& shape, int seed) {
  const std::string target = testutil::suite_checkpoint(kTarget);
  const json cfg = testutil::read_json(target + "/config.json");
  const std::string dir = tmp / name;
  testutil::run_numpy_ref("make --out " + testutil::shell_quote(dir) + " " + shape + " --ctx " +
                              std::to_string(cfg.at("n_positions").get<int>()) + " --vocab " +
                              std::to_string(cfg.at("vocab_size").get<int>()) + " --seed " + std::to_string(seed) +
                              " --tokenizer-dir " + testutil::shell_quote(target),
                          tmp / (name + ".log"));
  return dir;
}

std::vector<int> plain_greedy(std::shared_ptr<const Model> m, const std::vector<int>& prompt, int max_new) {
  Generator g(m);
  GenerateOptions opt;
  opt.max_new = max_new;
  g.start_tokens(prompt, opt);
  while (g.step()) {
  }
  return g.tokens();
}

std::vector<int> spec_greedy(std::shared_ptr<const Model> target, std::shared_ptr<const Model> draft,
                             const std::vector<int>& prompt, int max_new, int k, int* accepted = nullptr,
                             int* drafted = nullptr) {
  SpeculativeDecoder d(target, draft);
  SpecOptions opt;
  opt.k = k;
  opt.max_new = max_new;
  d.start_tokens(prompt, opt);
  while (d.step()) {
  }
  if (accepted) *accepted = d.accepted_total();
  if (drafted) *drafted = d.drafted_total();
  return d.tokens();
}

TEST(SpeculativeDecoding, GreedyEqualsPlainGreedyOnRandomPairs) {
  testutil::TempDir tmp("spec-pairs");
  const json ref = testutil::read_json(testutil::suite_checkpoint(kTarget) + "/ref.json");
  const std::vector<int> prompt = ref.at("prompt").get<std::vector<int>>();
  const std::vector<int> ref_tokens = ref.at("tokens").get<std::vector<int>>();
  const int max_new = ref.at("n_steps").get<int>() + 1;
  auto target = load_model(testutil::suite_checkpoint(kTarget));
  ASSERT_EQ(plain_greedy(target, prompt, max_new), ref_tokens);
  struct Draft {
    std::shared_ptr<const Model> m;
    bool same;
  };
  std::vector<Draft> drafts = {
      {load_model(make_draft(tmp, "d1", "--layers 1 --heads 1 --embd 16", 11)), false},
      {load_model(make_draft(tmp, "d2", "--layers 2 --heads 2 --embd 32 --dtype F16", 12)), false},
      {target, true},  // the target drafting for itself: everything is accepted
  };
  for (size_t di = 0; di < drafts.size(); ++di) {
    for (int k = 1; k <= 8; ++k) {
      int accepted = 0, drafted = 0;
      EXPECT_EQ(spec_greedy(target, drafts[di].m, prompt, max_new, k, &accepted, &drafted), ref_tokens)
          << "draft " << di << " K=" << k;
      if (drafts[di].same) {
        EXPECT_EQ(accepted, drafted) << "K=" << k;
        EXPECT_GT(drafted, 0);
      }
    }
  }
}

TEST(SpeculativeDecoding, GreedyEqualsPlainGreedyOnTheShippedPair) {
  auto target = load_model(assets("kvscope-tiny"));
  auto draft = load_model(assets("kvscope-draft"));
  for (const char* p : {"Once upon a time", "The capital of France is"}) {
    const std::vector<int> prompt = target->tokenizer.encode(p);
    const std::vector<int> plain = plain_greedy(target, prompt, 40);
    for (int k = 1; k <= 8; ++k) EXPECT_EQ(spec_greedy(target, draft, prompt, 40, k), plain) << p << " K=" << k;
  }
}

// The cache's first n positions against a fresh prefill of tokens[0, n).
void expect_cache_is_fresh_prefill(const Model& m, const KVCache& cache, const std::vector<int>& tokens, int n,
                                   const std::string& where) {
  ASSERT_EQ(cache.length(0), n) << where;
  Engine e(m);
  KVCache fresh(KVLayout::for_model(m.config));
  e.forward(std::vector<int>(tokens.begin(), tokens.begin() + n), 0, &fresh, false);
  EXPECT_EQ(cache.bytes(), fresh.bytes()) << where;
  double worst = 0;
  const int d = cache.layout().kv_dim();
  std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
  for (int l = 0; l < m.config.n_layer; ++l) {
    for (int p = 0; p < n; ++p) {
      for (bool v : {false, true}) {
        cache.read_row(l, cache.slot_of(0, p), v, a.data());
        fresh.read_row(l, fresh.slot_of(0, p), v, b.data());
        for (int i = 0; i < d; ++i)
          worst =
              std::max(worst, static_cast<double>(std::fabs(a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)])));
      }
    }
  }
  EXPECT_LT(worst, 1e-4) << where;
}

TEST(SpeculativeDecoding, RollbackLeavesFreshPrefillOfAcceptedPrefix) {
  testutil::TempDir tmp("spec-rollback");
  auto target = load_model(testutil::suite_checkpoint(kTarget));
  auto draft = load_model(make_draft(tmp, "d", "--layers 1 --heads 2 --embd 16", 21));
  SpeculativeDecoder d(target, draft);
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = 30;
  opt.sampler.greedy = false;
  opt.sampler.seed = 3;
  d.start_tokens({5, 17, 40, 2}, opt);
  int rejections = 0;
  while (SpecIterationPtr it = d.step()) {
    const std::string where = "iteration " + std::to_string(it->index);
    const int len = static_cast<int>(d.tokens().size());
    expect_cache_is_fresh_prefill(*target, d.target_cache(), d.tokens(), len - 1, where + " target");
    // The draft never ran its last drafted token when all were accepted.
    const int draft_len = it->bonus && it->k > 0 ? len - 2 : len - 1;
    if (!d.done()) expect_cache_is_fresh_prefill(*draft, d.draft_cache(), d.tokens(), draft_len, where + " draft");
    EXPECT_EQ(it->target_kv_bytes, d.target_cache().bytes());
    rejections += it->bonus ? 0 : 1;
    if (!it->bonus) {
      EXPECT_GT(it->target_rolled_back, 0) << where;
    }
  }
  EXPECT_GT(rejections, 0);
}

TEST(SpeculativeDecoding, SampledFirstTokenFollowsTargetDistribution) {
  testutil::TempDir tmp("spec-sampled");
  auto target = load_model(testutil::suite_checkpoint(kTarget));
  auto draft = load_model(make_draft(tmp, "d", "--layers 1 --heads 1 --embd 16", 31));
  const std::vector<int> prompt = {9, 120, 33};
  SamplerSettings s;
  s.greedy = false;
  s.temperature = 1.0f;
  s.top_k = 6;
  // The reference distribution of the target's next token (float64 forward).
  testutil::run_numpy_ref("ref --model " + testutil::shell_quote(testutil::suite_checkpoint(kTarget)) +
                              " --prompt 9,120,33 --steps 0 --out " + testutil::shell_quote(tmp / "ref.json"),
                          tmp / "ref.log");
  const std::vector<float> logits =
      testutil::read_json(tmp / "ref.json").at("steps").at(0).at("logits").get<std::vector<float>>();
  testutil::write_file(tmp / "in.json", json{{"cases",
                                              {{{"logits_p", logits},
                                                {"logits_q", logits},
                                                {"temperature", 1.0},
                                                {"top_k", 6},
                                                {"top_p", 1.0},
                                                {"greedy", false}}}}}
                                            .dump());
  testutil::run_decode_ref(
      "dist --in " + testutil::shell_quote(tmp / "in.json") + " --out " + testutil::shell_quote(tmp / "out.json"),
      tmp / "dist.log");
  const std::vector<double> p =
      testutil::read_json(tmp / "out.json").at("cases").at(0).at("p").get<std::vector<double>>();
  constexpr int kSeeds = 10000;
  std::vector<double> hist(p.size(), 0.0);
  SpeculativeDecoder d(target, draft);
  int rejected = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    SpecOptions opt;
    opt.k = 2;
    opt.max_new = 3;
    opt.sampler = s;
    opt.sampler.seed = static_cast<uint64_t>(seed);
    d.start_tokens(prompt, opt);
    SpecIterationPtr it = d.step();
    ASSERT_TRUE(it);
    rejected += it->n_accepted == 0 ? 1 : 0;
    hist[static_cast<size_t>(it->emitted.at(0))] += 1.0 / kSeeds;
  }
  double tv = 0;
  for (size_t i = 0; i < p.size(); ++i) tv += std::fabs(hist[i] - p[i]) / 2;
  EXPECT_LT(tv, 0.02);
  EXPECT_GT(rejected, kSeeds / 20);
}

TEST(SpeculativeDecoding, RefusesADraftWithAnotherTokenizer) {
  auto target = load_model(assets("kvscope-tiny"));
  auto other = load_model(testutil::suite_checkpoint(kTarget));
  try {
    SpeculativeDecoder d(target, other);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find(target->dir), std::string::npos) << w;
    EXPECT_NE(w.find(other->dir), std::string::npos) << w;
    EXPECT_NE(w.find("tokenizer"), std::string::npos) << w;
  }
}

// Llama-family folders carry tokenizer.json, not vocab.json: a pair that
// shares one drafts (and writes plain greedy's tokens); a pair whose ids
// mean other bytes is refused naming the first such id.
TEST(SpeculativeDecoding, LlamaFamilyPairsShareATokenizerJson) {
  const std::string suite = testutil::llama_suite_dir();
  auto target = load_model(suite + "/llama_gqa3_bf16_untied_sharded_llama3");
  auto draft = load_model(suite + "/llama_gqa1_f32_tied_single");
  const std::vector<int> prompt = {1, 2, 3, 4};
  EXPECT_EQ(spec_greedy(target, draft, prompt, 6, 3), plain_greedy(target, prompt, 6));
  try {
    SpeculativeDecoder d(target, load_model(assets("kvscope-tiny")));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("must share a tokenizer"), std::string::npos) << w;
    EXPECT_NE(w.find("tokens"), std::string::npos) << w;
  }
}

// The stop-token rule, in the library: with eos_token_id a list that also
// names ".", greedy plain and speculative decoding stop on the same "." and
// their text is the generated tokens less that one, decoded; with
// ignore_eos the stop ids are ordinary tokens and stay in both texts.
TEST(SpeculativeDecoding, AStopTokenEndsTheTextAsInPlainDecoding) {
  testutil::TempDir tmp("spec-stop");
  const std::string dir = tmp / "tiny-dot";
  testutil::fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    testutil::fs::copy_file(assets("kvscope-tiny") + "/" + f, dir + "/" + f);
  json cfg = testutil::read_json(dir + "/config.json");
  auto shipped = load_model(assets("kvscope-tiny"));
  const std::vector<int> dot = shipped->tokenizer.encode(".");
  ASSERT_EQ(dot.size(), 1u);
  cfg["eos_token_id"] = {cfg.at("eos_token_id").get<int>(), dot[0]};
  testutil::write_file(dir + "/config.json", cfg.dump());
  auto target = load_model(dir);
  auto draft = load_model(assets("kvscope-draft"));
  const std::vector<int> prompt = target->tokenizer.encode_prompt("Once upon a time");
  const int n = static_cast<int>(prompt.size());
  for (bool ignore_eos : {false, true}) {
    Generator g(target);
    GenerateOptions gopt;
    gopt.max_new = 60;
    gopt.ignore_eos = ignore_eos;
    g.start_tokens(prompt, gopt);
    while (g.step()) {
    }
    SpeculativeDecoder d(target, draft);
    SpecOptions sopt;
    sopt.max_new = 60;
    sopt.ignore_eos = ignore_eos;
    d.start_tokens(prompt, sopt);
    while (d.step()) {
    }
    EXPECT_EQ(d.tokens(), g.tokens()) << "ignore_eos " << ignore_eos;
    std::vector<int> gen(g.tokens().begin() + n, g.tokens().end());
    if (!ignore_eos) {
      ASSERT_EQ(g.reason(), StopReason::kEos);
      ASSERT_EQ(d.reason(), StopReason::kEos);
      ASSERT_EQ(gen.back(), dot[0]);
      gen.pop_back();
    } else {
      EXPECT_NE(std::find(gen.begin(), gen.end(), dot[0]), gen.end()) << "the run must pass a stop id";
    }
    EXPECT_EQ(g.text(), target->tokenizer.decode(gen)) << "ignore_eos " << ignore_eos;
    EXPECT_EQ(d.text(), target->tokenizer.decode(gen)) << "ignore_eos " << ignore_eos;
  }
}

// A copy of suite checkpoint `name` that is a Mistral-style model with its
// own sliding window W (config.json: model_type mistral, sliding_window W).
std::string windowed_copy(const testutil::TempDir& tmp, const std::string& name, int window) {
  const std::string src = testutil::llama_suite_dir() + "/" + name;
  const std::string dir = tmp / (name + "-w" + std::to_string(window));
  testutil::fs::create_directories(dir);
  for (const auto& e : testutil::fs::directory_iterator(src))
    testutil::fs::copy_file(e.path(), testutil::fs::path(dir) / e.path().filename());
  json cfg = testutil::read_json(dir + "/config.json");
  cfg["model_type"] = "mistral";
  cfg["sliding_window"] = window;
  testutil::write_file(dir + "/config.json", cfg.dump());
  return dir;
}

// Models with their own sliding window (Mistral's sliding_window) as the
// target, the draft or both: every rejected draft rolls a cache back past
// what the window alone would keep, so each cache holds K positions more.
// Greedy speculation writes the float64 NumPy greedy reference's tokens
// (computed with the target's window; Leviathan et al.: greedy speculative
// output equals the target's greedy output), which plain greedy decoding
// with that window also writes, for K = 1..8, contiguous and paged; no
// cache ever holds more than W + K positions.
TEST(SpeculativeDecoding, ModelsWithTheirOwnSlidingWindowRollBack) {
  testutil::TempDir tmp("spec-window");
  const std::string suite = testutil::llama_suite_dir();
  auto windowed = load_model(suite + "/mistral_gqa4_bf16_untied_window");
  auto plain = load_model(suite + "/llama_gqa1_f32_tied_single");
  auto windowed_draft = load_model(windowed_copy(tmp, "llama_gqa1_f32_tied_single", 3));
  ASSERT_EQ(windowed->config.sliding_window, 8);
  ASSERT_EQ(windowed_draft->config.sliding_window, 3);
  struct Case {
    std::shared_ptr<const Model> target, draft;
    std::string ref, what;
  };
  const std::vector<Case> cases = {{windowed, plain, "mistral_gqa4_bf16_untied_window", "window on the target"},
                                   {plain, windowed, "llama_gqa1_f32_tied_single", "window on the draft"},
                                   {windowed, windowed_draft, "mistral_gqa4_bf16_untied_window", "windows on both"}};
  for (const Case& c : cases) {
    const json ref = testutil::read_json(suite + "/" + c.ref + "/ref.json");
    const std::vector<int> prompt = ref.at("prompt").get<std::vector<int>>();
    const std::vector<int> ref_tokens = ref.at("tokens").get<std::vector<int>>();
    const int max_new = static_cast<int>(ref_tokens.size() - prompt.size());
    ASSERT_GT(static_cast<int>(ref_tokens.size()), 8 + 4) << "the run must outgrow the window";
    EXPECT_EQ(plain_greedy(c.target, prompt, max_new), ref_tokens) << c.what << ": plain greedy";
    for (int block : {0, 4}) {
      for (int k = 1; k <= 8; ++k) {
        const std::string where = c.what + " K=" + std::to_string(k) + " block " + std::to_string(block);
        SpeculativeDecoder d(c.target, c.draft);
        SpecOptions opt;
        opt.k = k;
        opt.max_new = max_new;
        opt.kv.block = block;
        try {
          d.start_tokens(prompt, opt);
          while (SpecIterationPtr it = d.step()) {
            for (const KVCache* cache : {&d.target_cache(), &d.draft_cache()}) {
              const int w = cache->layout().window;
              if (w > 0) {
                EXPECT_LE(cache->n_held(0), w + k) << where;
              }
            }
          }
        } catch (const Error& e) {
          ADD_FAILURE() << where << ": " << e.what();
          continue;
        }
        EXPECT_EQ(d.tokens(), ref_tokens) << where;
        if (k > 1) {
          EXPECT_LT(d.accepted_total(), d.drafted_total()) << where << ": no draft was rejected";
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvscope
