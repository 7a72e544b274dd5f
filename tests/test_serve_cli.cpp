// `kvscope serve` end to end: each request's text equals `kvscope generate`'s
// for it alone with the same settings, the JSON Lines records are consistent
// with each other, and a malformed requests file is a usage error naming the
// file, the line and the field.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

int run(const std::string& args, std::string& out, const testutil::TempDir& tmp) {
  return testutil::run_kvscope(args, out, tmp / "out.txt");
}

std::vector<json> lines_of(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) v.push_back(json::parse(line));
  return v;
}

TEST(ServeCli, EveryRequestWritesWhatGenerateWritesAlone) {
  testutil::TempDir tmp("serve-cli");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  testutil::write_file(
      file,
      "{\"id\": \"a\", \"prompt\": \"def forward(tokens):\", \"max_new\": 12}\n"
      "\n"
      "{\"id\": 7, \"prompt\": \"def forward(x): return\", \"max_new\": 9, \"arrive\": 2, \"temperature\": 0.9, "
      "\"top_k\": 8, \"seed\": 5}\n"
      "{\"id\": \"c\", \"prompt\": \"def forward(tokens): return model\", \"max_new\": 7, \"arrive\": 3, "
      "\"top_p\": 0.8, \"repetition_penalty\": 1.2, \"seed\": 11}\n");
  const std::map<std::string, std::string> generate_flags = {
      {"a", "--prompt 'def forward(tokens):' --max-new 12 --greedy"},
      {"7", "--prompt 'def forward(x): return' --max-new 9 --temperature 0.9 --top-k 8 --seed 5"},
      {"c", "--prompt 'def forward(tokens): return model' --max-new 7 --top-p 0.8 --repetition-penalty 1.2 --seed 11"}};
  for (const char* flags : {"--pool-blocks 64", "--pool-blocks 10 --max-batch-tokens 5 --prefix-caching"}) {
    std::string out;
    ASSERT_EQ(run("serve --model " + dir + " --requests " + file + " --kv-block 4 --json " + flags, out, tmp), 0)
        << out;
    const std::vector<json> recs = lines_of(out);
    ASSERT_FALSE(recs.empty());
    int steps = 0, done = 0, generated = 0, last_step = -1;
    for (const json& r : recs) {
      if (r.at("event") == "step") {
        ++steps;
        EXPECT_GT(r.at("step").get<int>(), last_step);
        last_step = r.at("step");
        EXPECT_EQ(r.at("blocks_used").get<int>() + r.at("blocks_free").get<int>(),
                  std::string(flags).find("64") != std::string::npos ? 64 : 10);
        for (const json& e : r.at("batch")) generated += e.contains("token") ? 1 : 0;
      } else if (r.at("event") == "done") {
        ++done;
        const std::string id = r.at("id");
        std::string alone;
        ASSERT_EQ(run("generate --model " + dir + " --json --kv-block 4 " + generate_flags.at(id), alone, tmp), 0)
            << alone;
        const json gen_done = lines_of(alone).back();
        EXPECT_EQ(r.at("text"), gen_done.at("text")) << id << " " << flags;
        EXPECT_EQ(r.at("tokens").size(), gen_done.at("new_tokens").get<size_t>()) << id;
        EXPECT_EQ(r.at("reason"), gen_done.at("reason")) << id;
        EXPECT_GE(r.at("first_token_step").get<int>(), r.at("arrive").get<int>()) << id;
        EXPECT_GE(r.at("finish_step").get<int>(), r.at("first_token_step").get<int>()) << id;
      }
    }
    const json& sum = recs.back();
    ASSERT_EQ(sum.at("event"), "summary");
    EXPECT_EQ(done, 3);
    EXPECT_EQ(sum.at("steps").get<int>(), steps);
    EXPECT_EQ(sum.at("generated").get<int>(), generated);
    EXPECT_EQ(sum.at("requests").get<int>(), 3);
  }
}

