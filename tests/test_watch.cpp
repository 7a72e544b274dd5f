// The watch models without a server: KV event payloads assembled byte by byte
// from the msgpack specification (github.com/msgpack/msgpack/blob/master/spec.md)
// in each encoding vLLM used, the prefix cache they build, the sequence
// numbers' verdicts, and the servers' /metrics and /slots as they print them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/core/error.h"
#include "model/watch/kv_events.h"
#include "model/watch/metrics.h"
#include "model/watch/prefix_cache.h"
#include "model/watch/sequence.h"

namespace kvscope {
namespace {

// msgpack by hand: fixarray/fixmap/fixstr headers, float 64, uint 64, bin 8.
struct Pack {
  std::string b;
  Pack& array(int n) { return byte(0x90 | n); }
  Pack& map(int n) { return byte(0x80 | n); }
  Pack& str(const std::string& s) {
    byte(0xa0 | static_cast<int>(s.size()));
    b += s;
    return *this;
  }
  Pack& f64(const char* be8) {  // the 8 bytes of an IEEE double, big-endian
    byte(0xcb);
    b.append(be8, 8);
    return *this;
  }
  Pack& u64(uint64_t v) {
    byte(0xcf);
    for (int i = 7; i >= 0; --i) byte(static_cast<int>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Pack& fixint(int v) { return byte(v); }  // 0..127
  Pack& neg1() { return byte(0xff); }      // negative fixint -1
  Pack& bin(const std::string& s) {
    byte(0xc4).byte(static_cast<int>(s.size()));
    b += s;
    return *this;
  }
  Pack& nil() { return byte(0xc0); }
  Pack& yes() { return byte(0xc3); }
  Pack& byte(int v) {
    b.push_back(static_cast<char>(v));
    return *this;
  }
};

const char kOnePointFive[8] = {0x3f, static_cast<char>(0xf8), 0, 0, 0, 0, 0, 0};  // 1.5
const char kTwo[8] = {0x40, 0, 0, 0, 0, 0, 0, 0};                                 // 2.0

TEST(WatchDecode, PositionalBatchOfPositionalEvents) {
  // [1.5, [["BlockStored", [7, -1], nil, [1, 2, 3, 4], 2, nil, "GPU"], ["BlockRemoved", [7]],
  //        ["AllBlocksCleared"]], 3]
  Pack p;
  p.array(3).f64(kOnePointFive).array(3);
  p.array(7).str("BlockStored").array(2).fixint(7).neg1().nil().array(4).fixint(1).fixint(2).fixint(3).fixint(4);
  p.fixint(2).nil().str("GPU");
  p.array(2).str("BlockRemoved").array(1).fixint(7);
  p.array(1).str("AllBlocksCleared");
  p.fixint(3);
  const KvEventBatch b = decode_kv_batch(p.b);
  EXPECT_EQ(b.ts, 1.5);
  EXPECT_EQ(b.dp_rank, 3);
  EXPECT_FALSE(b.batch_is_map);
  ASSERT_EQ(b.events.size(), 3u);
  EXPECT_EQ(b.events[0].kind, KvEventKind::kStored);
  ASSERT_EQ(b.events[0].hashes.size(), 2u);
  EXPECT_EQ(to_string(b.events[0].hashes[0]), "7");
  EXPECT_EQ(to_string(b.events[0].hashes[1]), "18446744073709551615");  // -1 as unsigned 64-bit
  EXPECT_FALSE(b.events[0].parent.has_value());
  EXPECT_EQ(b.events[0].token_ids, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(b.events[0].block_size, 2);
  EXPECT_EQ(b.events[1].kind, KvEventKind::kRemoved);
  EXPECT_EQ(b.events[1].medium, "GPU");  // not given: the GPU
  EXPECT_EQ(b.events[2].kind, KvEventKind::kCleared);
}

TEST(WatchDecode, MapBatchOfTaggedMapsWithBytesHashesAndUnknownFields) {
  // {"ts": 2.0, "events": [{"type": "BlockStored", "block_hashes": [b"\xab\xcd"],
  //   "parent_block_hash": 2^64-1, "token_ids": [1, 2], "block_size": 2, "new_field": true,
  //   "group_idx": 1, "medium": "CPU"}]}
  Pack p;
  p.map(2).str("ts").f64(kTwo).str("events").array(1).map(8);
  p.str("type").str("BlockStored").str("block_hashes").array(1).bin("\xab\xcd");
  p.str("parent_block_hash").u64(~0ULL).str("token_ids").array(2).fixint(1).fixint(2);
  p.str("block_size").fixint(2).str("new_field").yes().str("group_idx").fixint(1).str("medium").str("CPU");
  const KvEventBatch b = decode_kv_batch(p.b);
  EXPECT_TRUE(b.batch_is_map);
  EXPECT_TRUE(b.events_are_maps);
  EXPECT_EQ(b.dp_rank, -1);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(to_string(b.events[0].hashes[0]), "abcd");
  ASSERT_TRUE(b.events[0].parent.has_value());
  EXPECT_EQ(to_string(*b.events[0].parent), "18446744073709551615");
  EXPECT_EQ(b.events[0].group, 1);
  EXPECT_EQ(b.events[0].medium, "CPU");
}

TEST(WatchDecode, OldestBlockStoredHasPerBlockTokenCounts) {
  // ["BlockStored", [5], 4, [9, 9, 9], [3], nil] inside [2.0, [...]]
  Pack p;
  p.array(2).f64(kTwo).array(1).array(6).str("BlockStored").array(1).fixint(5).fixint(4);
  p.array(3).fixint(9).fixint(9).fixint(9).array(1).fixint(3).nil();
  const KvEventBatch b = decode_kv_batch(p.b);
  EXPECT_EQ(b.events[0].block_size, 3);
  EXPECT_EQ(to_string(*b.events[0].parent), "4");
}

TEST(WatchDecode, AnUnreadablePayloadNamesTheField) {
  auto message = [](const std::string& payload) {
    try {
      decode_kv_batch(payload);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(decoded)");
  };
  Pack hash_is_text;  // [2.0, [["BlockStored", ["x"], nil, [], 4]]]
  hash_is_text.array(2).f64(kTwo).array(1).array(5).str("BlockStored").array(1).str("x").nil().array(0).fixint(4);
  EXPECT_NE(message(hash_is_text.b).find("events[0].block_hashes[0]: expected an integer or bytes"), std::string::npos)
      << message(hash_is_text.b);
  Pack map_no_hashes;  // {"ts": 2.0, "events": [{"type": "BlockRemoved"}]}
  map_no_hashes.map(2).str("ts").f64(kTwo).str("events").array(1).map(1).str("type").str("BlockRemoved");
  EXPECT_NE(message(map_no_hashes.b).find("events[0].block_hashes: missing"), std::string::npos);
  Pack unknown_type;  // [2.0, [["BlockMoved"]]]
  unknown_type.array(2).f64(kTwo).array(1).array(1).str("BlockMoved");
  EXPECT_NE(message(unknown_type.b).find("unknown event type \"BlockMoved\""), std::string::npos);
  Pack no_ts;  // {"events": []}
  no_ts.map(1).str("events").array(0);
  EXPECT_NE(message(no_ts.b).find("batch.ts: missing"), std::string::npos);
  EXPECT_NE(message(std::string("\xc1", 1)).find("not msgpack"), std::string::npos);  // 0xc1: never used
  // A million nested arrays would overflow the reader's stack: refused at 33 levels.
  EXPECT_NE(message(std::string(1000000, '\x91')).find("nested deeper than 32 levels"), std::string::npos);
  EXPECT_NE(message("").find("not msgpack"), std::string::npos);
}

KvEvent stored(std::vector<uint64_t> hashes, std::optional<uint64_t> parent, int tokens, int block_size) {
  auto h = [](uint64_t v) {
    BlockHash b;
    b.is_int = true;
    for (int i = 7; i >= 0; --i) b.bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return b;
  };
  KvEvent e;
  for (uint64_t x : hashes) e.hashes.push_back(h(x));
  if (parent) e.parent = h(*parent);
  e.token_ids.assign(static_cast<size_t>(tokens), 1);
  e.block_size = block_size;
  return e;
}

KvEvent removed(std::vector<uint64_t> hashes) {
  KvEvent e = stored(std::move(hashes), std::nullopt, 0, 0);
  e.kind = KvEventKind::kRemoved;
  return e;
}

TEST(WatchPrefixCache, ATreeOfBlocksWithUnknownParentsFromBeforeTheAttach) {
  PrefixCacheState s;
  KvEventBatch b;
  b.events = {stored({1, 2, 3}, std::nullopt, 10, 4), stored({4}, 2, 4, 4), stored({5}, 99, 4, 4)};
  ApplyCounts c = s.apply(b);
  EXPECT_EQ(c.stored, 5);
  EXPECT_EQ(s.known_count(), 5);
  EXPECT_EQ(s.unknown_count(), 1);  // 99
  EXPECT_EQ(s.root_count(), 2);     // 1 and 99
  EXPECT_EQ(s.leaf_count(), 3);     // 3, 4, 5
  EXPECT_EQ(s.max_depth(), 3);      // 1-2-3, 1-2-4
  // tokens per block: 4, 4, then the 2 left of 10
  std::vector<int> tokens;
  for (const auto& [k, v] : s.blocks()) tokens.push_back(v.tokens);
  EXPECT_EQ(tokens, (std::vector<int>{4, 4, 2, 4, 4, 0}));
  b.events = {removed({2, 99, 1234})};
  c = s.apply(b);
  EXPECT_EQ(c.removed, 2);
  EXPECT_EQ(c.removed_unseen, 1);
  EXPECT_EQ(s.known_count(), 4);
  EXPECT_EQ(s.unknown_count(), 0);
  EXPECT_EQ(s.root_count(), 4);  // 3 and 4 lost their parent, 5 its unknown one
  b.events = {stored({99}, std::nullopt, 4, 4)};
  s.apply(b);
  EXPECT_EQ(s.root_count(), 4);  // 99 is back: 5 hangs from it again
  EXPECT_EQ(s.max_depth(), 2);
  KvEvent clear;
  clear.kind = KvEventKind::kCleared;
  b.events = {clear};
  EXPECT_EQ(s.apply(b).clears, 1);
  EXPECT_TRUE(s.blocks().empty());
  EXPECT_EQ(s.known_count(), 0);
}

TEST(WatchSequence, GapsRestartsAndStaleNumbers) {
  SequenceTracker t;
  EXPECT_EQ(t.next(5).verdict, SeqVerdict::kFirst);  // attached late: not a gap
  EXPECT_EQ(t.next(6).verdict, SeqVerdict::kNext);
  const SeqStep gap = t.next(9);
  EXPECT_EQ(gap.verdict, SeqVerdict::kGap);
  EXPECT_EQ(gap.missed, 2);
  EXPECT_EQ(gap.last, 6);
  EXPECT_EQ(t.next(0).verdict, SeqVerdict::kRestart);
  EXPECT_EQ(t.next(1).verdict, SeqVerdict::kNext);
  EXPECT_EQ(t.missed(), 2);
  EXPECT_EQ(t.restarts(), 1);
  // Back, but not to 0: a restart whose first batches were lost.
  const SeqStep back = t.next(1);
  EXPECT_EQ(back.verdict, SeqVerdict::kRestart);
  EXPECT_EQ(back.missed, 1);
  EXPECT_EQ(t.restarts(), 2);
  EXPECT_EQ(t.missed(), 3);
}

// As vLLM's prometheus_client prints them (V1 names; counters with _total).
const char* kVllmMetrics =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 3.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 2.0\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 1.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.25\n"
    "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 0.75\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 4000.0\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 1000.0\n"
    "vllm:num_preemptions_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 7.0\n"
    "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
    "gpu_memory_utilization=\"0.9\",num_cpu_blocks=\"None\",num_gpu_blocks=\"27000\",prefix_caching_hash_algo="
    "\"sha256\""
    "} 1.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/Qwen3-8B\"} 4.0\n"
    "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 4.0\n"
    "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.5\n"
    "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 10\n"
    "vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.2 1700000000000\n";

TEST(WatchMetrics, VllmPrometheusText) {
  const std::vector<PromSample> s = parse_prometheus(kVllmMetrics);
  ASSERT_EQ(s.size(), 14u);
  EXPECT_EQ(s[0].labels.at("model_name"), "Qwen/Qwen3-8B");
  const VllmMetrics m = vllm_metrics(s);
  EXPECT_EQ(*m.running, 5.0);  // summed over engines
  EXPECT_EQ(*m.waiting, 1.0);
  EXPECT_EQ(*m.kv_usage, 0.5);  // averaged
  EXPECT_EQ(*m.prefix_queries, 4000.0);
  EXPECT_EQ(*m.prefix_hits, 1000.0);
  EXPECT_EQ(*m.preemptions, 7.0);
  EXPECT_EQ(*m.num_gpu_blocks, 27000.0);
  EXPECT_EQ(*m.block_size, 16.0);
  EXPECT_EQ(m.ttft->sum, 0.5);
  EXPECT_EQ(m.ttft->count, 4.0);
  EXPECT_EQ(m.itl->count, 10.0);
  // Earlier V1 names: gpu_cache_usage_perc, gpu_prefix_cache_*, time_per_output_token_seconds.
  const VllmMetrics old = vllm_metrics(parse_prometheus(
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\nvllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 10\n"
      "vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 4\nvllm:time_per_output_token_seconds_sum 1\n"
      "vllm:time_per_output_token_seconds_count 8\n"));
  EXPECT_EQ(*old.kv_usage, 0.5);
  EXPECT_EQ(*old.prefix_queries, 10.0);
  EXPECT_EQ(*old.prefix_hits, 4.0);
  EXPECT_EQ(old.itl->count, 8.0);
  const VllmMetrics none = vllm_metrics(parse_prometheus("# nothing\n\nother_metric 1\n"));
  EXPECT_FALSE(none.running.has_value());
  EXPECT_FALSE(none.ttft.has_value());
}

TEST(WatchMetrics, BadPrometheusLinesAreNamed) {
  for (const char* bad :
       {"ok 1\nvllm:x{a=\"1\" 2\n", "ok 1\nvllm:x{a=1} 2\n", "ok 1\nvllm:x one\n", "ok 1\nvllm:x\n"}) {
    try {
      parse_prometheus(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("metrics line 2"), std::string::npos) << e.what();
    }
  }
}

TEST(WatchMetrics, LlamaServerMetricsAndSlots) {
  const LlamaMetrics m = llama_metrics(parse_prometheus(
      "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 120\n"
      "llamacpp:tokens_predicted_total 300\nllamacpp:requests_processing 1\nllamacpp:requests_deferred 0\n"));
  EXPECT_EQ(*m.prompt_tokens, 120.0);
  EXPECT_EQ(*m.predicted_tokens, 300.0);
  EXPECT_EQ(*m.processing, 1.0);
  EXPECT_EQ(*m.deferred, 0.0);
  EXPECT_FALSE(m.kv_usage.has_value());  // only some versions print it
  // A newer build (is_processing, next_token as a one-element array) and an
  // older one (state, next_token as an object).
  const std::vector<LlamaSlot> s = parse_llama_slots(
      "[{\"id\":0,\"id_task\":7,\"n_ctx\":4096,\"is_processing\":true,\"n_prompt_tokens\":100,"
      "\"next_token\":[{\"has_next_token\":true,\"n_decoded\":12,\"n_remain\":88}]},"
      "{\"id\":1,\"n_ctx\":2048,\"state\":0,\"next_token\":{\"n_decoded\":0,\"n_remain\":-1}}]");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[0].processing);
  EXPECT_EQ(*s[0].n_decoded, 12);
  EXPECT_EQ(*s[0].n_remain, 88);
  EXPECT_EQ(*s[0].n_prompt_tokens, 100);
  EXPECT_FALSE(s[1].processing);
  EXPECT_EQ(s[1].n_ctx, 2048);
  EXPECT_EQ(*s[1].n_remain, -1);
  try {
    parse_llama_slots("[{\"id\":0,\"n_ctx\":\"big\"}]");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slots[0].n_ctx: expected an integer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
