// `kvscope watch --llama-server`: its /slots and /metrics scraped every
// --interval (llama-server publishes no KV events).
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "app/cli/cli_watch_common.h"
#include "model/watch/metrics.h"

namespace kvscope::watch_detail {
namespace {

// --llama-server: /slots and /metrics every --interval.
class LlamaWatch {
 public:
  explicit LlamaWatch(const WatchArgs& a)
      : a_(a),
        out_(a.json),
        limits_(a),
        slots_(a.llama_server + "/slots", "--llama-server", a.connect_timeout),
        metrics_(a.llama_server + "/metrics", "--llama-server", a.connect_timeout) {}
  int run();

 private:
  void scrape_slots();
  void scrape_metrics();
  // A 404/501: the endpoint is off (a flag, a version); said once, then not asked again.
  bool endpoint_off(int status, const std::string& url, const char* hint, bool& on);

  const WatchArgs& a_;
  Reporter out_;
  Limits limits_;
  Scraper slots_, metrics_;
  bool slots_on_ = true, metrics_on_ = true;
  long long scrapes_ = 0, errors_ = 0;
  int n_slots_ = 0, processing_ = 0;
};

bool LlamaWatch::endpoint_off(int status, const std::string& url, const char* hint, bool& on) {
  if (status != 404 && status != 501) return false;
  on = false;
  out_.record({{"event", "unavailable"}, {"url", url}, {"status", status}, {"hint", hint}},
              url + ": HTTP " + std::to_string(status) + ": " + hint);
  return true;
}

void LlamaWatch::scrape_slots() {
  std::string error;
  int status = 0;
  const auto body = slots_.get(error, status);
  if (!body) {
    if (endpoint_off(status, slots_.url(),
                     "this llama-server does not serve /slots (start it with --slots; older "
                     "builds: without --slots-endpoint-disable)",
                     slots_on_))
      return;
    ++errors_;
    out_.record({{"event", "scrape_error"}, {"url", slots_.url()}, {"error", error}}, slots_.url() + ": " + error);
    return;
  }
  const auto read =
      read_page<std::vector<LlamaSlot>>([&] { return parse_llama_slots(*body); }, slots_.url(), out_, errors_);
  if (!read) return;
  const std::vector<LlamaSlot>& slots = *read;
  n_slots_ = static_cast<int>(slots.size());
  processing_ = 0;
  json a = json::array();
  std::string text;
  for (const LlamaSlot& s : slots) {
    processing_ += s.processing ? 1 : 0;
    json j = {{"id", s.id}, {"n_ctx", s.n_ctx}, {"processing", s.processing}};
    if (s.n_decoded) j["n_decoded"] = *s.n_decoded;
    if (s.n_remain) j["n_remain"] = *s.n_remain;
    if (s.n_prompt_tokens) j["n_prompt_tokens"] = *s.n_prompt_tokens;
    a.push_back(j);
    text += " | " + std::to_string(s.id) + ": " + (s.processing ? "busy" : "idle") + ", n_ctx " +
            std::to_string(s.n_ctx) + (s.n_decoded ? ", " + std::to_string(*s.n_decoded) + " decoded" : "");
  }
  out_.record({{"event", "slots"}, {"slots", a}, {"processing", processing_}, {"total", n_slots_}},
              "slots: " + std::to_string(processing_) + "/" + std::to_string(n_slots_) + " processing" + text);
}

void LlamaWatch::scrape_metrics() {
  std::string error;
  int status = 0;
  const auto body = metrics_.get(error, status);
  if (!body) {
    if (endpoint_off(status, metrics_.url(), "this llama-server does not serve /metrics (start it with --metrics)",
                     metrics_on_))
      return;
    ++errors_;
    out_.record({{"event", "scrape_error"}, {"url", metrics_.url()}, {"error", error}}, metrics_.url() + ": " + error);
    return;
  }
  const std::optional<LlamaMetrics> read =
      read_page<LlamaMetrics>([&] { return llama_metrics(parse_prometheus(*body)); }, metrics_.url(), out_, errors_);
  if (!read) return;
  const LlamaMetrics& m = *read;
  json j = {{"event", "metrics"}};
  put(j, "requests_processing", m.processing);
  put(j, "requests_deferred", m.deferred);
  put(j, "prompt_tokens", m.prompt_tokens);
  put(j, "predicted_tokens", m.predicted_tokens);
  put(j, "kv_usage", m.kv_usage);
  put(j, "kv_tokens", m.kv_tokens);
  out_.record(j, "metrics: processing " + num(m.processing) + ", deferred " + num(m.deferred) + " | tokens: prompt " +
                     num(m.prompt_tokens) + ", predicted " + num(m.predicted_tokens) + " | KV " + pct(m.kv_usage, 1.0) +
                     " (" + num(m.kv_tokens) + " tokens)");
}

int LlamaWatch::run() {
  out_.record(
      {{"event", "attach"}, {"source", "llama-server"}, {"url", a_.llama_server}, {"not_published", kNotPublished}},
      "watching " + a_.llama_server + "; " + kNotPublished);
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a_.interval));
  auto next = Clock::now();
  while (!g_interrupted && !limits_.expired() && !(limits_.scrapes > 0 && scrapes_ >= limits_.scrapes)) {
    if (Clock::now() < next) {
      const long long to_next = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      std::this_thread::sleep_for(
          std::chrono::milliseconds(limits_.ms_left(static_cast<int>(std::min(to_next, 200LL)))));
      continue;
    }
    if (slots_on_) scrape_slots();
    if (metrics_on_) scrape_metrics();
    if (!slots_on_ && !metrics_on_)
      throw Error("--llama-server " + a_.llama_server +
                  ": serves neither /slots nor /metrics: start llama-server "
                  "with --metrics (and --slots)");
    ++scrapes_;
    next += interval;
  }
  const json s = {
      {"event", "summary"},        {"scrapes", scrapes_},         {"scrape_errors", errors_},       {"slots", n_slots_},
      {"processing", processing_}, {"slots_endpoint", slots_on_}, {"metrics_endpoint", metrics_on_}};
  out_.record(s, "summary: " + std::to_string(scrapes_) + " scrapes, " + std::to_string(errors_) + " errors; " +
                     std::to_string(processing_) + "/" + std::to_string(n_slots_) + " slots processing at the end");
  return 0;
}

}  // namespace

int run_llama_watch(const WatchArgs& a) {
  return LlamaWatch(a).run();
}

}  // namespace kvscope::watch_detail
