#include "model/serving/trace.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"

namespace kvscope {
namespace {

using nlohmann::json;

struct TraceLine {
  double timestamp = 0;
  long long input = 0, output = 0;
  std::vector<uint64_t> hashes;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw UsageError(where + ": " + what);
}

long long length_of(const json& j, const char* name, const std::string& where) {
  if (!j.contains(name)) fail(where, std::string("missing field \"") + name + "\" (expected a token count)");
  const json& v = j[name];
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<long long>() < 0))
    fail(where, std::string("field \"") + name + "\": expected a token count >= 0, got " + json_quote(v));
  return v.get<long long>();
}

TraceLine line_of(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object())
    fail(where, "expected a JSON object {\"timestamp\", \"input_length\", \"output_length\", \"hash_ids\"}");
  TraceLine t;
  if (!j.contains("timestamp") || !j["timestamp"].is_number() || !std::isfinite(j["timestamp"].get<double>()))
    fail(where, "field \"timestamp\": expected a number of milliseconds");
  t.timestamp = j["timestamp"].get<double>();
  t.input = length_of(j, "input_length", where);
  t.output = length_of(j, "output_length", where);
  if (!j.contains("hash_ids") || !j["hash_ids"].is_array() || j["hash_ids"].empty())
    fail(where, "field \"hash_ids\": expected a non-empty array of block hashes (whole numbers)");
  for (const json& h : j["hash_ids"]) {
    if (!h.is_number_unsigned()) fail(where, "field \"hash_ids\": expected whole numbers >= 0, got " + json_quote(h));
    t.hashes.push_back(h.get<uint64_t>());
  }
  return t;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int scaled(long long tokens, const TraceOptions& o) {
  return static_cast<int>(std::llround(static_cast<double>(tokens) * o.block / o.trace_block));
}

// One trace line as a request: its prompt from its hashes, its lengths scaled
// and cut to the context.
ServeRequest request_of(const TraceLine& t, int line, double t0, const Model& model, const TraceOptions& o,
                        bool& truncated, const std::string& where) {
  const Config& c = model.config;
  ServeRequest r;
  r.id = std::to_string(line);
  if (t.timestamp < t0) fail(where, "field \"timestamp\": goes back in time (expected the lines in arrival order)");
  r.arrive = static_cast<int>(std::min((t.timestamp - t0) / o.ms_per_step, 1e9));
  r.max_new = std::clamp(scaled(t.output, o), 1, std::max(1, c.n_positions / 2));
  const int whole = static_cast<int>(t.hashes.size()) * o.block;
  const int want = std::clamp(scaled(t.input, o), 1, whole);
  const int fits = c.n_positions - r.max_new + 1;
  const int n = std::min(want, fits);
  truncated = n < want;
  for (int i = 0; i < n; ++i)
    r.prompt.push_back(trace_token(t.hashes[static_cast<size_t>(i / o.block)], i % o.block, c.vocab_size));
  const int need = blocks_needed(n, r.max_new, c.n_positions, o.block);
  if (need > o.pool_blocks)
    fail(where, "request could never fit the pool: " + std::to_string(n) + " prompt tokens and max_new " +
                    std::to_string(r.max_new) + " need " + std::to_string(need) + " blocks of " +
                    std::to_string(o.block) + " positions, the pool has " + std::to_string(o.pool_blocks) +
                    " (--pool-blocks)");
  return r;
}

}  // namespace

int trace_token(uint64_t hash, int i, int vocab) {
  return static_cast<int>(splitmix64(hash * 1024 + static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab));
}

TraceRequests parse_trace(const std::string& text, const std::string& file, const Model& model, const TraceOptions& o) {
  TraceRequests out;
  std::set<uint64_t> seen;  // every hash an earlier request's prompt had
  std::istringstream in(text);
  std::string s;
  double t0 = 0;
  for (int no = 1; std::getline(in, s); ++no) {
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (o.limit > 0 && static_cast<int>(out.requests.size()) >= o.limit) break;
    const std::string where = file + ":" + std::to_string(no);
    const TraceLine t = line_of(s, where);
    if (out.requests.empty()) t0 = t.timestamp;
    bool cut = false;
    out.requests.push_back(request_of(t, no, t0, model, o, cut, where));
    out.truncated += cut ? 1 : 0;
    const int full = static_cast<int>(out.requests.back().prompt.size()) / o.block;
    bool run = true;  // a prefix cache hits only an unbroken run from the start
    for (int k = 0; k < full; ++k) {
      run = run && seen.count(t.hashes[static_cast<size_t>(k)]);
      out.shared_blocks += run ? 1 : 0;
    }
    out.full_blocks += full;
    for (int k = 0; k < full; ++k) seen.insert(t.hashes[static_cast<size_t>(k)]);
  }
  if (out.requests.empty()) throw UsageError(file + ": no trace lines (expected one JSON object a line)");
  return out;
}

TraceRequests read_trace(const std::string& path, const Model& model, const TraceOptions& o) {
  return parse_trace(read_regular_file(path, "a trace, one JSON object a line"), path, model, o);
}

}  // namespace kvscope
