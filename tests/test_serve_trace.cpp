// `serve --trace`: a production trace (Mooncake's JSON Lines) replayed on the
// small engine. Checked against the trace itself, with the test's own
// arithmetic: two prompts share exactly the tokens of the hash blocks they
// share; arrivals are the timestamps over --trace-ms-per-step; with one
// request at a time and a pool that never evicts, the pool hits exactly the
// blocks a prefix cache must (an unbroken run of earlier-seen hashes from the
// start, never the block holding a prompt's last token).
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "json_lines.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/serving/trace.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

struct Line {
  int ts;
  int blocks;  // input_length = 512 * blocks: the prompt is 16 * blocks tokens exactly
  int output;
  std::vector<int> hashes;
};

// Shares as Mooncake's conversation trace does: a common first block, chains
// continued by later turns, and one request whose whole prompt is cached.
const std::vector<Line> kTrace = {
    {0, 3, 64, {0, 1, 2}},    {0, 2, 32, {0, 3}},        {1500, 4, 96, {0, 1, 2, 4}},
    {1500, 3, 32, {0, 1, 5}}, {4000, 3, 512, {0, 1, 2}}, {4100, 5, 64, {0, 1, 2, 4, 6}},
    {9000, 2, 16, {7, 8}},    {9000, 3, 32, {0, 3, 9}},
};

std::string trace_text() {
  std::string s;
  for (const Line& l : kTrace) {
    json h = l.hashes;
    s += json{{"timestamp", l.ts}, {"input_length", 512 * l.blocks}, {"output_length", l.output}, {"hash_ids", h}}
             .dump() +
         "\n";
  }
  return s;
}

TEST(ServeTrace, PromptsShareExactlyTheirSharedHashBlocks) {
  const std::shared_ptr<const Model> m = load_model(KVSCOPE_SOURCE_DIR "/assets/models/kvscope-tiny");
  TraceOptions o;
  o.pool_blocks = 4096;
  const TraceRequests t = parse_trace(trace_text(), "t.jsonl", *m, o);
  ASSERT_EQ(t.requests.size(), kTrace.size());
  for (size_t a = 0; a < kTrace.size(); ++a) {
    EXPECT_EQ(t.requests[a].prompt.size(), static_cast<size_t>(16 * kTrace[a].blocks));
    EXPECT_EQ(t.requests[a].max_new, std::max(1, kTrace[a].output / 32));
    for (size_t b = 0; b < a; ++b) {
      size_t common_hashes = 0;
      while (common_hashes < std::min(kTrace[a].hashes.size(), kTrace[b].hashes.size()) &&
             kTrace[a].hashes[common_hashes] == kTrace[b].hashes[common_hashes])
        ++common_hashes;
      const auto& pa = t.requests[a].prompt;
      const auto& pb = t.requests[b].prompt;
      size_t common_tokens = 0;
      while (common_tokens < std::min(pa.size(), pb.size()) && pa[common_tokens] == pb[common_tokens]) ++common_tokens;
      EXPECT_EQ(common_tokens, 16 * common_hashes) << a << " vs " << b;
    }
  }
}

TEST(ServeTrace, ReplaysArrivalsAndHitsWhatAPrefixCacheMust) {
  testutil::TempDir tmp("serve-trace");
  testutil::write_file(tmp / "trace.jsonl", trace_text());
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("serve --trace " + (tmp / "trace.jsonl") +
                                      " --prefix-caching --max-running 1 --pool-blocks 4096 --trace-ms-per-step 500 "
                                      "--json",
                                  out, tmp),
            0)
      << out;
  // The test's own account: full blocks, the trace's sharing, the hits.
  std::set<int> seen;
  long long full = 0, shared = 0, hits = 0;
  for (const Line& l : kTrace) {
    int run = 0;
    while (run < l.blocks && seen.count(l.hashes[static_cast<size_t>(run)])) ++run;
    full += l.blocks;
    shared += run;
    hits += std::min(run, (16 * l.blocks - 1) / 16);
    for (int h : l.hashes) seen.insert(h);
  }
  const std::vector<json> recs = testutil::json_records(out);
  ASSERT_EQ(recs.back().at("event"), "summary") << out;
  const json& tr = recs.back().at("trace");
  EXPECT_EQ(tr.at("requests"), kTrace.size());
  EXPECT_EQ(tr.at("truncated"), 0);
  EXPECT_EQ(tr.at("full_blocks"), full);
  EXPECT_EQ(tr.at("shared_blocks"), shared);
  EXPECT_DOUBLE_EQ(tr.at("trace_prefix_hit_rate").get<double>(), static_cast<double>(shared) / full);
  EXPECT_EQ(recs.back().at("prefix_hit_blocks"), hits);
  EXPECT_DOUBLE_EQ(tr.at("measured_prefix_hit_rate").get<double>(), static_cast<double>(hits) / full);
  for (const json& r : recs) {
    if (r.at("event") != "done") continue;
    const int line = std::stoi(r.at("id").get<std::string>());
    EXPECT_EQ(r.at("arrive"), kTrace[static_cast<size_t>(line - 1)].ts / 500) << r.dump();
    EXPECT_EQ(r.at("prompt_tokens"), 16 * kTrace[static_cast<size_t>(line - 1)].blocks);
  }
}

TEST(ServeTrace, LongPromptsAreCutToTheContextAndBadLinesNamed) {
  testutil::TempDir tmp("serve-trace-bad");
  // 100 blocks of 512 tokens: 1600 synthetic tokens, more than kvscope-tiny's 256 positions.
  json many = json::array();
  for (int i = 0; i < 100; ++i) many.push_back(i);
  testutil::write_file(
      tmp / "long.jsonl",
      json{{"timestamp", 0}, {"input_length", 51200}, {"output_length", 64}, {"hash_ids", many}}.dump());
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("serve --trace " + (tmp / "long.jsonl") + " --json", out, tmp), 0) << out;
  EXPECT_EQ(testutil::json_records(out).back().at("trace").at("truncated"), 1);
  testutil::write_file(tmp / "bad1.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n");
  testutil::write_file(tmp / "bad2.jsonl",
                       "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"
                       "{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n");
  testutil::write_file(tmp / "bad3.jsonl",
                       "{\"timestamp\": 0, \"input_length\": -3, \"output_length\": 1, \"hash_ids\": [1]}\n");
  testutil::expect_refused(
      {{"serve --trace " + (tmp / "bad1.jsonl"), {"bad1.jsonl:1", "hash_ids"}},
       {"serve --trace " + (tmp / "bad2.jsonl"), {"bad2.jsonl:2", "timestamp", "goes back"}},
       {"serve --trace " + (tmp / "bad3.jsonl"), {"bad3.jsonl:1", "input_length"}},
       {"serve --trace " + (tmp / "long.jsonl") + " --pool-blocks 2", {"long.jsonl:1", "--pool-blocks"}},
       {"serve --trace " + (tmp / "long.jsonl") + " --requests x.jsonl", {"--requests"}},
       {"serve --requests x.jsonl --trace-limit 3", {"--trace-limit", "only with --trace"}},
       {"serve", {"--requests", "--trace"}}},
      tmp);
}

}  // namespace
}  // namespace kvscope
