#include "model/serving/requests.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/decoding/generator.h"
#include "model/decoding/sampler_json.h"

namespace kvscope {
namespace {

using nlohmann::json;

const std::set<std::string> kFields = {
    "id", "prompt", "max_new", "arrive", "temperature", "top_k", "top_p", "seed", "repetition_penalty", "greedy"};

struct LineError {
  std::string where;
  [[noreturn]] void operator()(const std::string& what) const { throw UsageError(where + ": " + what); }
};

int64_t whole(const json& j, const char* name, int64_t lo, int64_t hi, const LineError& fail) {
  if (!j.is_number_integer())
    fail(std::string("field \"") + name + "\": expected a whole number in " + std::to_string(lo) + ".." +
         std::to_string(hi) + ", got " + json_quote(j));
  const int64_t x =
      j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : j.get<int64_t>();
  if (x < lo || x > hi)
    fail(std::string("field \"") + name + "\": " + json_quote(j) + " is outside " + std::to_string(lo) + ".." +
         std::to_string(hi));
  return x;
}

SamplerSettings sampler_of(const json& j, const LineError& fail) {
  // sampler_fields_from_json reads null as "not set" (the window's settings
  // file); in a request it is more likely a mistake than a wish for the default.
  for (const char* key : {"temperature", "top_k", "top_p", "repetition_penalty", "seed", "greedy"})
    if (j.contains(key) && j[key].is_null())
      fail(std::string("field \"") + key + "\": expected a value, got null (leave the field out for the default)");
  SamplerSettings s;
  const bool sampling_fields = j.contains("temperature") || j.contains("top_k") || j.contains("top_p");
  try {
    sampler_fields_from_json(j, "", s);
  } catch (const Error& e) {
    fail(e.what());
  }
  const bool greedy_given = j.contains("greedy");
  if (greedy_given && s.greedy && sampling_fields)
    fail("field \"greedy\": true cannot be combined with temperature, top_k or top_p");
  // generate's rule: greedy unless asked to sample (a sampling field, or "greedy": false).
  s.greedy = !sampling_fields && !(greedy_given && !s.greedy);
  if (s.greedy && j.contains("seed"))
    fail("field \"seed\": used only when sampling (expected temperature, top_k, top_p or \"greedy\": false with it)");
  return s;
}

std::string id_of(const json& j, const LineError& fail) {
  if (!j.contains("id")) fail("missing field \"id\" (expected a string or a whole number)");
  const json& id = j["id"];
  if (id.is_string() && !id.get<std::string>().empty()) return id.get<std::string>();
  if (id.is_number_integer()) return id.dump();
  fail("field \"id\": expected a non-empty string or a whole number, got " + json_quote(id));
}

ServeRequest request_of(const json& j, const Model& model, int pool_blocks, int block, const LineError& fail) {
  if (!j.is_object()) fail("expected a JSON object {\"id\", \"prompt\", \"max_new\", ...}, got " + json_quote(j));
  for (const auto& kv : j.items())
    if (!kFields.count(kv.key()))
      fail("unknown field \"" + kv.key() +
           "\" (expected id, prompt, max_new, arrive, temperature, top_k, top_p, repetition_penalty, seed, greedy)");
  ServeRequest r;
  r.id = id_of(j, fail);
  if (!j.contains("prompt") || !j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
    fail("field \"prompt\": expected a non-empty string" +
         (j.contains("prompt") ? ", got " + json_quote(j["prompt"]) : ""));
  if (!j.contains("max_new"))
    fail("missing field \"max_new\" (expected a whole number in 1.." + std::to_string(kMaxNewLimit) + ")");
  r.max_new = static_cast<int>(whole(j["max_new"], "max_new", 1, kMaxNewLimit, fail));
  if (j.contains("arrive")) r.arrive = static_cast<int>(whole(j["arrive"], "arrive", 0, 1 << 30, fail));
  r.sampler = sampler_of(j, fail);
  r.prompt = model.tokenizer.encode_prompt(j["prompt"].get<std::string>());
  const Config& c = model.config;
  const int n = static_cast<int>(r.prompt.size());
  if (n < 1) fail("field \"prompt\": encodes to no tokens");
  if (n > c.n_positions) {
    const int need = std::min(n + r.max_new - 1, c.max_position_embeddings);
    fail("field \"prompt\": " + std::to_string(n) + " tokens, longer than the context of " +
         std::to_string(c.n_positions) + " positions" +
         (n <= c.max_position_embeddings && c.n_positions < c.max_position_embeddings
              ? " kvscope reserves (--ctx; the model allows " + std::to_string(c.max_position_embeddings) +
                    "): pass --ctx " + std::to_string(need) + " or a shorter prompt"
              : " (the model's n_positions; expected a shorter prompt)"));
  }
  const int need = blocks_needed(n, r.max_new, c.n_positions, block);
  if (need > pool_blocks)
    fail("request \"" + r.id + "\" could never fit the pool: its prompt (" + std::to_string(n) +
         " tokens) and max_new " + std::to_string(r.max_new) + " need " + std::to_string(need) + " blocks of " +
         std::to_string(block) + " positions, the pool has " + std::to_string(pool_blocks) + " (--pool-blocks)");
  return r;
}

// One line's object. Refuses what nlohmann's parse takes silently or reports
// without the line: a key twice in one object (the last one would win) and a
// number beyond a double (named by the field it belongs to).
json parse_line(const std::string& line, const LineError& fail) {
  std::vector<std::set<std::string>> keys;  // the keys of each object still open
  std::string key;
  const json::parser_callback_t seen = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key) {
      key = parsed.get<std::string>();
      if (!keys.back().insert(key).second)
        fail("field \"" + key + "\" appears twice in the object (expected each field at most once)");
    }
    return true;
  };
  try {
    return parse_json_bounded(line, kJsonMaxDepth, fail.where, seen);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // nested too deep: a request's values are numbers and strings
    throw UsageError(e.what());
  } catch (const json::parse_error& e) {
    fail(std::string("not valid JSON (") + e.what() + ")");
  } catch (const json::out_of_range& e) {
    fail((key.empty() ? std::string() : "field \"" + key + "\": ") +
         "a number too large for a double (expected a value in the field's range; " + e.what() + ")");
  }
}

}  // namespace

