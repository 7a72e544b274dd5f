#include "app/lessons/kv_memory.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "app/platform/assets.h"
#include "model/core/error.h"
#include "model/core/json_quote.h"

namespace kvscope {
namespace {

using nlohmann::json;

int get_int_field(const json& e, const std::string& where, const char* key, int lo, int hi, bool required) {
  if (!e.contains(key) || e[key].is_null()) {
    if (required) throw Error(where + ": missing field \"" + key + "\" (expected an integer)");
    return 0;
  }
  const json& v = e[key];
  if (!v.is_number_integer()) throw Error(where + ": field \"" + key + "\" must be an integer, got " + json_quote(v));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw Error(where + ": field \"" + key + "\" = " + std::to_string(x) + " is out of range (expected " +
                std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return static_cast<int>(x);
}

std::string get_string_field(const json& e, const std::string& where, const char* key, bool required) {
  if (!e.contains(key) || e[key].is_null()) {
    if (required) throw Error(where + ": missing field \"" + key + "\" (expected a string)");
    return "";
  }
  if (!e[key].is_string()) throw Error(where + ": field \"" + key + "\" must be a string, got " + json_quote(e[key]));
  return e[key].get<std::string>();
}

}  // namespace

double bytes_per_value(KVDtype d) {
  return static_cast<double>(kv_row_bytes(d, 32)) / 32.0;
}

KvModelSpec spec_from_config(const Config& c, const std::string& name, uint64_t params) {
  KvModelSpec m;
  m.name = name;
  m.layers = c.n_layer;
  m.query_heads = c.n_head;
  m.kv_heads = c.kv_heads();  // GPT-2: one K/V per head; Llama-family: grouped-query, fewer
  m.head_dim = c.head_dim();
  m.hidden = c.n_embd;
  m.context = c.n_positions;
  m.sliding_window = c.sliding_window;
  m.params = params;
  m.note = "the model loaded in kvscope (its cache is fp32)";
  return m;
}

uint64_t cached_positions(const KvModelSpec& m, uint64_t tokens) {
  if (m.sliding_window > 0 && tokens > static_cast<uint64_t>(m.sliding_window))
    return static_cast<uint64_t>(m.sliding_window);
  return tokens;
}

uint64_t kv_bytes_per_token(const KvModelSpec& m, KVDtype d) {
  // K and V rows of every layer, each kv_heads * head_dim values as the cache stores them.
  const uint64_t row = static_cast<uint64_t>(m.kv_heads) * static_cast<uint64_t>(m.head_dim);
  return 2ull * static_cast<uint64_t>(m.layers) * kv_row_bytes(d, row);
}

uint64_t kv_cache_bytes(const KvModelSpec& m, uint64_t tokens, KVDtype d) {
  return kv_bytes_per_token(m, d) * cached_positions(m, tokens);
}

uint64_t weights_bytes(const KvModelSpec& m, KVDtype d) {
  return kv_row_bytes(d, m.params);
}

FitCheck check_fit(const KvModelSpec& m, uint64_t tokens, KVDtype cache_dtype, KVDtype weights_dtype) {
  FitCheck f;
  f.cached_positions = cached_positions(m, tokens);
  f.bytes_per_token = kv_bytes_per_token(m, cache_dtype);
  f.cache_bytes = kv_cache_bytes(m, tokens, cache_dtype);
  f.weights_bytes = weights_bytes(m, weights_dtype);
  f.total_bytes = f.cache_bytes + f.weights_bytes;
  f.beyond_context = m.context > 0 && tokens > static_cast<uint64_t>(m.context);
  f.cache_fits_24 = f.cache_bytes <= kGpu24GB;
  f.cache_fits_80 = f.cache_bytes <= kGpu80GB;
  f.total_fits_24 = f.total_bytes <= kGpu24GB;
  f.total_fits_80 = f.total_bytes <= kGpu80GB;
  return f;
}

std::vector<KvModelSpec> parse_kv_configs(const std::string& json_text, const std::string& origin) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("configs") || !j["configs"].is_array()) {
    throw Error(origin + ": expected an object with a \"configs\" array of model configurations");
  }
  const json& arr = j["configs"];
  if (arr.empty()) throw Error(origin + ": \"configs\" is empty (expected at least one configuration)");
  std::vector<KvModelSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    std::string where = origin + ": configs[" + std::to_string(i) + "]";
    if (!e.is_object()) throw Error(where + ": expected an object, got " + json_quote(e));
    KvModelSpec m;
    m.name = get_string_field(e, where, "name", true);
    if (m.name.empty()) throw Error(where + ": field \"name\" is empty");
    where += " (\"" + m.name + "\")";
    if (!names.insert(m.name).second) throw Error(where + ": field \"name\" repeats an earlier entry");
    m.layers = get_int_field(e, where, "layers", 1, 4096, true);
    m.query_heads = get_int_field(e, where, "query_heads", 1, 4096, true);
    m.kv_heads = get_int_field(e, where, "kv_heads", 1, 4096, true);
    m.head_dim = get_int_field(e, where, "head_dim", 1, 65536, true);
    m.hidden = get_int_field(e, where, "hidden", 1, 1 << 20, true);
    m.context = get_int_field(e, where, "context", 1, 1 << 30, true);
    m.sliding_window = get_int_field(e, where, "sliding_window", 0, 1 << 30, false);
    if (m.query_heads % m.kv_heads != 0) {
      throw Error(where + ": field \"kv_heads\" = " + std::to_string(m.kv_heads) + " must divide \"query_heads\" = " +
                  std::to_string(m.query_heads) + " (each KV head serves a whole group of query heads)");
    }
    if (!e.contains("params") || !e["params"].is_number_unsigned() || e["params"].get<uint64_t>() == 0) {
      throw Error(where + ": field \"params\" must be a positive integer (the parameter count), got " +
                  (e.contains("params") ? json_quote(e["params"]) : std::string("nothing")));
    }
    m.params = e["params"].get<uint64_t>();
    m.source = get_string_field(e, where, "source", true);
    if (m.source.rfind("https://", 0) != 0) {
      throw Error(where + ": field \"source\" must be an https:// URL where the numbers are published, got \"" +
                  m.source + "\"");
    }
    m.note = get_string_field(e, where, "note", false);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<KvModelSpec> load_kv_configs(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open (expected the KV calculator's model table, assets/kv_configs.json)");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_kv_configs(ss.str(), path);
}

std::string default_kv_configs_path() {
  if (const char* env = std::getenv("KVSCOPE_KV_CONFIGS"); env && *env) return env;
  return asset_path("kv_configs.json");
}

}  // namespace kvscope
