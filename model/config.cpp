#include "config.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "error.h"
#include "file_io.h"

namespace kvscope {
namespace {

using nlohmann::json;

int get_int(const json& j, const std::string& origin, const char* key, int lo, int hi, bool required, int fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw Error(origin + ": missing field \"" + key + "\" (expected an integer)");
    return fallback;
  }
  const json& v = j[key];
  if (!v.is_number_integer()) {
    throw Error(origin + ": field \"" + key + "\" must be an integer, got " + v.dump());
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw Error(origin + ": field \"" + key + "\" = " + std::to_string(x) + " is out of range (expected " +
                std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return static_cast<int>(x);
}

}  // namespace

Config parse_config(const std::string& json_text, const std::string& origin) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(origin + ": expected a JSON object at the top level");

  Config c;
  // HF GPT-2 names; n_ctx is an older alias of n_positions.
  c.n_layer = get_int(j, origin, "n_layer", 1, 1024, true, 0);
  c.n_head = get_int(j, origin, "n_head", 1, 1024, true, 0);
  c.n_embd = get_int(j, origin, "n_embd", 1, 65536, true, 0);
  const int n_ctx = get_int(j, origin, "n_ctx", 1, 1 << 20, false, 0);
  c.n_positions = get_int(j, origin, "n_positions", 1, 1 << 20, n_ctx == 0, n_ctx);
  c.vocab_size = get_int(j, origin, "vocab_size", 1, 1 << 24, true, 0);
  c.bos_token_id = get_int(j, origin, "bos_token_id", -1, 1 << 24, false, -1);
  c.eos_token_id = get_int(j, origin, "eos_token_id", -1, 1 << 24, false, -1);
  if (c.n_embd % c.n_head != 0) {
    throw Error(origin + ": n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                std::to_string(c.n_head) + ")");
  }
  if (j.contains("layer_norm_epsilon")) {
    // It must survive the conversion to float: 1e-50 would become 0, 1e300 overflow.
    const double eps = j["layer_norm_epsilon"].is_number() ? j["layer_norm_epsilon"].get<double>() : 0.0;
    if (!(eps > 0) || eps > std::numeric_limits<float>::max() || !(static_cast<float>(eps) > 0)) {
      throw Error(origin + ": field \"layer_norm_epsilon\" must be a positive number representable as a float, got " +
                  j["layer_norm_epsilon"].dump());
    }
    c.layer_norm_epsilon = static_cast<float>(eps);
  }
  if (j.contains("activation_function")) {
    if (!j["activation_function"].is_string()) {
      throw Error(origin + ": field \"activation_function\" must be a string");
    }
    c.activation_function = j["activation_function"].get<std::string>();
    // gelu_new, gelu_pytorch_tanh and the tanh form are the same function; exact erf gelu differs.
    if (c.activation_function != "gelu_new" && c.activation_function != "gelu_pytorch_tanh" &&
        c.activation_function != "gelu_fast") {
      throw Error(origin + ": activation_function \"" + c.activation_function +
                  "\" is not supported (expected \"gelu_new\")");
    }
  }
  if (c.eos_token_id >= c.vocab_size || c.bos_token_id >= c.vocab_size) {
    throw Error(origin + ": bos_token_id/eos_token_id must be below vocab_size (" + std::to_string(c.vocab_size) + ")");
  }
  return c;
}

Config load_config(const std::string& path) {
  return parse_config(read_regular_file(path, "a GPT-2 config.json"), path);
}

}  // namespace kvscope