RequestLines::RequestLines(std::string file, const Model& model, int pool_blocks, int block)
    : file_(std::move(file)), model_(model), pool_blocks_(pool_blocks), block_(block) {}

std::optional<ServeRequest> RequestLines::next(const std::string& line) {
  ++line_no_;
  if (line.find_first_not_of(" \t\r") == std::string::npos) return std::nullopt;
  const LineError fail{file_ + ":" + std::to_string(line_no_)};
  if (const size_t nul = line.find('\0'); nul != std::string::npos)
    fail("a NUL byte at column " + std::to_string(nul + 1) +
         " (expected one JSON object of text; a string writes it as \\u0000)");
  ServeRequest r = request_of(parse_line(line, fail), model_, pool_blocks_, block_, fail);
  if (!ids_.insert(r.id).second) fail("duplicate id \"" + r.id + "\"");
  return r;
}

void RequestLines::finish() const {
  if (ids_.empty()) throw UsageError(file_ + ": no requests (expected one JSON object a line)");
}

std::vector<ServeRequest> parse_requests(const std::string& text, const std::string& file, const Model& model,
                                         int pool_blocks, int block) {
  std::vector<ServeRequest> out;
  RequestLines lines(file, model, pool_blocks, block);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (auto r = lines.next(line)) out.push_back(std::move(*r));
  lines.finish();
  return out;
}

std::vector<ServeRequest> read_requests(const std::string& path, const Model& model, int pool_blocks, int block) {
  return parse_requests(read_regular_file(path, "a requests file, one JSON object a line"), path, model, pool_blocks,
                        block);
}

}  // namespace kvscope
