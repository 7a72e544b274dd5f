// `kvscope watch`: a live view of a real server's KV block pool, headless.
// --vllm: the KV events (model/watch/) rebuilt into the prefix cache, gaps
// replayed, restarts noticed, /metrics scraped beside; --llama-server: its
// /slots and /metrics scraped. One record per batch or scrape (text or JSON
// Lines), a summary at the end. Every wait is bounded by --seconds, the
// connect timeout or the replay timeout: a dead server is an error, not a hang.
#include "app/cli/cli_watch.h"

#include "app/cli/cli_watch_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "app/watch/http_get.h"
#include "app/watch/kv_subscriber.h"
#include "model/core/error.h"
#include "model/watch/kv_events.h"
#include "model/watch/metrics.h"
#include "model/watch/prefix_cache.h"
#include "model/watch/sequence.h"

namespace kvscope {

namespace watch_detail {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void kvscope_watch_on_interrupt(int) {
  g_interrupted = 1;
}
}  // namespace watch_detail

namespace {

using namespace watch_detail;

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// tcp://HOST:PORT (or ipc://PATH) for ZMQ.
void check_zmq_endpoint(const std::string& v, const char* flag, const char* example) {
  if (v.rfind("ipc://", 0) == 0 && v.size() > 6) return;
  const size_t colon = v.rfind(':');
  bool ok = v.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon > 6 && colon + 1 < v.size();
  if (ok) {
    const std::string port = v.substr(colon + 1);
    ok = port.size() <= 5 && std::all_of(port.begin(), port.end(), ::isdigit) && std::stoi(port) >= 1 &&
         std::stoi(port) <= 65535;
  }
  if (!ok)
    throw UsageError(std::string(flag) + ": \"" + v + "\" is not tcp://HOST:PORT with a port in 1..65535 (e.g. " +
                     example + ")");
}

void check_watch_args(const CLI::App& cmd, const WatchArgs& a) {
  const bool vllm = !a.vllm.empty(), llama = !a.llama_server.empty();
  if (vllm == llama)
    throw UsageError(
        "watch: give --vllm tcp://HOST:PORT (vLLM or SGLang KV events) or --llama-server "
        "http://HOST:PORT, one of them");
  if (vllm) check_zmq_endpoint(a.vllm, "--vllm", "tcp://127.0.0.1:5557");
  if (!a.replay.empty()) check_zmq_endpoint(a.replay, "--replay", "tcp://127.0.0.1:5558");
  if (!a.metrics.empty()) parse_http_url(a.metrics, "--metrics");
  if (llama) parse_http_url(a.llama_server, "--llama-server");
  for (const char* f : {"--replay", "--metrics", "--batches"})
    if (llama && cmd.get_option(f)->count())
      throw UsageError(std::string(f) +
                       ": only with --vllm (llama-server publishes no KV events; its /metrics is "
                       "read from --llama-server's URL)");
  if (vllm && a.metrics.empty() && cmd.get_option("--scrapes")->count())
    throw UsageError("--scrapes: with --vllm only together with --metrics URL (there is nothing else to scrape)");
}

json vllm_metrics_json(const VllmMetrics& m) {
  json j = {{"event", "metrics"}};
  put(j, "running", m.running);
  put(j, "waiting", m.waiting);
  put(j, "kv_usage", m.kv_usage);
  put(j, "prefix_queries", m.prefix_queries);
  put(j, "prefix_hits", m.prefix_hits);
  if (m.prefix_queries && m.prefix_hits && *m.prefix_queries > 0)
    j["prefix_hit_rate"] = *m.prefix_hits / *m.prefix_queries;
  put(j, "preemptions", m.preemptions);
  put(j, "num_gpu_blocks", m.num_gpu_blocks);
  put(j, "block_size", m.block_size);
  if (m.ttft && m.ttft->count > 0) j["ttft_mean_s"] = m.ttft->sum / m.ttft->count;
  if (m.itl && m.itl->count > 0) j["itl_mean_s"] = m.itl->sum / m.itl->count;
  return j;
}

void print_vllm_metrics(const VllmMetrics& m) {
  const std::optional<double> ttft_ms =
      m.ttft && m.ttft->count > 0 ? std::optional<double>(1000 * m.ttft->sum / m.ttft->count) : std::nullopt;
  out_printf(
      "metrics: running %s, waiting %s | KV pool %s used of %s blocks (block %s) | prefix hits %s (%s of %s "
      "tokens) | preemptions %s | mean TTFT %s ms\n",
      num(m.running).c_str(), num(m.waiting).c_str(), pct(m.kv_usage, 1.0).c_str(), num(m.num_gpu_blocks).c_str(),
      num(m.block_size).c_str(), pct(m.prefix_hits, m.prefix_queries).c_str(), num(m.prefix_hits).c_str(),
      num(m.prefix_queries).c_str(), num(m.preemptions).c_str(), num(ttft_ms, "%.1f").c_str());
}
struct VllmTotals {
  long long batches = 0, stored = 0, removed = 0, removed_unseen = 0, clears = 0;
  long long recovered = 0, before_attach = 0, scrapes = 0, scrape_errors = 0;
};

json tree_json(const PrefixCacheState& s) {
  json a = json::array();
  for (const auto& [k, b] : s.blocks()) {
    json j = {{"hash", to_string(k.hash)}, {"known", b.known}, {"tokens", b.tokens}};
    j["parent"] = b.parent ? json(to_string(*b.parent)) : json(nullptr);
    j["medium"] = k.medium;
    j["group"] = k.group;
    a.push_back(j);
  }
  return a;
}

class VllmWatch {
 public:
  VllmWatch(const WatchArgs& a, bool tree) : a_(a), tree_(tree), out_(a.json), limits_(a), sub_(a.vllm, a.replay) {
    if (!a.metrics.empty()) scraper_.emplace(a.metrics, "--metrics", a.connect_timeout);
  }
  int run();

