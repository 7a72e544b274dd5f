// `kvscope serve`'s driver: every request's tokens equal the float64 NumPy
// reference's greedy continuation (tools/numpy_ref*.py) and what `generate`
// (Generator) writes for it alone with the same settings, whatever the
// arrivals, pool size (preemption), prefix caching and chunking.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/serving/server.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

// A reference greedy sequence: prompt + n_steps + 1 tokens, each choice clear of a tie.
struct RefCase {
  std::string dir;
  std::vector<int> tokens;
  int n_prompt = 0;
};

RefCase load_ref(const std::string& dir) {
  const json ref = testutil::read_json(dir + "/ref.json");
  return RefCase{dir, ref.at("tokens").get<std::vector<int>>(), static_cast<int>(ref.at("prompt").size())};
}

// generate's stop rules applied to the reference continuation from `start`.
std::vector<int> expected(const RefCase& rc, int start, int max_new, const Config& c) {
  std::vector<int> out;
  for (int p = start; p < static_cast<int>(rc.tokens.size()) && static_cast<int>(out.size()) < max_new; ++p) {
    const int t = rc.tokens[static_cast<size_t>(p)];
    out.push_back(t);
    const bool eos =
        t == c.eos_token_id || std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), t) != c.eos_token_ids.end();
    if (eos || p >= c.n_positions) break;
  }
  return out;
}

struct ServeRun {
  int pool_blocks, max_batch_tokens, max_running;
  bool caching;
};

struct Totals {
  int preemptions = 0, hits = 0, steps = 0;
};

// Serves `reqs` to the end, checking after every step that the cache holds
// exactly the blocks the scheduler accounts (used + cached-but-free).
Totals serve_all(Server& s) {
  Totals t;
  while (auto r = s.step()) {
    ++t.steps;
    t.preemptions += static_cast<int>(r->preempted.size());
    t.hits += r->prefix_hit_blocks;
    const BlockPool& pool = s.scheduler().pool();
    EXPECT_EQ(s.cache().blocks_held(), pool.used_count() + pool.cached_free_count()) << "step " << r->step;
    EXPECT_LE(r->blocks_used, pool.n_blocks());
    // The record's pool snapshot: the running requests' tables cover exactly the used blocks.
    std::set<int> held;
    for (const std::vector<int>& t : r->tables) held.insert(t.begin(), t.end());
    EXPECT_EQ(static_cast<int>(held.size()), r->blocks_used) << "step " << r->step;
    int cached = 0;
    for (uint8_t c : r->block_cached) cached += c;
    EXPECT_EQ(cached, r->blocks_cached) << "step " << r->step;
    if (t.steps > 10000) {
      ADD_FAILURE() << "serving did not end";
      break;
    }
  }
  return t;
}

ServeOptions options(const ServeRun& r, int block, KVDtype dtype = KVDtype::kF32) {
  ServeOptions o;
  o.kv.dtype = dtype;
  o.kv.block = block;
  o.sched.pool_blocks = r.pool_blocks;
  o.sched.max_batch_tokens = r.max_batch_tokens;
  o.sched.max_running = r.max_running;
  o.sched.prefix_caching = r.caching;
  return o;
}

// Requests whose prompts are prefixes of the reference sequence (so their
// greedy continuations are the reference's rest, and they share prefixes),
// arriving spread over the first steps. `control`: how the model loads.
void check_against_reference(const RefCase& rc, const LoadControl& control = {}) {
  std::shared_ptr<const Model> m = load_model(rc.dir, control);
  const int extra[] = {0, 2, 5, 9, 13, 4}, arrive[] = {0, 0, 1, 3, 4, 6};
  int max_new[] = {12, 10, 8, 9, 11, 6};
  std::vector<ServeRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    ServeRequest q;
    q.id = "r" + std::to_string(i);
    q.prompt.assign(rc.tokens.begin(), rc.tokens.begin() + rc.n_prompt + extra[i]);
    // Within the reference: it has prompt + n_steps + 1 tokens.
    max_new[i] = std::min(max_new[i], static_cast<int>(rc.tokens.size()) - rc.n_prompt - extra[i]);
    ASSERT_GE(max_new[i], 5);
    q.max_new = max_new[i];
    q.arrive = arrive[i];
    reqs.push_back(q);
  }
  const int block = 4;
  int need = 0;
  for (const ServeRequest& q : reqs)
    need = std::max(need, blocks_needed(static_cast<int>(q.prompt.size()), q.max_new, m->config.n_positions, block));
  const ServeRun runs[] = {{64, 256, 16, false}, {64, 256, 16, true},     {need, 7, 16, false},
                           {need, 7, 16, true},  {need + 2, 64, 3, true}, {64, 256, 1, false}};
  for (const ServeRun& run : runs) {
    SCOPED_TRACE("pool " + std::to_string(run.pool_blocks) + " T " + std::to_string(run.max_batch_tokens) + " R " +
                 std::to_string(run.max_running) + (run.caching ? " prefix caching" : ""));
    Server s(m, reqs, options(run, block));
    const Totals t = serve_all(s);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(s.result(static_cast<int>(i)).tokens, expected(rc, rc.n_prompt + extra[i], max_new[i], m->config))
          << reqs[i].id;
    }
    if (run.pool_blocks == need) {
      EXPECT_GT(t.preemptions, 0) << "the small pool forces preemption";
    }
    if (run.caching) {
      EXPECT_GT(t.hits, 0) << "shared prefixes hit the cache";
    } else {
      EXPECT_EQ(t.hits, 0);
    }
  }
}

