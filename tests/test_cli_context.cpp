// The context a Llama-family model runs at: by default its
// max_position_embeddings up to kLlamaContextCap (the KV cache is reserved
// whole), --ctx N for another size up to the model's own limit, and a usage
// error naming --ctx when a prompt plus --max-new would not fit what was
// reserved while the model allows more.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "app/session/session.h"
#include "model/arch/config.h"
#include "model/arch/model.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::json;

int run(const std::string& args, std::string& out, const testutil::TempDir& tmp) {
  return testutil::run_kvscope(args, out, tmp);
}

// A copy of a small suite checkpoint whose config.json allows `max_pos` positions
// (RoPE has no learned table, so the weights do not change).
std::string with_max_positions(const testutil::TempDir& tmp, int max_pos) {
  const std::string dir = tmp / ("llama-" + std::to_string(max_pos));
  fs::copy(testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single", dir, fs::copy_options::recursive);
  json c = testutil::read_json(dir + "/config.json");
  c["max_position_embeddings"] = max_pos;
  testutil::write_file(dir + "/config.json", c.dump(1));
  return dir;
}

TEST(CliContext, DefaultIsCappedAndCtxReservesWhatItSays) {
  testutil::TempDir tmp("cli-ctx");
  const std::string dir = with_max_positions(tmp, 131072);
  std::string out;
  ASSERT_EQ(run("inspect --json --model " + dir, out, tmp), 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["n_positions"], kLlamaContextCap);
  EXPECT_EQ(j["max_position_embeddings"], 131072);
  const uint64_t per = j["kv_bytes_per_token"];
  EXPECT_EQ(j["kv_bytes_full_context"].get<uint64_t>(), per * kLlamaContextCap);

  ASSERT_EQ(run("inspect --json --ctx 20000 --model " + dir, out, tmp), 0) << out;
  j = json::parse(out);
  EXPECT_EQ(j["n_positions"], 20000);
  EXPECT_EQ(j["kv_bytes_full_context"].get<uint64_t>(), per * 20000);

  // The library: the KV cache a generator reserves follows the context.
  LoadControl control;
  control.context = 300;
  const auto m = load_model(dir, control);
  EXPECT_EQ(m->config.n_positions, 300);
  EXPECT_EQ(m->config.max_position_embeddings, 131072);
  EXPECT_EQ(KVLayout::for_model(m->config).n_ctx, 300);
  ASSERT_EQ(run("inspect --model " + dir, out, tmp), 0) << out;
  EXPECT_NE(out.find("the model allows 131072; --ctx"), std::string::npos) << out;
}

TEST(CliContext, OutOfRangeCtxIsAUsageErrorNamingIt) {
  testutil::TempDir tmp("cli-ctx-bad");
  const std::string dir = with_max_positions(tmp, 4096);
  std::string out;
  EXPECT_EQ(run("inspect --ctx 5000 --model " + dir, out, tmp), 2) << out;
  EXPECT_NE(out.find("--ctx 5000 exceeds"), std::string::npos) << out;
  EXPECT_NE(out.find("max_position_embeddings (4096)"), std::string::npos) << out;
  EXPECT_EQ(run("generate --prompt hi --ctx 1 --model " + dir, out, tmp), 2) << out;
  EXPECT_NE(out.find("--ctx"), std::string::npos) << out;
  // GPT-2's context is its learned position table.
  EXPECT_EQ(run("generate --prompt hi --ctx 64 --model " + testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers"),
                out, tmp),
            2)
      << out;
  EXPECT_NE(out.find("GPT-2"), std::string::npos) << out;
}

TEST(CliContext, GenerationThatWouldNotFitNamesCtx) {
  testutil::TempDir tmp("cli-ctx-fit");
  const std::string dir = with_max_positions(tmp, 64);
  std::string out;
  // "hello there" + 40 new tokens in 16 reserved positions of the model's 64: refused up front.
  for (const char* extra : {"", " --beams 2"}) {
    EXPECT_EQ(run("generate --prompt 'hello there' --max-new 40 --ctx 16 --model " + dir + extra, out, tmp), 2) << out;
    EXPECT_NE(out.find("pass --ctx "), std::string::npos) << out;
    EXPECT_NE(out.find("--max-new 40"), std::string::npos) << out;
  }
  const auto m = load_model(dir);
  const int n_prompt = static_cast<int>(m->tokenizer.encode_prompt("hello there").size());
  EXPECT_NE(out.find("pass --ctx " + std::to_string(n_prompt + 39) + " "), std::string::npos) << out;
  // What the message asks for runs: it stops at --max-new (or an end-of-text token), not at a full context.
  ASSERT_EQ(run("generate --json --prompt 'hello there' --max-new 40 --ctx " + std::to_string(n_prompt + 39) +
                    " --model " + dir,
                out, tmp),
            0)
      << out;
  const std::string tail = out.substr(out.rfind("{\"event\":\"done\""));
  EXPECT_EQ(tail.find("context_full"), std::string::npos) << tail;
  // Up to the model's own limit generation stops at "context full", as for GPT-2.
  ASSERT_EQ(run("generate --json --prompt 'hello there' --max-new 100 --model " + dir, out, tmp), 0) << out;
  EXPECT_TRUE(out.find("context_full") != std::string::npos || out.find("\"eos\"") != std::string::npos) << out;
}

// bench --positions runs after a cached prefix of 64 tokens: a context of 64
// has no room for it, said as such rather than as an empty range "1..0".
TEST(CliContext, BenchPositionsNeedsAContextBeyondItsPrefix) {
  testutil::TempDir tmp("cli-ctx-bench");
  const std::string dir = with_max_positions(tmp, 64);
  std::string out;
  EXPECT_EQ(run("bench --positions 1 --reps 1 --model " + dir, out, tmp), 2) << out;
  EXPECT_NE(out.find("--positions: "), std::string::npos) << out;
  EXPECT_NE(out.find("context is 64 positions, too short for bench's cached prefix of 64 tokens"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("1..0"), std::string::npos) << out;
  EXPECT_EQ(out.find("layers, width"), std::string::npos) << "checked before the header: " << out;
  const std::string longer = with_max_positions(tmp, 72);
  ASSERT_EQ(run("bench --positions 8 --reps 1 --json --model " + longer, out, tmp), 0) << out;
  EXPECT_EQ(run("bench --positions 9 --reps 1 --model " + longer, out, tmp), 2) << out;
  EXPECT_NE(out.find("--positions: 9 is outside 1..8"), std::string::npos) << out;
}

#ifdef KVSCOPE_TESTS_RENDERER
constexpr bool kRenderer = true;
#else
constexpr bool kRenderer = false;  // a KVSCOPE_GUI=OFF build's kvscope refuses `render` before reading flags
#endif

TEST(CliContext, WindowAndRenderTakeCtxCheckedLikeTheSubcommands) {
  testutil::TempDir tmp("cli-ctx-window");
  const std::string dir = with_max_positions(tmp, 4096);
  const std::string gpt2 = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string png = tmp / "x.png";
  std::string out;
  // Refused before a window or a GL context is opened.
  for (const std::string& cmd :
       {std::string("--ctx 5000 --model ") + dir, "render --prompt hi --out " + png + " --ctx 5000 --model " + dir}) {
    if (!kRenderer && cmd.rfind("render", 0) == 0) continue;
    EXPECT_EQ(run(cmd, out, tmp), 2) << cmd << "\n" << out;
    EXPECT_NE(out.find("--ctx 5000 exceeds"), std::string::npos) << out;
    EXPECT_NE(out.find("max_position_embeddings (4096)"), std::string::npos) << out;
  }
  for (const std::string& cmd :
       {"--ctx 64 --model " + gpt2, "render --prompt hi --out " + png + " --ctx 64 --model " + gpt2}) {
    if (!kRenderer && cmd.rfind("render", 0) == 0) continue;
    EXPECT_EQ(run(cmd, out, tmp), 2) << cmd << "\n" << out;
    EXPECT_NE(out.find("--ctx: "), std::string::npos) << out;
    EXPECT_NE(out.find("GPT-2"), std::string::npos) << out;
  }
  EXPECT_EQ(run("--ctx 1 --model " + dir, out, tmp), 2) << out;
  EXPECT_NE(out.find("--ctx"), std::string::npos) << out;
  // render's --steps are its new tokens: a prompt that would not fit the reserved context names --ctx.
  if (kRenderer) {
    EXPECT_EQ(run("render --prompt 'hello there' --steps 40 --out " + png + " --ctx 16 --model " + dir, out, tmp), 2)
        << out;
    EXPECT_NE(out.find("pass --ctx "), std::string::npos) << out;
    EXPECT_NE(out.find("plus --steps 40"), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(png));

  // What the window's --ctx reaches: its Session loads the model at that context.
  Session s;
  s.ui.playing = false;
  s.load_model(dir, 300);
  const auto t0 = std::chrono::steady_clock::now();
  while (!s.engine.model && s.ui.errors.empty()) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "the model did not load";
    s.update(1e9);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(s.engine.model) << (s.ui.errors.empty() ? "" : s.ui.errors[0]);
  EXPECT_EQ(s.engine.model->config.n_positions, 300);
  EXPECT_EQ(s.engine.model->config.max_position_embeddings, 4096);
}

}  // namespace
}  // namespace kvscope
