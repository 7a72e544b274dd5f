// `kvscope watch` end to end over loopback, no GPU: a vLLM-style publisher
// (tests/watch_publisher.py: Python's pyzmq + msgpack, the fixture batches in
// every encoding, with gaps, unknown hashes, clears, a replay socket and a
// restart) and its independent reference model of the prefix cache; canned
// /metrics and /slots served by cpp-httplib in the test. Every wait is
// bounded (--seconds, the publisher's own 20 s limit).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "json_lines.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

// Starts the publisher in the background; its ports once it has bound them.
json start_publisher(const testutil::TempDir& tmp, const std::string& scenario) {
  const std::string cmd = std::string(testutil::python()) + " " + KVSCOPE_SOURCE_DIR "/tests/watch_publisher.py " +
                          tmp.path() + " " + scenario + " > " + (tmp / "publisher.log") + " 2>&1 &";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  for (int i = 0; i < 200; ++i) {
    std::ifstream f(tmp / "ports.json");
    if (f) return json::parse(f);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the publisher wrote no ports: " << testutil::read_file(tmp / "publisher.log");
  return json::object();
}

std::string endpoint(const json& ports, const char* which) {
  return "tcp://127.0.0.1:" + std::to_string(ports.at(which).get<int>());
}

// A port nothing listens on (bound, then released).
int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  close(s);
  return ntohs(a.sin_port);
}

// Canned HTTP answers on 127.0.0.1, served from a thread for the test's life.
class CannedServer {
 public:
  explicit CannedServer(const std::map<std::string, std::pair<int, std::string>>& pages) {
    for (const auto& [path, page] : pages) {
      const int status = page.first;
      const std::string body = page.second;
      server_.Get(path, [status, body](const httplib::Request&, httplib::Response& r) {
        r.status = status;
        r.set_content(body, "text/plain");
      });
    }
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~CannedServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

const char* kMetrics =
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 5.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.125\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 800.0\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 200.0\n"
    "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 3.0\n"
    "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1.0\n";

// The tree as a set: the watcher lists by its own order.
std::vector<json> sorted_tree(json tree) {
  std::vector<json> v(tree.begin(), tree.end());
  std::sort(v.begin(), v.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
  return v;
}

void expect_summary_matches(const json& got, const json& want) {
  for (const auto& [key, value] : want.items()) {
    if (key == "tree") {
      EXPECT_EQ(sorted_tree(got.at("tree")), sorted_tree(value));
    } else {
      EXPECT_EQ(got.at(key), value) << key;
    }
  }
}

TEST(WatchCli, RebuildsThePublishedPrefixCacheExactly) {
  testutil::TempDir tmp("watch-full");
  CannedServer metrics({{"/metrics", {200, kMetrics}}});
  const json ports = start_publisher(tmp, "full");
  const json want = json::parse(testutil::read_file(tmp / "expected.json"));
  std::string out;
  const int rc = testutil::run_kvscope("watch --vllm " + endpoint(ports, "pub") + " --replay " +
                                           endpoint(ports, "replay") + " --metrics " + metrics.url() +
                                           "/metrics --interval 0.05 --json --tree --seconds 30 --batches " +
                                           std::to_string(want.at("batches").get<int>()),
                                       out, tmp);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<json> recs = testutil::json_records(out);
  ASSERT_FALSE(recs.empty()) << out;
  EXPECT_EQ(recs.front().at("event"), "attach");
  ASSERT_EQ(recs.back().at("event"), "summary") << out;
  expect_summary_matches(recs.back(), want);
  // Each batch record's running counts agree with the summary; gaps and replays as the fixture has them.
  int batches = 0, gaps = 0, replays = 0, metric_records = 0;
  long long stored = 0;
  for (const json& r : recs) {
    if (r.at("event") == "batch") ++batches, stored += r.at("stored").get<long long>();
    if (r.at("event") == "gap") ++gaps;
    if (r.at("event") == "replay") {
      ++replays;
      EXPECT_TRUE(r.at("complete").get<bool>());
    }
    if (r.at("event") != "metrics") continue;
    ++metric_records;
    EXPECT_EQ(r.at("running"), 2.0);
    EXPECT_EQ(r.at("waiting"), 5.0);
    EXPECT_EQ(r.at("kv_usage"), 0.125);
    EXPECT_EQ(r.at("prefix_hit_rate"), 0.25);
    EXPECT_EQ(r.at("preemptions"), 3.0);
    EXPECT_EQ(r.at("num_gpu_blocks"), 4096.0);
    EXPECT_EQ(r.at("block_size"), 16.0);
  }
  EXPECT_EQ(batches, want.at("batches"));
  EXPECT_EQ(stored, want.at("stored").get<long long>());
  EXPECT_EQ(gaps, 2);
  EXPECT_EQ(replays, 2);
  EXPECT_GE(metric_records, 1);
}

TEST(WatchCli, ARestartEmptiesTheCache) {
  testutil::TempDir tmp("watch-restart");
  const json ports = start_publisher(tmp, "restart");
  const json want = json::parse(testutil::read_file(tmp / "expected.json"));
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("watch --vllm " + endpoint(ports, "pub") + " --replay " + endpoint(ports, "replay") +
                                      " --json --tree --seconds 30 --batches " +
                                      std::to_string(want.at("batches").get<int>()),
                                  out, tmp),
            0)
      << out;
  const std::vector<json> recs = testutil::json_records(out);
  ASSERT_EQ(recs.back().at("event"), "summary") << out;
  EXPECT_EQ(want.at("restarts"), 1);
  expect_summary_matches(recs.back(), want);
  bool said = false;
  for (const json& r : recs) said |= r.at("event") == "restart";
  EXPECT_TRUE(said) << out;
}

TEST(WatchCli, AttachingLateAsksTheReplaySocketForWhatCameBefore) {
  testutil::TempDir tmp("watch-late");
  const json ports = start_publisher(tmp, "late");
  const json want = json::parse(testutil::read_file(tmp / "expected.json"));
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("watch --vllm " + endpoint(ports, "pub") + " --replay " + endpoint(ports, "replay") +
                                      " --json --tree --seconds 30 --batches " +
                                      std::to_string(want.at("batches").get<int>()),
                                  out, tmp),
            0)
      << out;
  const std::vector<json> recs = testutil::json_records(out);
  ASSERT_EQ(recs.back().at("event"), "summary") << out;
  EXPECT_EQ(want.at("replayed_before_attach"), 2);
  expect_summary_matches(recs.back(), want);
}

TEST(WatchCli, TextModeSaysWhatHappened) {
  testutil::TempDir tmp("watch-text");
  const json ports = start_publisher(tmp, "full");
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("watch --vllm " + endpoint(ports, "pub") + " --seconds 30 --batches 10", out, tmp), 0)
      << out;
  for (const char* said :
       {"attached to tcp://127.0.0.1:", "not published by the server",
        "gap: 1 batch missed (seq 3..3); no --replay socket", "batch 0: +2 stored", "summary: 10 batches"})
    EXPECT_NE(out.find(said), std::string::npos) << said << "\n" << out;
}

