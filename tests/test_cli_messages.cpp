// Numbers and words the CLI prints that a user reads literally: sizes in the
// one unit formatter, the stored size of F16 weights, a --model that is a
// dangling or looping symbolic link, the prompt's UTF-8 rule, and the flags'
// help and ranges shared with `render` and the window.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "model/core/units.h"
#include "model/decoding/setting_ranges.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::json;

int (*const run)(const std::string&, std::string&, const testutil::TempDir&) = testutil::run_kvscope;

// An F16 GPT-2 file stores 2 bytes a parameter (safetensors' F16), an F32
// Llama file 4: inspect prints that stored size, n_params x the width, and
// apart from it the resident size the engine holds.
TEST(CliMessages, InspectPrintsTheStoredSizeOfF16Weights) {
  testutil::TempDir tmp("cli-inspect-f16");
  const std::string dir = testutil::suite_checkpoint("l3h4d48_f16_noprefix");
  std::string out;
  ASSERT_EQ(run("inspect --json --model " + dir, out, tmp), 0) << out;
  const json j = json::parse(out);
  ASSERT_EQ(j.at("dtype"), "F16");
  const double n = j.at("n_params").get<double>();
  EXPECT_EQ(j.at("stored_bytes").get<double>(), 2 * n);
  // The matrices at 2 bytes a value, the learned positions and the vectors
  // at 4: at least 2n, well under the 4n of an f32 copy.
  const double held = j.at("weight_bytes").get<double>();
  EXPECT_GE(held, 2 * n);
  EXPECT_LT(held, 3 * n);
  ASSERT_EQ(run("inspect --model " + dir, out, tmp), 0) << out;
  EXPECT_NE(out.find("(" + format_bytes(2 * n) + " stored F16, " + format_bytes(held) + " resident)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find(format_bytes(4 * n)), std::string::npos) << out;
  const std::string llama = testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single";
  ASSERT_EQ(run("inspect --json --model " + llama, out, tmp), 0) << out;
  const json l = json::parse(out);
  ASSERT_EQ(l.at("dtype"), "F32");
  EXPECT_EQ(l.at("stored_bytes").get<double>(), 4 * l.at("n_params").get<double>());
}

// --bf16-products on a model that stores no BF16 matrix: exit 2 naming the
// flag, the folder, its dtype and what was expected; on a BF16 one, bench
// says the products are on.
TEST(CliMessages, Bf16ProductsNeedABf16Checkpoint) {
  testutil::TempDir tmp("cli-bf16-products");
  const std::string f32 = testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single";
  std::string out;
  ASSERT_EQ(run("generate --prompt 'hello there' --max-new 2 --bf16-products --model " + f32, out, tmp), 2) << out;
  for (const std::string& needle : {std::string("--bf16-products"), f32, std::string("F32"), std::string("BF16")})
    EXPECT_NE(out.find(needle), std::string::npos) << needle << " not in: " << out;
  // Refused from the files' headers, before the weights are read into the
  // model: a NaN in a weight (which reading them reports, exit 1) is never reached.
  const std::string nan_dir = tmp / "f32-with-a-nan";
  fs::copy(f32, nan_dir, fs::copy_options::recursive);
  std::string st = testutil::read_file(nan_dir + "/model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, st.data(), 8);
  const json header = json::parse(st.substr(8, header_len));
  const uint64_t begin = header.at("model.layers.0.self_attn.q_proj.weight").at("data_offsets").at(0);
  const float nan = std::nanf("");
  std::memcpy(&st[8 + header_len + begin], &nan, 4);
  testutil::write_file(nan_dir + "/model.safetensors", st);
  ASSERT_EQ(run("generate --prompt 'hello there' --max-new 2 --model " + nan_dir, out, tmp), 1) << out;
  ASSERT_EQ(run("generate --prompt 'hello there' --max-new 2 --bf16-products --model " + nan_dir, out, tmp), 2) << out;
  EXPECT_NE(out.find("--bf16-products: " + nan_dir), std::string::npos) << out;
  const std::string bf16 = testutil::llama_suite_dir() + "/llama_gqa3_bf16_products";
  ASSERT_EQ(run("bench --lengths 8 --reps 1 --json --bf16-products --model " + bf16, out, tmp), 0) << out;
  EXPECT_TRUE(json::parse(out).at("bf16_products").get<bool>()) << out;
}

// --ctx's hint sizes the KV cache it would reserve with the unit formatter:
// 2 (K, V) x layers x K/V width x 4 bytes x positions, never "0 MiB".
TEST(CliMessages, CtxHintSizesTheKvCacheReadably) {
  testutil::TempDir tmp("cli-ctx-hint");
  const std::string dir = tmp / "llama";
  fs::copy(testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single", dir, fs::copy_options::recursive);
  json c = testutil::read_json(dir + "/config.json");
  c["max_position_embeddings"] = 64;
  testutil::write_file(dir + "/config.json", c.dump(1));
  std::string out;
  ASSERT_EQ(run("generate --prompt 'hello there' --max-new 40 --ctx 16 --model " + dir, out, tmp), 2) << out;
  const size_t at = out.find("pass --ctx ");
  ASSERT_NE(at, std::string::npos) << out;
  const int fit = std::stoi(out.substr(at + 11));
  const int head_dim = c.at("hidden_size").get<int>() / c.at("num_attention_heads").get<int>();
  const double bytes =
      2.0 * c.at("num_hidden_layers").get<int>() * c.at("num_key_value_heads").get<int>() * head_dim * 4 * fit;
  EXPECT_NE(out.find("(its f32 KV cache takes " + format_bytes(bytes) + ")"), std::string::npos) << out;
  EXPECT_EQ(out.find(" 0 MiB"), std::string::npos) << out;
}

// A --model that is a dangling or a looping symbolic link says so (exit 1).
TEST(CliMessages, ASymlinkModelFolderThatLeadsNowhereIsNamed) {
  testutil::TempDir tmp("cli-symlink");
  const std::string dangling = tmp / "dangling", loop = tmp / "loop", missing = tmp / "missing";
  fs::create_symlink(tmp / "nowhere", dangling);
  fs::create_symlink(loop, loop);
  std::string out;
  EXPECT_EQ(run("generate --prompt hi --model " + dangling, out, tmp), 1) << out;
  EXPECT_NE(out.find(dangling + ": a symbolic link to " + (tmp / "nowhere") + ", which does not exist"),
            std::string::npos)
      << out;
  EXPECT_EQ(run("inspect --model " + loop, out, tmp), 1) << out;
  EXPECT_NE(out.find(loop + ": a symbolic link to " + loop + " that loops"), std::string::npos) << out;
  EXPECT_EQ(run("inspect --model " + missing, out, tmp), 1) << out;
  EXPECT_NE(out.find(missing + ": does not exist"), std::string::npos) << out;
  EXPECT_EQ(out.find("not a directory"), std::string::npos) << out;
}

// The prompt rule, one for both tokenizer families: a prompt (and
// tokenize's --text) is UTF-8 text; an ill-formed byte (Unicode 15, table
// 3-7: a stray 0xFF, a surrogate's 0xED 0xA0, an overlong 0xC0) is a usage
// error naming the flag and the byte's offset, for every strategy; it never
// becomes U+FFFD (tokenizer.json) or raw byte tokens (GPT-2) silently.
TEST(CliMessages, InvalidUtf8InAPromptFollowsOneRule) {
  testutil::TempDir tmp("cli-utf8");
  const std::string gpt2 = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string llama = testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single";
  std::string out;
  for (const std::string& model : {gpt2, llama}) {
    for (const std::string& extra : {std::string(""), std::string(" --beams 2"), " --draft " + model}) {
      const std::string cmd = "generate --max-new 1 --model " + model + extra + " --prompt ";
      EXPECT_EQ(run(cmd + "\"$(printf 'ab\\377')\"", out, tmp), 2) << extra << out;
      EXPECT_NE(out.find("--prompt: byte 2 (0xFF) is not valid UTF-8"), std::string::npos) << extra << out;
      EXPECT_EQ(out.find("\xEF\xBF\xBD"), std::string::npos) << out;
    }
    EXPECT_EQ(run("generate --max-new 1 --model " + model + " --prompt \"$(printf 'caf\\303\\251 \\355\\240\\200')\"",
                  out, tmp),
              2)
        << out;
    EXPECT_NE(out.find("--prompt: byte 6 (0xED) is not valid UTF-8"), std::string::npos) << out;
    // A stop string is held to the same rule.
    EXPECT_EQ(run("generate --max-new 1 --model " + model + " --prompt hi --stop \"$(printf 'x\377')\"", out, tmp), 2)
        << out;
    EXPECT_NE(out.find("--stop: byte 1 (0xFF) is not valid UTF-8"), std::string::npos) << out;
    EXPECT_EQ(run("tokenize --model " + model + " --text \"$(printf 'x\\300\\257')\"", out, tmp), 2) << out;
    EXPECT_NE(out.find("--text: byte 1 (0xC0) is not valid UTF-8"), std::string::npos) << out;
    // Well-formed multi-byte text passes: "café" is 5 bytes of UTF-8.
    ASSERT_EQ(run("generate --max-new 1 --model " + model + " --prompt \"$(printf 'caf\\303\\251')\"", out, tmp), 0)
        << out;
  }
}

// The window saves --screenshot when its --demo-frames (or --soak-rounds)
// end: without a positive count it would run until closed, so the pair is
// checked before it opens.
TEST(CliMessages, ScreenshotNeedsDemoFrames) {
  testutil::TempDir tmp("cli-screenshot");
  std::string out;
  for (const std::string frames : {"", " --demo-frames 0", " --soak-rounds 0"}) {
    EXPECT_EQ(run("--screenshot " + (tmp / "s.png") + frames, out, tmp), 2) << frames << out;
    EXPECT_NE(out.find("--screenshot needs --demo-frames N or --soak-rounds N with N >= 1"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(tmp / "s.png"));
  }
}

// Text output into one file (2>&1): each strategy's text ends its line
// before the summary on stderr begins its own.
TEST(CliMessages, TheSummaryStartsItsOwnLineAfterTheText) {
  testutil::TempDir tmp("cli-summary-line");
  const std::string gen = "generate --prompt 'Once upon a time' --max-new 6 ";
  const std::string draft = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-draft";
  for (const std::string& extra :
       {std::string(), std::string("--beams 2"), "--draft " + testutil::shell_quote(draft)}) {
    std::string out;
    ASSERT_EQ(run(gen + extra, out, tmp), 0) << extra << out;
    const size_t at = out.find("[kvscope-tiny");
    ASSERT_NE(at, std::string::npos) << extra << out;
    EXPECT_TRUE(at > 0 && out[at - 1] == '\n') << extra << out;
  }
}

// tokenize's text form quotes each token's exact bytes one way: a byte cut
// from a character as \xNN, a literal backslash as \\ (so the two differ).
TEST(CliMessages, TokenizeQuotesEachTokensBytesUnambiguously) {
  testutil::TempDir tmp("cli-tokenize-text");
  std::string out;
  ASSERT_EQ(run("tokenize --text " + testutil::shell_quote("\xC3\xA7 \\xc3 \"q\"\n"), out, tmp), 0) << out;
  EXPECT_NE(out.find("\"\\xc3\""), std::string::npos) << out;  // the embedded model splits c-cedilla into its bytes
  EXPECT_NE(out.find("\"\\\\\""), std::string::npos) << out;   // the backslash alone
  EXPECT_NE(out.find("decoded: \"\xC3\xA7 \\\\xc3 \\\"q\\\"\\n\""), std::string::npos) << out;
}

// A bad $KVSCOPE_THREADS is refused like a bad flag, not passed over.
TEST(CliMessages, ThreadsEnvIsCheckedLikeAFlag) {
  testutil::TempDir tmp("cli-threads");
  const char* old = std::getenv("KVSCOPE_THREADS");
  const std::string saved = old ? old : "";
  std::string out;
  for (const char* bad : {"abc", "0"}) {
    setenv("KVSCOPE_THREADS", bad, 1);
    EXPECT_EQ(run("generate --prompt hi --max-new 1", out, tmp), 2) << bad << out;
    EXPECT_NE(out.find("KVSCOPE_THREADS: expected a whole number of threads in 1..256"), std::string::npos) << out;
  }
  for (const char* good : {"2", ""}) {  // (empty: unset)
    setenv("KVSCOPE_THREADS", good, 1);
    EXPECT_EQ(run("generate --prompt hi --max-new 1", out, tmp), 0) << good << out;
  }
  if (old)
    setenv("KVSCOPE_THREADS", saved.c_str(), 1);
  else
    unsetenv("KVSCOPE_THREADS");
}

// One definition per setting: `render` and `generate` state and enforce the
// same --temperature range (model/decoding/setting_ranges.h); eval's --model
// takes any supported folder.
TEST(CliMessages, HelpAndRangesAgreeAcrossCommands) {
  testutil::TempDir tmp("cli-help");
  std::string out;
  ASSERT_EQ(run("eval --help", out, tmp), 0) << out;
  EXPECT_EQ(out.find("GPT-2 folder"), std::string::npos) << out;
  EXPECT_NE(out.find("Llama/Mistral/Qwen2"), std::string::npos) << out;
  const RealSetting t = setting::kTemperature;
  EXPECT_EQ(t.lo, 0.001);
  EXPECT_EQ(t.hi, 1000.0);
  // Flags are checked as they are parsed: `render` refuses them even in a
  // build without the renderer.
  for (const std::string cmd : {"generate --prompt hi", "render --prompt hi --draft x --out x.png"}) {
    for (const char* bad : {"0", "0.0005", "1001", "nan"}) {
      EXPECT_EQ(run(cmd + " --temperature " + bad, out, tmp), 2) << cmd << " " << bad << out;
      EXPECT_NE(out.find("[0.001, 1000]"), std::string::npos) << cmd << " " << bad << out;
    }
  }
  ASSERT_EQ(run("render --help", out, tmp), 0) << out;
  EXPECT_NE(out.find("[0.001, 1000]"), std::string::npos) << out;
  // A top-p above 0 that is 0 as the float the sampler holds is out of
  // (0, 1] at the flag and in a serve request, not a runtime error later;
  // the smallest float above 0 is in.
  for (const char* tiny : {"1e-300", "1e-46"}) {
    EXPECT_EQ(run(std::string("generate --prompt hi --max-new 2 --top-p ") + tiny, out, tmp), 2) << tiny << out;
    EXPECT_NE(out.find(std::string("--top-p: ") + tiny + " is below the range (0, 1] once held as a float"),
              std::string::npos)
        << out;
    testutil::write_file(tmp / "r.jsonl",
                         std::string("{\"id\": 1, \"prompt\": \"hi\", \"max_new\": 1, \"top_p\": ") + tiny + "}\n");
    EXPECT_EQ(run("serve --requests " + (tmp / "r.jsonl"), out, tmp), 2) << tiny << out;
    EXPECT_NE(out.find("r.jsonl:1: field \"top_p\""), std::string::npos) << out;
  }
  EXPECT_EQ(run("generate --prompt hi --max-new 2 --top-p 1.5e-45", out, tmp), 0) << out;
  static_assert(!setting::kTopP.contains(1e-300) && setting::kTopP.contains(1.5e-45));
  static_assert(setting::kRepetitionPenalty.contains(0.01), "a closed bound is compared as given");
}

// One range per setting, for every command: each command's --help that
// offers a setting of the table (model/decoding/setting_ranges.h) states the
// table's range for it, and --kv-block states the model's context.
TEST(CliMessages, EveryCommandStatesASettingsOneRange) {
  testutil::TempDir tmp("cli-ranges");
  struct Row {
    std::string flag, range;
  };
  auto real = [](const RealSetting& s) {
    char b[64];
    std::snprintf(b, sizeof b, "FLOAT:%s%g, %g]", s.lo_open ? "(" : "[", s.lo, s.hi);
    return Row{s.flag, b};
  };
  auto whole = [](const IntSetting& s) {
    return Row{s.flag, "INT:" + std::to_string(s.lo) + ".." + std::to_string(s.hi)};
  };
  namespace st = setting;
  const Row rows[] = {real(st::kTemperature), real(st::kTopP),
                      whole(st::kTopK),       real(st::kRepetitionPenalty),
                      whole(st::kBeams),      real(st::kLengthPenalty),
                      whole(st::kSpeculate),  whole(st::kMaxNew),
                      whole(st::kCtx),        {"--kv-block", "INT:1..the model's context"}};
  int seen = 0;
  for (const std::string cmd : {"", "generate", "eval", "serve", "render", "bench", "inspect", "tokenize"}) {
    std::string out;
    ASSERT_EQ(run(cmd + " --help", out, tmp), 0) << cmd << out;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      for (const Row& r : rows) {
        if (line.rfind("  " + r.flag + " ", 0) != 0) continue;
        ++seen;
        EXPECT_NE(line.find(r.range), std::string::npos)
            << "kvscope " << cmd << ": " << line << " (want " << r.range << ")";
      }
    }
  }
  EXPECT_GE(seen, 20);  // generate alone offers 10 of them
}

}  // namespace
}  // namespace kvscope
