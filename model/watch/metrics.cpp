#include "model/watch/metrics.h"

#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/core/error.h"

namespace kvscope {
namespace {

[[noreturn]] void bad_line(int line, const std::string& what) {
  throw Error("metrics line " + std::to_string(line) + ": " + what);
}

bool name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (!first && c >= '0' && c <= '9');
}

// {a="x",b="y\"z"} starting at s[i] == '{'; returns the index after '}'.
size_t read_labels(const std::string& s, size_t i, int line, std::map<std::string, std::string>& out) {
  ++i;
  while (true) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i < s.size() && s[i] == '}') return i + 1;
    const size_t k0 = i;
    while (i < s.size() && name_char(s[i], i == k0)) ++i;
    const std::string key = s.substr(k0, i - k0);
    if (key.empty() || i + 1 >= s.size() || s[i] != '=' || s[i + 1] != '"')
      bad_line(line, "expected label=\"value\" at column " + std::to_string(i + 1));
    i += 2;
    std::string v;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
        v += s[i] == 'n' ? '\n' : s[i];
      } else {
        v += s[i];
      }
      ++i;
    }
    if (i >= s.size()) bad_line(line, "unterminated label value");
    out[key] = v;
    ++i;
  }
}

double read_value(const std::string& tok, int line) {
  if (tok == "+Inf" || tok == "Inf") return INFINITY;
  if (tok == "-Inf") return -INFINITY;
  if (tok == "NaN") return NAN;
  char* end = nullptr;
  const double v = std::strtod(tok.c_str(), &end);
  if (tok.empty() || end != tok.c_str() + tok.size()) bad_line(line, "\"" + tok + "\" is not a number");
  return v;
}

// The sum over every label set of the first of `names` present.
std::optional<double> sum_of(const std::vector<PromSample>& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    std::optional<double> total;
    for (const PromSample& x : s)
      if (x.name == n) total = total.value_or(0) + x.value;
    if (total) return total;
  }
  return std::nullopt;
}

std::optional<double> mean_of(const std::vector<PromSample>& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    double total = 0;
    int count = 0;
    for (const PromSample& x : s)
      if (x.name == n) total += x.value, ++count;
    if (count) return total / count;
  }
  return std::nullopt;
}

std::optional<PromHistogram> histogram(const std::vector<PromSample>& s, std::initializer_list<const char*> bases) {
  for (const char* b : bases) {
    const auto sum = sum_of(s, {(std::string(b) + "_sum").c_str()});
    const auto count = sum_of(s, {(std::string(b) + "_count").c_str()});
    if (sum && count) return PromHistogram{*sum, *count};
  }
  return std::nullopt;
}

std::optional<double> label_number(const std::vector<PromSample>& s, const char* name, const char* label) {
  for (const PromSample& x : s) {
    if (x.name != name) continue;
    auto it = x.labels.find(label);
    if (it == x.labels.end()) continue;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (!it->second.empty() && *end == '\0' && std::isfinite(v)) return v;
  }
  return std::nullopt;
}

}  // namespace

std::vector<PromSample> parse_prometheus(const std::string& text) {
  std::vector<PromSample> out;
  std::istringstream in(text);
  std::string s;
  int line = 0;
  while (std::getline(in, s)) {
    ++line;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    size_t i = s.find_first_not_of(" \t");
    if (i == std::string::npos || s[i] == '#') continue;
    PromSample p;
    const size_t n0 = i;
    while (i < s.size() && name_char(s[i], i == n0)) ++i;
    p.name = s.substr(n0, i - n0);
    if (p.name.empty()) bad_line(line, "expected a metric name at column " + std::to_string(n0 + 1));
    if (i < s.size() && s[i] == '{') i = read_labels(s, i, line, p.labels);
    std::istringstream rest(s.substr(i));
    std::string value;
    if (!(rest >> value)) bad_line(line, p.name + ": no value");
    p.value = read_value(value, line);
    out.push_back(std::move(p));
  }
  return out;
}

VllmMetrics vllm_metrics(const std::vector<PromSample>& s) {
  VllmMetrics m;
  m.running = sum_of(s, {"vllm:num_requests_running"});
  m.waiting = sum_of(s, {"vllm:num_requests_waiting"});
  m.kv_usage = mean_of(s, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"});
  // Earlier V1 releases named the prefix cache's counters gpu_prefix_cache_*.
  m.prefix_queries = sum_of(
      s, {"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries"});
  m.prefix_hits =
      sum_of(s, {"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits"});
  m.preemptions = sum_of(s, {"vllm:num_preemptions_total", "vllm:num_preemptions"});
  m.num_gpu_blocks = label_number(s, "vllm:cache_config_info", "num_gpu_blocks");
  m.block_size = label_number(s, "vllm:cache_config_info", "block_size");
  m.ttft = histogram(s, {"vllm:time_to_first_token_seconds"});
  m.itl = histogram(s, {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"});
  return m;
}

LlamaMetrics llama_metrics(const std::vector<PromSample>& s) {
  LlamaMetrics m;
  m.processing = sum_of(s, {"llamacpp:requests_processing"});
  m.deferred = sum_of(s, {"llamacpp:requests_deferred"});
  m.prompt_tokens = sum_of(s, {"llamacpp:prompt_tokens_total"});
  m.predicted_tokens = sum_of(s, {"llamacpp:tokens_predicted_total"});
  m.kv_usage = mean_of(s, {"llamacpp:kv_cache_usage_ratio"});
  m.kv_tokens = sum_of(s, {"llamacpp:kv_cache_tokens"});
  return m;
}

namespace {

using nlohmann::json;

std::optional<long long> opt_int(const json& o, const char* key, const std::string& path) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw Error(path + "." + key + ": expected an integer, got " + it->type_name());
  return it->get<long long>();
}

LlamaSlot read_slot(const json& o, const std::string& path) {
  if (!o.is_object()) throw Error(path + ": expected an object (a slot), got " + std::string(o.type_name()));
  LlamaSlot s;
  const auto id = opt_int(o, "id", path);
  if (!id) throw Error(path + ".id: missing");
  s.id = static_cast<int>(*id);
  s.n_ctx = static_cast<int>(opt_int(o, "n_ctx", path).value_or(0));
  if (auto p = o.find("is_processing"); p != o.end()) {
    if (!p->is_boolean()) throw Error(path + ".is_processing: expected true or false, got " + p->type_name());
    s.processing = p->get<bool>();
  } else if (auto st = opt_int(o, "state", path)) {
    s.processing = *st != 0;
  }
  s.id_task = opt_int(o, "id_task", path);
  s.n_prompt_tokens = opt_int(o, "n_prompt_tokens", path);
  if (auto nt = o.find("next_token"); nt != o.end() && !nt->is_null()) {
    const json* t = &*nt;
    if (t->is_array()) t = t->empty() ? nullptr : &(*t)[0];
    if (t && !t->is_object()) throw Error(path + ".next_token: expected an object, got " + t->type_name());
    if (t) {
      s.n_decoded = opt_int(*t, "n_decoded", path + ".next_token");
      s.n_remain = opt_int(*t, "n_remain", path + ".next_token");
    }
  }
  if (!s.n_decoded) s.n_decoded = opt_int(o, "n_decoded", path);
  return s;
}

}  // namespace

std::vector<LlamaSlot> parse_llama_slots(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(std::string("slots: not JSON (") + e.what() + ")");
  }
  if (!j.is_array()) throw Error("slots: expected an array of slots, got " + std::string(j.type_name()));
  std::vector<LlamaSlot> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(read_slot(j[i], "slots[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace kvscope