TEST(WatchCli, AnUnreadablePayloadNamesTheBatchAndField) {
  testutil::TempDir tmp("watch-bad");
  const json ports = start_publisher(tmp, "bad");
  std::string out;
  EXPECT_EQ(testutil::run_kvscope("watch --vllm " + endpoint(ports, "pub") + " --seconds 30 --json", out, tmp), 1)
      << out;
  EXPECT_NE(out.find("batch 1: KV event payload: events[0].block_hashes[0]: expected an integer or bytes"),
            std::string::npos)
      << out;
}

TEST(WatchCli, NothingListeningIsAnErrorNotAHang) {
  testutil::TempDir tmp("watch-none");
  const int port = free_port();
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(testutil::run_kvscope("watch --vllm tcp://127.0.0.1:" + std::to_string(port) + " --connect-timeout 0.5",
                                  out, tmp),
            1);
  EXPECT_NE(out.find("nothing is listening there"), std::string::npos) << out;
  EXPECT_EQ(
      testutil::run_kvscope("watch --llama-server http://127.0.0.1:" + std::to_string(port) + " --seconds 5", out, tmp),
      1);
  EXPECT_NE(out.find("nothing is listening there"), std::string::npos) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  // Something that is not a ZMQ publisher (an HTTP server) on the port.
  CannedServer http({{"/", {200, "hello"}}});
  EXPECT_EQ(testutil::run_kvscope("watch --vllm tcp://" + http.url().substr(7) + " --connect-timeout 1", out, tmp), 1);
  EXPECT_NE(out.find("did not answer as a ZMQ publisher"), std::string::npos) << out;
}