// "greedy": false asks for sampling with the defaults (temperature 1), as
// generate --temperature 1 does; the seed then draws what generate's draws.
TEST(ServeCli, GreedyFalseSamplesWithTheSeed) {
  testutil::TempDir tmp("serve-cli-greedy-false");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  testutil::write_file(file,
                       "{\"id\": \"s\", \"prompt\": \"def forward(x):\", \"max_new\": 12, \"greedy\": false, "
                       "\"seed\": 3}\n");
  std::string out, sampled, greedy;
  ASSERT_EQ(run("serve --model " + dir + " --json --requests " + file, out, tmp), 0) << out;
  ASSERT_EQ(run("generate --model " + dir + " --json --max-new 12 --prompt 'def forward(x):' --temperature 1 --seed 3",
                sampled, tmp),
            0);
  ASSERT_EQ(run("generate --model " + dir + " --json --max-new 12 --prompt 'def forward(x):'", greedy, tmp), 0);
  json done;
  for (const json& r : lines_of(out))
    if (r.at("event") == "done") done = r;
  ASSERT_FALSE(done.is_null()) << out;
  EXPECT_EQ(done.at("text"), lines_of(sampled).back().at("text"));
  EXPECT_NE(done.at("text"), lines_of(greedy).back().at("text"));
}