TEST(Serve, Gpt2MatchesNumpyReference) {
  check_against_reference(load_ref(testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers")));
}

TEST(Serve, Gpt2F16MatchesNumpyReference) {
  check_against_reference(load_ref(testutil::suite_checkpoint("l3h4d48_f16_noprefix")));
}

TEST(Serve, LlamaMatchesNumpyReference) {
  check_against_reference(load_ref(testutil::llama_suite_dir() + "/llama_gqa3_bf16_untied_sharded_llama3"));
}

TEST(Serve, QwenMatchesNumpyReference) {
  check_against_reference(load_ref(testutil::llama_suite_dir() + "/qwen2_gqa4_f32_bias_sharded"));
}

// --bf16-products: against the reference that rounds every product's inputs to bf16.
TEST(Serve, Bf16ProductsMatchTheRoundedReference) {
  LoadControl control;
  control.bf16_products = true;
  check_against_reference(load_ref(testutil::llama_suite_dir() + "/llama_gqa3_bf16_products"), control);
}

// Sampled requests (each with its own seed) sharing a system prompt: each
// writes what Generator writes for it alone with the same sampler and cache
// layout, under preemption and prefix caching.
void check_against_generate(const std::string& dir, KVDtype dtype) {
  std::shared_ptr<const Model> m = load_model(dir);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(0, m->config.vocab_size - 1);
  std::vector<int> system;
  for (int i = 0; i < 9; ++i) system.push_back(tok(rng));
  std::vector<ServeRequest> reqs;
  for (int i = 0; i < 5; ++i) {
    ServeRequest q;
    q.id = std::to_string(i);
    q.prompt = system;
    for (int k = 0; k < 1 + 2 * i; ++k) q.prompt.push_back(tok(rng));
    q.max_new = 6 + 3 * i;
    q.arrive = i;
    q.sampler.greedy = i == 0;
    q.sampler.temperature = 0.8f + 0.1f * static_cast<float>(i);
    q.sampler.top_k = i == 2 ? 5 : 0;
    q.sampler.top_p = i == 3 ? 0.9f : 1.0f;
    q.sampler.repetition_penalty = i == 4 ? 1.3f : 1.0f;
    q.sampler.seed = 100 + static_cast<uint64_t>(i);
    reqs.push_back(q);
  }
  const int block = 4;
  for (const ServeRun& run : {ServeRun{64, 256, 16, true}, ServeRun{10, 5, 16, true}, ServeRun{10, 64, 16, false}}) {
    SCOPED_TRACE("pool " + std::to_string(run.pool_blocks) + (run.caching ? " prefix caching" : ""));
    Server s(m, reqs, options(run, block, dtype));
    const Totals t = serve_all(s);
    if (run.pool_blocks == 10) {
      EXPECT_GT(t.preemptions, 0);
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      GenerateOptions opt;
      opt.max_new = reqs[i].max_new;
      opt.sampler = reqs[i].sampler;
      opt.kv.dtype = dtype;
      opt.kv.block = block;
      Generator g(m);
      g.start_tokens(reqs[i].prompt, opt);
      while (g.step()) {
      }
      const std::vector<int> alone(g.tokens().begin() + g.n_prompt(), g.tokens().end());
      EXPECT_EQ(s.result(static_cast<int>(i)).tokens, alone) << "request " << i;
      EXPECT_EQ(s.result(static_cast<int>(i)).reason, g.reason()) << "request " << i;
    }
  }
}

// A request arriving after the others are done starts at its own step (idle
// steps are skipped, not run) and is served alone at once: TTFT one step.
TEST(Serve, ALateArrivalStartsAtItsStep) {
  const RefCase rc = load_ref(testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers"));
  std::shared_ptr<const Model> m = load_model(rc.dir);
  std::vector<ServeRequest> reqs(2);
  for (int i = 0; i < 2; ++i) {
    reqs[static_cast<size_t>(i)].id = std::to_string(i);
    reqs[static_cast<size_t>(i)].prompt.assign(rc.tokens.begin(), rc.tokens.begin() + rc.n_prompt);
    reqs[static_cast<size_t>(i)].max_new = 4;
  }
  reqs[1].arrive = 40;
  Server s(m, reqs, options(ServeRun{16, 64, 4, true}, 4));
  std::vector<int> steps;
  while (auto r = s.step()) steps.push_back(r->step);
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3, 40, 41, 42, 43}));
  EXPECT_EQ(s.result(1).first_token_step, 40);
  EXPECT_EQ(s.result(1).finish_step, 43);
  EXPECT_EQ(s.result(1).tokens, s.result(0).tokens);
  EXPECT_EQ(s.result(0).tokens, expected(rc, rc.n_prompt, 4, m->config));
}