 private:
  void on_message(const RawBatch& b);
  void apply(const RawBatch& b, bool replayed);
  void replay(int64_t from, int64_t to, const char* why);
  void scrape();
  json summary() const;
  bool done() const {
    return g_interrupted || limits_.expired() || (limits_.batches > 0 && t_.batches >= limits_.batches) ||
           (limits_.scrapes > 0 && t_.scrapes >= limits_.scrapes);
  }

  const WatchArgs& a_;
  bool tree_;
  Reporter out_;
  Limits limits_;
  KvSubscriber sub_;
  std::optional<Scraper> scraper_;
  PrefixCacheState state_;
  SequenceTracker seq_;
  VllmTotals t_;
};

void VllmWatch::apply(const RawBatch& b, bool replayed) {
  KvEventBatch batch;
  try {
    batch = decode_kv_batch(b.payload);
  } catch (const Error& e) {
    throw Error("--vllm " + a_.vllm + ": batch " + std::to_string(b.seq) + ": " + e.what() +
                " (a server version whose events kvscope cannot read)");
  }
  const ApplyCounts c = state_.apply(batch);
  ++t_.batches;
  t_.stored += c.stored;
  t_.removed += c.removed;
  t_.removed_unseen += c.removed_unseen;
  t_.clears += c.clears;
  json j = {{"event", "batch"},
            {"seq", b.seq},
            {"ts", batch.ts},
            {"events", batch.events.size()},
            {"stored", c.stored},
            {"removed", c.removed},
            {"removed_unseen", c.removed_unseen},
            {"cleared", c.clears},
            {"blocks", state_.known_count()},
            {"unknown", state_.unknown_count()},
            {"replayed", replayed}};
  if (batch.dp_rank >= 0) j["dp_rank"] = batch.dp_rank;
  char text[256];
  std::snprintf(text, sizeof text, "batch %lld%s: +%d stored, -%d removed%s%s | prefix cache %d blocks, %d unknown",
                static_cast<long long>(b.seq), replayed ? " (replayed)" : "", c.stored, c.removed,
                c.removed_unseen ? (" (" + std::to_string(c.removed_unseen) + " never seen)").c_str() : "",
                c.clears ? ", all cleared" : "", state_.known_count(), state_.unknown_count());
  out_.record(j, text);
}

void VllmWatch::replay(int64_t from, int64_t to, const char* why) {
  bool complete = false;
  std::vector<RawBatch> got = sub_.replay(from, static_cast<int>(a_.replay_timeout * 1000), complete);
  std::sort(got.begin(), got.end(), [](const RawBatch& x, const RawBatch& y) { return x.seq < y.seq; });
  long long used = 0;
  int64_t next = from;
  for (const RawBatch& r : got) {
    if (r.seq < next || r.seq >= to) continue;  // duplicates, and what the live socket delivers itself
    apply(r, true);
    next = r.seq + 1;
    ++used;
  }
  json j = {{"event", "replay"},  {"why", why},       {"from", from},        {"to", to - 1},
            {"asked", to - from}, {"received", used}, {"complete", complete}};
  std::string text = "replay (" + std::string(why) + "): asked for seq " + std::to_string(from) + ".." +
                     std::to_string(to - 1) + ", got " + std::to_string(used) + " of " + std::to_string(to - from) +
                     (complete ? "" : " (no end marker within the replay timeout: is --replay the replay_endpoint?)");
  out_.record(j, text);
  if (std::string(why) == "before the attach") {
    t_.before_attach += used;
  } else {
    t_.recovered += used;  // a gap, or the first batches after a restart: counted in `missed`
  }
}

void VllmWatch::on_message(const RawBatch& b) {
  const SeqStep s = seq_.next(b.seq);
  switch (s.verdict) {
    case SeqVerdict::kRestart:
      state_.clear();
      out_.record({{"event", "restart"}, {"seq", b.seq}, {"last", s.last}, {"missed", s.missed}},
                  "restart: the sequence went back from " + std::to_string(s.last) + " to " + std::to_string(b.seq) +
                      ": the server restarted, its prefix cache starts empty" +
                      (s.missed == 1  ? " (its first batch missed)"
                       : s.missed > 1 ? " (its first " + std::to_string(s.missed) + " batches missed)"
                                      : ""));
      if (s.missed > 0 && sub_.has_replay()) replay(0, b.seq, "restart");
      break;
    case SeqVerdict::kGap:
      out_.record({{"event", "gap"}, {"missed", s.missed}, {"from", s.last + 1}, {"to", b.seq - 1}},
                  "gap: " + std::to_string(s.missed) + " batch" + (s.missed == 1 ? "" : "es") + " missed (seq " +
                      std::to_string(s.last + 1) + ".." + std::to_string(b.seq - 1) + ")" +
                      (sub_.has_replay() ? ", asking the replay socket" : "; no --replay socket to ask"));
      if (sub_.has_replay()) replay(s.last + 1, b.seq, "gap");
      break;
    case SeqVerdict::kFirst:
      if (b.seq > 0 && sub_.has_replay()) replay(0, b.seq, "before the attach");
      break;
    case SeqVerdict::kNext:
      break;
  }
  apply(b, false);
}

void VllmWatch::scrape() {
  std::string error;
  int status = 0;
  const std::optional<std::string> body = scraper_->get(error, status);
  ++t_.scrapes;
  if (!body) {
    ++t_.scrape_errors;
    out_.record({{"event", "scrape_error"}, {"url", scraper_->url()}, {"error", error}},
                "metrics: " + scraper_->url() + ": " + error);
    return;
  }
  const std::optional<VllmMetrics> read = read_page<VllmMetrics>([&] { return vllm_metrics(parse_prometheus(*body)); },
                                                                 scraper_->url(), out_, t_.scrape_errors);
  if (!read) return;
  const VllmMetrics& m = *read;
  if (out_.json_mode()) {
    out_line(vllm_metrics_json(m).dump());
  } else {
    print_vllm_metrics(m);
  }
}

json VllmWatch::summary() const {
  json j = {{"event", "summary"},
            {"batches", t_.batches},
            {"blocks", state_.known_count()},
            {"unknown", state_.unknown_count()},
            {"roots", state_.root_count()},
            {"leaves", state_.leaf_count()},
            {"depth", state_.max_depth()},
            {"block_size", state_.block_size()},
            {"stored", t_.stored},
            {"removed", t_.removed},
            {"removed_unseen", t_.removed_unseen},
            {"clears", t_.clears},
            {"missed", seq_.missed()},
            {"recovered", t_.recovered},
            {"lost", seq_.missed() - t_.recovered},
            {"replayed_before_attach", t_.before_attach},
            {"restarts", seq_.restarts()},
            {"last_seq", seq_.last()},
            {"scrapes", t_.scrapes},
            {"scrape_errors", t_.scrape_errors}};
  if (tree_) j["tree"] = tree_json(state_);
  return j;
}

void print_vllm_summary(const json& j) {
  out_printf(
      "summary: %lld batches; prefix cache %d blocks (+%d unknown, from before the attach) in %d trees, "
      "depth %d, %d leaves; stored %lld, removed %lld (%lld never seen), %lld clears; %lld missed, %lld "
      "replayed, %lld lost; %d restarts\n",
      j["batches"].get<long long>(), j["blocks"].get<int>(), j["unknown"].get<int>(), j["roots"].get<int>(),
      j["depth"].get<int>(), j["leaves"].get<int>(), j["stored"].get<long long>(), j["removed"].get<long long>(),
      j["removed_unseen"].get<long long>(), j["clears"].get<long long>(), j["missed"].get<long long>(),
      j["recovered"].get<long long>(), j["lost"].get<long long>(), j["restarts"].get<int>());
}

int VllmWatch::run() {
  sub_.wait_connected(a_.seconds > 0 ? std::min(a_.connect_timeout, a_.seconds) : a_.connect_timeout);
  out_.record(
      {{"event", "attach"},
       {"source", "vllm"},
       {"endpoint", a_.vllm},
       {"replay", a_.replay},
       {"metrics", a_.metrics},
       {"not_published", kNotPublished}},
      "attached to " + a_.vllm + (a_.replay.empty() ? "" : " (replay " + a_.replay + ")") + "; " + kNotPublished);
  auto next_scrape = Clock::now();
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a_.interval));
  while (!done()) {
    int cap = 200;
    if (scraper_) {
      if (Clock::now() >= next_scrape) {
        scrape();
        next_scrape += interval;
        continue;
      }
      const auto to_scrape = std::chrono::duration_cast<std::chrono::milliseconds>(next_scrape - Clock::now());
      cap = static_cast<int>(std::clamp<long long>(to_scrape.count(), 1, cap));
    }
    if (const auto b = sub_.receive(limits_.ms_left(cap))) on_message(*b);
  }
  const json s = summary();
  if (out_.json_mode()) {
    out_line(s.dump());
  } else {
    print_vllm_summary(s);
  }
  return 0;
}

}  // namespace

