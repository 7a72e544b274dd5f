// What `kvscope watch`'s two sources share (cli_watch.cpp: vLLM / SGLang,
// cli_watch_llama.cpp: llama-server): the records' formatting, the limits
// that stop a watch, Ctrl-C, and the HTTP scraper.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "app/cli/cli_out.h"
#include "app/cli/cli_watch.h"
#include "app/watch/http_get.h"
#include "model/core/error.h"

namespace kvscope::watch_detail {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What neither server's events or metrics carry: said once at the attach.
inline constexpr const char* kNotPublished =
    "not published by the server: which request holds a block, partially filled blocks, attention";

// The optional numbers of a record: absent when the server did not say.
inline void put(json& j, const char* key, const std::optional<double>& v) {
  if (v && std::isfinite(*v)) j[key] = *v;
}

inline std::string pct(const std::optional<double>& num, const std::optional<double>& den) {
  if (!num || !den || *den <= 0) return "?";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * *num / *den);
  return b;
}

inline std::string num(const std::optional<double>& v, const char* fmt = "%.0f") {
  if (!v || !std::isfinite(*v)) return "?";
  char b[32];
  std::snprintf(b, sizeof b, fmt, *v);
  return b;
}

// One output record: JSON Lines, or a text line.
class Reporter {
 public:
  explicit Reporter(bool as_json) : json_(as_json) {}
  bool json_mode() const { return json_; }
  void record(const json& j, const std::string& text) {
    if (json_) {
      out_line(j.dump());
    } else {
      out_line(text);
    }
  }

 private:
  bool json_;
};

// Stops the watch: --seconds, --batches, --scrapes.
struct Limits {
  Clock::time_point end = Clock::time_point::max();
  long long batches = 0, scrapes = 0;
  explicit Limits(const WatchArgs& a) : batches(a.batches), scrapes(a.scrapes) {
    if (a.seconds > 0)
      end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  }
  int ms_left(int cap) const {
    if (end == Clock::time_point::max()) return cap;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, cap));
  }
  bool expired() const { return Clock::now() >= end; }
};

// Ctrl-C ends the watch with its summary (the waits below are short enough
// to notice within a fifth of a second).
extern volatile std::sig_atomic_t g_interrupted;  // set by Ctrl-C (cli_watch.cpp)
extern "C" void kvscope_watch_on_interrupt(int);

struct InterruptGuard {
  void (*previous)(int);
  InterruptGuard() : previous(std::signal(SIGINT, kvscope_watch_on_interrupt)) { g_interrupted = 0; }
  ~InterruptGuard() { std::signal(SIGINT, previous); }
};

// Scrapes one URL every --interval; the first failure is an error (a wrong
// URL), later ones records (a restarting server).
class Scraper {
 public:
  Scraper(const std::string& url, const char* flag, double timeout)
      : url_(parse_http_url(url, flag)), flag_(flag), timeout_(timeout) {}
  // The body of a 200 answer; none (and `error` set) for a later failure.
  std::optional<std::string> get(std::string& error, int& status) {
    status = 0;
    try {
      const HttpResponse r = http_get(url_, timeout_);
      status = r.status;
      if (r.status == 200) {
        ok_ = true;
        return r.body;
      }
      error = "HTTP " + std::to_string(r.status);
    } catch (const Error& e) {
      error = e.what();
    }
    if (!ok_ && status == 0) throw Error(std::string(flag_) + " " + error);
    return std::nullopt;
  }
  std::string url() const { return url_.base + url_.path; }

 private:
  HttpUrl url_;
  const char* flag_;
  double timeout_;
  bool ok_ = false;
};

// A page the server answered that kvscope cannot read (an odd line in one
// scrape of a long run) is a record, not the end of the watch.
template <class T, class Parse>
std::optional<T> read_page(const Parse& parse, const std::string& url, Reporter& out, long long& errors) {
  try {
    return parse();
  } catch (const Error& e) {
    ++errors;
    out.record({{"event", "scrape_error"}, {"url", url}, {"error", e.what()}}, url + ": " + e.what());
    return std::nullopt;
  }
}

// --llama-server's watch (cli_watch_llama.cpp).
int run_llama_watch(const WatchArgs& a);

}  // namespace kvscope::watch_detail