// A model with its own sliding window (Mistral's sliding_window = 8): a prefix
// hit would share blocks the window evicts and a preempted request recomputes
// from position 0, so serving refuses it up front as a usage error naming the
// folder and the field, before any step runs.
TEST(Serve, RefusesAModelWithItsOwnSlidingWindow) {
  const std::string dir = testutil::llama_suite_dir() + "/mistral_gqa4_bf16_untied_window";
  const RefCase rc = load_ref(dir);
  std::shared_ptr<const Model> m = load_model(dir);
  ASSERT_EQ(m->config.sliding_window, 8);
  std::vector<ServeRequest> reqs(2);
  for (int i = 0; i < 2; ++i) {
    reqs[static_cast<size_t>(i)].id = std::to_string(i);
    reqs[static_cast<size_t>(i)].prompt.assign(rc.tokens.begin(), rc.tokens.begin() + rc.n_prompt);
    reqs[static_cast<size_t>(i)].max_new = 12;
    reqs[static_cast<size_t>(i)].arrive = 3 * i;
  }
  for (bool caching : {true, false}) {
    try {
      Server s(m, reqs, options(ServeRun{64, 256, 4, caching}, 4));
      while (s.step()) {
      }
      ADD_FAILURE() << "expected a usage error (prefix caching " << caching << ")";
    } catch (const UsageError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(dir), std::string::npos) << w;
      EXPECT_NE(w.find("sliding_window = 8"), std::string::npos) << w;
    } catch (const Error& e) {
      ADD_FAILURE() << "not a usage error: " << e.what();
    }
  }
}

// Serving takes the one KV layout type, which can also hold a window or an
// eviction rule (the CLI offers neither to serve): the Server refuses both as
// a usage error naming the layout, since it keeps every position.
TEST(Serve, RefusesALayoutThatDropsPositions) {
  const RefCase rc = load_ref(testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers"));
  std::shared_ptr<const Model> m = load_model(rc.dir);
  std::vector<ServeRequest> reqs(1);
  reqs[0].id = "0";
  reqs[0].prompt.assign(rc.tokens.begin(), rc.tokens.begin() + rc.n_prompt);
  ServeOptions window = options(ServeRun{16, 64, 4, false}, 4), evict = window;
  window.kv.window = 8;
  evict.kv.evict = KVEvict::kTova;
  evict.kv.budget = 8;
  for (const ServeOptions& o : {window, evict}) {
    try {
      Server s(m, reqs, o);
      ADD_FAILURE() << "expected a usage error for " << o.kv.describe();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(o.kv.describe()), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(Server(m, reqs, options(ServeRun{16, 64, 4, false}, 4)));
}

TEST(Serve, SampledRequestsMatchGenerateAloneGpt2) {
  check_against_generate(testutil::suite_checkpoint("l2h4d64_f16_prefix_u8buffers"), KVDtype::kF16);
}

TEST(Serve, SampledRequestsMatchGenerateAloneLlama) {
  check_against_generate(testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single", KVDtype::kF32);
}

}  // namespace
}  // namespace kvscope