// Without --json: a line per step, a line per finished request with its text, a summary.
TEST(ServeCli, TextFormShowsStepsRequestsAndSummary) {
  testutil::TempDir tmp("serve-cli-text");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string file = tmp / "reqs.jsonl";
  testutil::write_file(file, "{\"id\": \"a\", \"prompt\": \"def forward(tokens):\", \"max_new\": 3}\n");
  std::string out, alone;
  ASSERT_EQ(run("serve --model " + dir + " --requests " + file, out, tmp), 0) << out;
  ASSERT_EQ(run("generate --model " + dir + " --json --max-new 3 --prompt 'def forward(tokens):'", alone, tmp), 0);
  const std::string text = lines_of(alone).back().at("text");
  EXPECT_NE(out.find("step 0 | a:prefill[0,"), std::string::npos) << out;
  EXPECT_NE(out.find("step 2 | a:decode@"), std::string::npos) << out;
  EXPECT_NE(out.find("done a (max_new, 3 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("): " + text + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("summary: 1 request, 3 steps, 3 tokens"), std::string::npos) << out;
}

// One-token requests finish in the step that admits them, so no step ends
// holding a slot: nothing reserved is nothing wasted (0, not 0/0 read as 1).
TEST(ServeCli, NothingHeldReportsNoWaste) {
  testutil::TempDir tmp("serve-cli-waste");
  std::string body;
  for (int i = 0; i < 20; ++i) body += "{\"id\": " + std::to_string(i) + ", \"prompt\": \"hi\", \"max_new\": 1}\n";
  testutil::write_file(tmp / "one.jsonl", body);
  std::string out;
  ASSERT_EQ(run("serve --json --requests " + (tmp / "one.jsonl"), out, tmp), 0) << out;
  const json sum = lines_of(out).back();
  ASSERT_EQ(sum.at("event"), "summary") << out;
  ASSERT_EQ(sum.at("slots_paged_mean").get<double>(), 0.0) << sum.dump();
  ASSERT_EQ(sum.at("slots_contiguous_mean").get<double>(), 0.0) << sum.dump();
  EXPECT_EQ(sum.at("paged_wasted_frac").get<double>(), 0.0) << sum.dump();
  EXPECT_EQ(sum.at("contiguous_wasted_frac").get<double>(), 0.0) << sum.dump();
}

// Each malformed file: exit 2, the message names FILE:LINE and what was expected.
TEST(ServeCli, MalformedRequestsFileNamesTheLine) {
  testutil::TempDir tmp("serve-cli-bad");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string ok = "{\"id\": \"a\", \"prompt\": \"hi\", \"max_new\": 2}\n";
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += "tokens ";
  const struct {
    std::string body, expect;
  } cases[] = {
      {ok + "{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2\n", ":2: not valid JSON"},
      {ok + "{\"id\": \"b\", \"prompt\": \"hi\"}\n", ":2: missing field \"max_new\""},
      {"{\"id\": \"b\", \"prompt\": 5, \"max_new\": 2}\n", ":1: field \"prompt\": expected a non-empty string"},
      {"{\"prompt\": \"hi\", \"max_new\": 2}\n", ":1: missing field \"id\""},
      {"{\"id\": [1], \"prompt\": \"hi\", \"max_new\": 2}\n", ":1: field \"id\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2.5}\n", ":1: field \"max_new\": expected a whole number"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 0}\n", ":1: field \"max_new\": 0 is outside 1..1048576"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"arrive\": -1}\n", ":1: field \"arrive\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"temperature\": 0}\n", ":1: field \"temperature\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"top_p\": 1.5}\n", ":1: field \"top_p\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"top_p\": 1e-300}\n",
       ":1: field \"top_p\": 1e-300 is out of range (expected (0.0, 1.0]; held as a float it rounds to 0.0)"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"greedy\": true, \"top_k\": 3}\n", ":1: field \"greedy\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"temprature\": 1}\n", ":1: unknown field \"temprature\""},
      {ok + ok, ":2: duplicate id \"a\""},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 60}\n", ":1: request \"b\" could never fit the pool"},
      {"{\"id\": \"b\", \"prompt\": \"" + long_prompt + "\", \"max_new\": 1}\n", ":1: field \"prompt\": "},
      {"[1, 2]\n", ":1: expected a JSON object"},
      {ok + "{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 1e400}\n", ":2: field \"max_new\": a number too large"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"temperature\": 1e400}\n",
       ":1: field \"temperature\": a number too large"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"max_new\": 3}\n", ":1: field \"max_new\" appears twice"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"temperature\": null}\n",
       ":1: field \"temperature\": expected a value, got null"},
      {"\n\n", ": no requests"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"seed\": 3}\n",
       ":1: field \"seed\": used only when sampling"},
      {"{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 2, \"greedy\": true, \"seed\": 3}\n",
       ":1: field \"seed\": used only when sampling"},
  };
  const std::string file = tmp / "bad.jsonl";
  for (const auto& c : cases) {
    testutil::write_file(file, c.body);
    std::string out;
    EXPECT_EQ(run("serve --model " + dir + " --requests " + file + " --pool-blocks 4 --kv-block 4", out, tmp), 2)
        << c.body << out;
    EXPECT_NE(out.find(file + c.expect), std::string::npos) << "expected \"" << c.expect << "\" in: " << out;
  }
  std::string out;
  // A file that cannot be read is a runtime error (exit 1), as for every other file.
  EXPECT_EQ(run("serve --model " + dir + " --requests " + (tmp / "missing.jsonl"), out, tmp), 1) << out;
  EXPECT_NE(out.find("missing.jsonl: cannot open"), std::string::npos) << out;
  // A folder is refused by the same rule before anything is read (a FIFO is
  // a stream of requests, served as its lines arrive: tests/cli_serve_stream.sh).
  EXPECT_EQ(run("serve --model " + dir + " --requests " + tmp.path(), out, tmp), 1) << out;
  EXPECT_NE(out.find(tmp.path() + ": is a directory, not a regular file"), std::string::npos) << out;
  testutil::write_file(file, ok);
  // serve has no window or eviction flags (its pool keeps every position): neither offered nor taken.
  const struct {
    const char *flags, *named;
  } window_cases[] = {{"--kv-window 4", "--kv-window"}, {"--kv-evict tova --kv-budget 8", "--kv-evict"}};
  for (const auto& w : window_cases) {
    EXPECT_EQ(run("serve --model " + dir + " --requests " + file + " " + w.flags, out, tmp), 2) << out;
    EXPECT_NE(out.find(w.named), std::string::npos) << out;
  }
  ASSERT_EQ(run("serve --help", out, tmp), 0) << out;
  for (const char* flag : {"--kv-window", "--kv-sinks", "--kv-evict", "--kv-budget"})
    EXPECT_EQ(out.find(flag), std::string::npos) << flag << " offered by serve --help: " << out;
  EXPECT_NE(out.find("--kv-block"), std::string::npos) << out;
  // A model with its own sliding window is refused up front, naming the folder and the field.
  const std::string windowed = testutil::llama_suite_dir() + "/mistral_gqa4_bf16_untied_window";
  testutil::write_file(file,
                       "{\"id\": \"a\", \"prompt\": \"hi\", \"max_new\": 12}\n"
                       "{\"id\": \"b\", \"prompt\": \"hi\", \"max_new\": 12, \"arrive\": 2}\n");
  EXPECT_EQ(run("serve --model " + windowed + " --requests " + file + " --prefix-caching --kv-block 4", out, tmp), 2)
      << out;
  EXPECT_NE(out.find(windowed), std::string::npos) << out;
  EXPECT_NE(out.find("sliding_window = 8"), std::string::npos) << out;
  testutil::write_file(file, ok);
  EXPECT_EQ(run("serve --model " + dir + " --requests " + file + " --policy fifo", out, tmp), 2) << out;
  EXPECT_NE(out.find("--policy"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvscope
