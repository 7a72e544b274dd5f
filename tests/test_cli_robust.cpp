// Messages that say what is wrong and what would work, and output that stays
// one line per record whatever bytes the input holds: bench --positions with
// a window, a prompt beyond --ctx in a requests file, a NUL in a requests
// line, huge whole numbers, invalid UTF-8 and control characters in what
// kvscope prints.
#include <gtest/gtest.h>

#include <string>

#include "app/cli/cli_out.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

int run(const std::string& args, std::string& out, const testutil::TempDir& tmp) {
  return testutil::run_kvscope(args, out, tmp / "out.txt");
}

TEST(CliRobust, TerminalSafeEscapesControlsAndInvalidUtf8) {
  EXPECT_EQ(terminal_safe(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(terminal_safe("l1\nl2\r\t\x1b[2J\x7f"), "l1\\nl2\\r\\t\\x1b[2J\\x7f");
  EXPECT_EQ(terminal_safe("\xc2\x9b"
                          "31m"),
            "\\u009b31m");  // C1 CSI
  EXPECT_EQ(terminal_safe("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \\xff");
}

TEST(CliRobust, BenchPositionsWithATooSmallWindowIsAUsageError) {
  testutil::TempDir tmp("cli-robust-bench");
  std::string out;
  EXPECT_EQ(run("bench --positions 4 --kv-window 8 --reps 1", out, tmp), 2) << out;
  EXPECT_NE(out.find("--kv-window 8: bench --positions rolls the cache back"), std::string::npos) << out;
  EXPECT_NE(out.find("expected --kv-window 68 or more"), std::string::npos) << out;
}

// bench --serve: the three measurements of each round, as medians with their
// ranges (the numbers are the machine's; what is checked is their shape), and
// the flags it cannot use refused.
TEST(CliRobust, BenchServeReportsMediansAndRanges) {
  testutil::TempDir tmp("cli-robust-bench-serve");
  const std::string gpt2 = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  testutil::write_file(file,
                       "{\"id\": \"a\", \"prompt\": \"ab\", \"max_new\": 6}\n"
                       "{\"id\": \"b\", \"prompt\": \"ba ab\", \"max_new\": 6}\n"
                       "{\"id\": \"c\", \"prompt\": \"a\", \"max_new\": 6, \"arrive\": 3}\n");
  std::string out;
  ASSERT_EQ(run("bench --model " + gpt2 + " --serve " + file + " --reps 2 --json", out, tmp), 0) << out;
  const auto j = testutil::json::parse(out);
  EXPECT_EQ(j.at("requests"), 3);
  EXPECT_EQ(j.at("rounds"), 2);
  for (const char* k : {"serve_decode_step_ms", "bare_forward_ms", "step_over_forward", "together_over_alone"}) {
    const auto& s = j.at(k);
    EXPECT_GT(s.at("min").get<double>(), 0) << k;
    EXPECT_LE(s.at("min").get<double>(), s.at("median").get<double>()) << k;
    EXPECT_LE(s.at("median").get<double>(), s.at("max").get<double>()) << k;
  }
  EXPECT_EQ(run("bench --model " + gpt2 + " --serve " + file + " --kv-window 4", out, tmp), 2) << out;
  EXPECT_NE(out.find("--serve: serving keeps every position in its paged pool; drop --kv-window"), std::string::npos)
      << out;
  EXPECT_EQ(run("bench --model " + gpt2 + " --serve " + file + " --lengths 8", out, tmp), 2) << out;
}

TEST(CliRobust, RequestsFileMessages) {
  testutil::TempDir tmp("cli-robust-requests");
  const std::string llama = testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single";
  const std::string gpt2 = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  std::string out;
  // A prompt beyond what --ctx reserved: the --ctx that fits (prompt 18 tokens + max_new 4 - 1).
  testutil::write_file(file, "{\"id\": \"a\", \"prompt\": \"one two three four five\", \"max_new\": 4}\n");
  EXPECT_EQ(run("serve --model " + llama + " --ctx 16 --kv-block 4 --requests " + file, out, tmp), 2) << out;
  EXPECT_NE(out.find("pass --ctx 21"), std::string::npos) << out;
  // A NUL byte ended the line silently (the rest was never read).
  testutil::write_file(file, std::string("{\"id\": \"a\", \"prompt\": \"x\", \"max_new\": 2}\0junk\n", 44));
  EXPECT_EQ(run("serve --model " + gpt2 + " --requests " + file, out, tmp), 2) << out;
  EXPECT_NE(out.find("reqs.jsonl:1: a NUL byte at column 41"), std::string::npos) << out;
  // A whole number beyond u64 reads as a double: shown as written, not as 9.999999999999999e+22.
  testutil::write_file(file, "{\"id\": \"a\", \"prompt\": \"x\", \"max_new\": 100000000000000000000000}\n");
  EXPECT_EQ(run("serve --model " + gpt2 + " --requests " + file, out, tmp), 2) << out;
  EXPECT_NE(out.find("got 1e+23"), std::string::npos) << out;
}

TEST(CliRobust, PrintedTextIsEscaped) {
  testutil::TempDir tmp("cli-robust-escape");
  const std::string gpt2 = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  std::string out;
  // An id with a NUL, a newline and a terminal escape: each step line stays one line.
  testutil::write_file(file, "{\"id\": \"a\\u0000b\\n\\u001b[2J\", \"prompt\": \"x\", \"max_new\": 2}\n");
  ASSERT_EQ(run("serve --model " + gpt2 + " --requests " + file, out, tmp), 0) << out;
  EXPECT_NE(out.find("step 0 | a\\x00b\\n\\x1b[2J:decode@0"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  // Invalid UTF-8 and an escape sequence in a flag's value, echoed in the message.
  EXPECT_EQ(run("generate --prompt x --kv-dtype \"$(printf '\\377\\033[31m')\"", out, tmp), 2) << out;
  EXPECT_NE(out.find("--kv-dtype: \\xff\\x1b[31m"), std::string::npos) << out;
  EXPECT_EQ(out.find('\xff'), std::string::npos) << out;
}

}  // namespace
}  // namespace kvscope