void add_watch_command(CLI::App& app, WatchCommand& c) {
  WatchArgs& a = c.args;
  auto* w = c.cmd = app.add_subcommand(
      "watch", "Attach to a running vLLM / SGLang (KV cache events) or llama-server and report its KV pool live");
  w->add_option("--vllm", a.vllm, "vLLM/SGLang KV events publisher, tcp://HOST:PORT (--kv-events-config's endpoint)");
  w->add_option("--replay", a.replay, "Its replay socket, tcp://HOST:PORT (replay_endpoint): asked after a gap");
  w->add_option("--metrics", a.metrics,
                "vLLM's Prometheus URL, e.g. http://HOST:8000/metrics, scraped every --interval");
  w->add_option("--llama-server", a.llama_server, "llama-server's URL, http://HOST:PORT (its /slots and /metrics)");
  w->add_flag("--json", a.json, "JSON Lines: attach, batch, gap, replay, restart, metrics, slots, summary");
  w->add_flag("--tree", c.tree, "With --vllm --json: the summary lists every cached block (hash, parent, known)");
  w->add_option("--batches", a.batches, "Stop after N batches (with --vllm)")->check(int_in(1, 1LL << 40));
  w->add_option("--scrapes", a.scrapes, "Stop after N scrapes")->check(int_in(1, 1LL << 40));
  w->add_option("--seconds", a.seconds, "Stop after S seconds (default: until Ctrl-C)")->check(real_in(0, 1e7, true));
  w->add_option("--connect-timeout", a.connect_timeout, "Seconds to wait for the server at the start")
      ->capture_default_str()
      ->check(real_in(0, 3600, true));
  w->add_option("--interval", a.interval, "Seconds between scrapes of /metrics and /slots")
      ->capture_default_str()
      ->check(real_in(0.01, 3600));
  w->add_option("--replay-timeout", a.replay_timeout, "Seconds without a reply that end a replay")
      ->capture_default_str()
      ->check(real_in(0, 600, true));
}

int run_watch_command(const WatchCommand& c) {
  check_watch_args(*c.cmd, c.args);
  InterruptGuard guard;
  if (!c.args.llama_server.empty()) return run_llama_watch(c.args);
  return VllmWatch(c.args, c.tree).run();
}

}  // namespace kvscope