TEST(WatchCli, LlamaServerSlotsAndMetrics) {
  testutil::TempDir tmp("watch-llama");
  const std::string slots =
      "[{\"id\":0,\"id_task\":3,\"n_ctx\":4096,\"is_processing\":true,\"n_prompt_tokens\":17,"
      "\"next_token\":[{\"has_next_token\":true,\"n_decoded\":5,\"n_remain\":27}]},"
      "{\"id\":1,\"id_task\":-1,\"n_ctx\":4096,\"is_processing\":false,\"next_token\":[{\"n_decoded\":0}]}]";
  CannedServer server({{"/slots", {200, slots}},
                       {"/metrics",
                        {200,
                         "llamacpp:requests_processing 1\nllamacpp:requests_deferred 2\n"
                         "llamacpp:prompt_tokens_total 17\nllamacpp:tokens_predicted_total 5\n"}}});
  std::string out;
  ASSERT_EQ(
      testutil::run_kvscope("watch --llama-server " + server.url() + " --json --scrapes 2 --interval 0.05", out, tmp),
      0)
      << out;
  const std::vector<json> recs = testutil::json_records(out);
  int slot_records = 0, metric_records = 0;
  for (const json& r : recs) {
    if (r.at("event") == "slots") {
      ++slot_records;
      EXPECT_EQ(r.at("processing"), 1);
      EXPECT_EQ(r.at("total"), 2);
      EXPECT_EQ(r.at("slots")[0].at("n_decoded"), 5);
      EXPECT_EQ(r.at("slots")[0].at("n_remain"), 27);
      EXPECT_EQ(r.at("slots")[0].at("n_prompt_tokens"), 17);
      EXPECT_EQ(r.at("slots")[1].at("processing"), false);
    }
    if (r.at("event") == "metrics") {
      ++metric_records;
      EXPECT_EQ(r.at("requests_processing"), 1.0);
      EXPECT_EQ(r.at("requests_deferred"), 2.0);
      EXPECT_EQ(r.at("prompt_tokens"), 17.0);
      EXPECT_EQ(r.at("predicted_tokens"), 5.0);
    }
  }
  EXPECT_EQ(slot_records, 2);
  EXPECT_EQ(metric_records, 2);
  EXPECT_EQ(recs.back().at("event"), "summary");
  EXPECT_EQ(recs.back().at("scrapes"), 2);
  // /metrics off (llama-server without --metrics answers 501): said once, /slots still read.
  CannedServer no_metrics({{"/slots", {200, slots}}, {"/metrics", {501, "{\"error\":\"not supported\"}"}}});
  ASSERT_EQ(
      testutil::run_kvscope("watch --llama-server " + no_metrics.url() + " --scrapes 2 --interval 0.05", out, tmp), 0)
      << out;
  EXPECT_NE(out.find("start it with --metrics"), std::string::npos) << out;
  EXPECT_NE(out.find("slots: 1/2 processing"), std::string::npos) << out;
  // A page it cannot read is a record naming the URL and what is wrong, and the watch goes on.
  CannedServer odd({{"/slots", {200, "[{\"id\": 0, \"n_ctx\": \"big\"}]"}}, {"/metrics", {200, "x 1\n"}}});
  ASSERT_EQ(
      testutil::run_kvscope("watch --llama-server " + odd.url() + " --json --scrapes 2 --interval 0.05", out, tmp), 0)
      << out;
  const std::vector<json> odd_recs = testutil::json_records(out);
  int errors = 0;
  for (const json& r : odd_recs)
    if (r.at("event") == "scrape_error") {
      ++errors;
      EXPECT_NE(r.at("error").get<std::string>().find("slots[0].n_ctx: expected an integer"), std::string::npos);
    }
  EXPECT_EQ(errors, 2);
  EXPECT_EQ(odd_recs.back().at("scrape_errors"), 2);
}

TEST(WatchCli, FlagsAreChecked) {
  testutil::TempDir tmp("watch-flags");
  testutil::expect_refused({{"watch", {"give --vllm"}},
                            {"watch --vllm tcp://a:1 --llama-server http://a:1", {"one of them"}},
                            {"watch --vllm 127.0.0.1:5557", {"--vllm", "tcp://HOST:PORT"}},
                            {"watch --vllm tcp://127.0.0.1:99999", {"--vllm", "1..65535"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --replay 5558", {"--replay"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --metrics localhost:8000", {"--metrics", "http://"}},
                            {"watch --llama-server ftp://h:1", {"--llama-server"}},
                            {"watch --llama-server http://h:1 --replay tcp://h:2", {"--replay", "only with --vllm"}},
                            {"watch --llama-server http://h:1 --batches 3", {"--batches", "only with --vllm"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --scrapes 3", {"--scrapes"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --seconds 0", {"--seconds"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --batches 0", {"--batches"}},
                            {"watch --vllm tcp://127.0.0.1:5557 --interval nan", {"--interval"}}},
                           tmp);
}

}  // namespace
}  // namespace kvscope
