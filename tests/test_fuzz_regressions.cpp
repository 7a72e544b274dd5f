// Replays every input the fuzzers ever crashed or hung on (tests/fuzz/regressions/<target>/)
// and the seed corpora (tests/fuzz/corpus/<target>/) through the same checks the
// libFuzzer targets run (tests/fuzz/fuzz_checks.h), in the normal and the ASan+UBSan
// builds. Each input must be rejected with kvscope::Error or accepted with every
// property intact; see tests/fuzz/README.md for what each target checks.

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "fuzz/fuzz_checks.h"
#include "fuzz/fuzz_checks_chat.h"
#include "fuzz/fuzz_checks_gguf.h"
#include "fuzz/fuzz_checks_saved.h"
#include "fuzz/fuzz_checks_watch.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::string& target, bool with_corpus) {
  std::vector<fs::path> files;
  std::vector<std::string> kinds{"regressions"};
  if (with_corpus) kinds.push_back("corpus");
  for (const std::string& kind : kinds) {
    const fs::path dir = fs::path(KVSCOPE_SOURCE_DIR) / "tests" / "fuzz" / kind / target;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const std::string& target, const std::function<std::string(const std::string&)>& check,
            size_t min_regressions) {
  const std::vector<fs::path> files = inputs_of(target, true);
  EXPECT_GE(inputs_of(target, false).size(), min_regressions) << "regression inputs missing for " << target;
  ASSERT_FALSE(files.empty()) << "no inputs for " << target;
  for (const fs::path& f : files) {
    const std::string bytes = fuzz::read_whole_file(f.string());
    std::string err;
    try {
      err = check(bytes);
    } catch (const std::exception& e) {
      err = std::string("escaped exception: ") + e.what();
    }
    // (No wall-clock limit: under a sanitizer or on a busy machine time says
    // nothing. The work is bounded by the input, and a hang hits ctest's timeout.)
    EXPECT_EQ(err, "") << f.string();
  }
}

TEST(FuzzRegressions, Safetensors) {
  replay("safetensors", fuzz::check_safetensors, 2);
}

TEST(FuzzRegressions, Config) {
  replay("config", fuzz::check_config, 3);
}

TEST(FuzzRegressions, TokenizerFiles) {
  replay("tokenizer_files", fuzz::check_tokenizer_files, 0);
}

TEST(FuzzRegressions, TokenizerText) {
  replay("tokenizer_text", fuzz::check_tokenizer_text, 0);
}

TEST(FuzzRegressions, Cli) {
  replay(
      "cli", [](const std::string& in) { return fuzz::check_cli(in); }, 0);
}

TEST(FuzzRegressions, SavedFiles) {
  replay("saved_files", fuzz::check_saved_files, 1);
}

TEST(FuzzRegressions, Gguf) {
  replay("gguf", fuzz::check_gguf, 0);
}

TEST(FuzzRegressions, ChatTemplate) {
  replay("chat_template", fuzz::check_chat_template, 0);
}

TEST(FuzzRegressions, Watch) {
  replay("watch", fuzz::check_watch, 2);
}

// The oracles themselves: a check that cannot fail proves nothing.
TEST(FuzzRegressions, OraclesCatchViolations) {
  EXPECT_TRUE(fuzz::is_valid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(fuzz::is_valid_utf8("\xe2\x80"));          // truncated
  EXPECT_FALSE(fuzz::is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(fuzz::is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(fuzz::is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_EQ(fuzz::ref_f16(0x3c00), 1.0f);
  EXPECT_EQ(fuzz::ref_f16(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fuzz::ref_f16(0xc000), -2.0f);
  EXPECT_EQ(fuzz::ref_f16(0x7bff), 65504.0f);
  EXPECT_EQ(fuzz::ref_f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(fuzz::ref_f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(fuzz::ref_f32_to_f16(65520.0f), 0x7c00);               // tie rounds to even = inf
  EXPECT_EQ(fuzz::ref_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);     // tie between 0x3c00 and 0x3c01 -> even
  EXPECT_EQ(fuzz::ref_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);     // tie between 0x3c01 and 0x3c02 -> even
  EXPECT_EQ(fuzz::ref_f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal -> 0 (even)
  EXPECT_EQ(fuzz::ref_f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fuzz::ref_f32_to_f16(-0.0f), 0x8000);
  // f32_to_f16 (used for F16 checkpoints) against the reference on every half value and its midpoints.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fuzz::ref_f16(static_cast<uint16_t>(h));
    ASSERT_TRUE(fuzz::same_half(f32_to_f16(f), fuzz::ref_f32_to_f16(f))) << "half 0x" << std::hex << h;
    if ((h & 0x7fff) < 0x7bff) {
      const float mid = static_cast<float>(
          (static_cast<double>(f) + static_cast<double>(fuzz::ref_f16(static_cast<uint16_t>(h + 1)))) / 2);
      ASSERT_EQ(f32_to_f16(mid), fuzz::ref_f32_to_f16(mid)) << "midpoint above half 0x" << std::hex << h;
    }
  }

  // The reference BPE on the stress vocab, by hand: "abc": (a, b) rank 6 before (b, c) rank 7 -> ab c -> abc.
  // "aaab": "a a" is listed twice and keeps its later rank 29, so (a, b) merges first -> a a ab -> aa ab.
  const auto files = fuzz::stress_vocab_files();
  fuzz::RefBpe ref;
  ASSERT_EQ(ref.load(files.first, files.second), "");
  const Tokenizer tok = Tokenizer::from_strings(files.first, files.second, "stress");
  EXPECT_EQ(ref.bpe("abc"), std::vector<int>{tok.token_id("abc")});
  EXPECT_EQ(ref.bpe("aaab"), (std::vector<int>{tok.token_id("aa"), tok.token_id("ab")}));
  EXPECT_EQ(ref.bpe("xyx"), std::vector<int>{tok.token_id("xyx")});
  EXPECT_EQ(fuzz::check_encode(tok, &ref, std::string(300, 'a') + " the " + std::string(100, ' '), "stress"), "");

  // The CLI check sees exit codes.
  auto argv_of = [](std::initializer_list<std::string> args) {
    std::string s;
    for (const std::string& a : args) s += (s.empty() ? "" : std::string(1, '\0')) + a;
    return s;
  };
  int code = -1;
  EXPECT_EQ(fuzz::check_cli(argv_of({"--frobnicate"}), &code), "");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(fuzz::check_cli(argv_of({"generate", "--model", "/nonexistent", "--prompt", "x"}), &code), "");
  EXPECT_EQ(code, 1);
  EXPECT_EQ(fuzz::check_cli(argv_of({"generate", "--prompt", "ab", "--max-new", "3"}), &code), "");
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace kvscope
