#include "model/arch/config.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/arch/config_json.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/models/gpt2.h"
#include "model/models/llama.h"

namespace kvscope {

using nlohmann::json;

namespace config_json {

int get_int(const json& j, const std::string& origin, const char* key, int lo, int hi, bool required, int fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw Error(origin + ": missing field \"" + key + "\" (expected an integer)");
    return fallback;
  }
  const json& v = j[key];
  if (!v.is_number_integer()) {
    throw Error(origin + ": field \"" + key + "\" must be an integer, got " + json_quote(v));
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw Error(origin + ": field \"" + key + "\" = " + std::to_string(x) + " is out of range (expected " +
                std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return static_cast<int>(x);
}

double get_positive(const json& j, const std::string& origin, const char* key, double fallback, bool required) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw Error(origin + ": missing field \"" + key + "\" (expected a positive number)");
    return fallback;
  }
  const double x = j[key].is_number() ? j[key].get<double>() : 0.0;
  if (!(x > 0) || x > std::numeric_limits<float>::max() || !(static_cast<float>(x) > 0)) {
    throw Error(origin + ": field \"" + key + "\" must be a positive number representable as a float, got " +
                json_quote(j[key]));
  }
  return x;
}

std::string get_string(const json& j, const std::string& origin, const char* key, const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw Error(origin + ": field \"" + key + "\" must be a string, got " + json_quote(j[key]));
  return j[key].get<std::string>();
}

bool get_bool(const json& j, const std::string& origin, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw Error(origin + ": field \"" + key + "\" must be true or false, got " + json_quote(j[key]));
  return j[key].get<bool>();
}

void parse_eos(const json& j, const std::string& origin, Config& c) {
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return;
  const json& e = j["eos_token_id"];
  const json list = e.is_array() ? e : json::array({e});
  for (const json& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.vocab_size) {
      throw Error(origin + ": eos_token_id " + json_quote(e) + " must be an id (or a list of ids) below vocab_size (" +
                  std::to_string(c.vocab_size) + ")");
    }
    c.eos_token_ids.push_back(v.get<int>());
  }
  if (!c.eos_token_ids.empty()) c.eos_token_id = c.eos_token_ids[0];
}

}  // namespace config_json

namespace {

const char* kSupported = "supported: gpt2, llama, mistral, qwen2";

// model_type, else the first of architectures; "" when neither is given (GPT-2 by its fields).
std::string model_type_of(const json& j, const std::string& origin) {
  if (j.contains("model_type") && !j["model_type"].is_null()) {
    if (!j["model_type"].is_string()) throw Error(origin + ": field \"model_type\" must be a string");
    const std::string t = j["model_type"].get<std::string>();
    if (t != "gpt2" && t != "llama" && t != "mistral" && t != "qwen2") {
      throw Error(origin + ": model_type \"" + t + "\" is not supported (" + kSupported + ")");
    }
    return t;
  }
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    const json& arch = j["architectures"];
    // (a list of class names, as transformers writes it: the first one names the model)
    if (!arch.is_array() || (!arch.empty() && !arch[0].is_string())) {
      std::string got = arch.dump(-1, ' ', false, json::error_handler_t::replace);
      if (got.size() > 60) got = got.substr(0, 57) + "...";
      throw Error(origin +
                  ": field \"architectures\" must be a list of model class names (e.g. [\"GPT2LMHeadModel\"]), got " +
                  got);
    }
  }
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    const std::string a = j["architectures"][0].get<std::string>();
    if (a == "GPT2LMHeadModel") return "gpt2";
    if (a == "LlamaForCausalLM") return "llama";
    if (a == "MistralForCausalLM") return "mistral";
    if (a == "Qwen2ForCausalLM") return "qwen2";
    throw Error(origin + ": architecture \"" + a + "\" is not supported (" + kSupported + ")");
  }
  return "";
}

}  // namespace

// (A field of an unexpected JSON type is reported naming the file, like every
// other error, not as a JSON library message.)
Config parse_config(const std::string& json_text, const std::string& origin) try {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(origin + ": expected a JSON object at the top level");
  const std::string type = model_type_of(j, origin);
  // One line per family: its model_type names, its parser (model/models/).
  if (!type.empty() && type != "gpt2") return parse_llama_config(j, origin, type);
  return parse_gpt2_config(j, origin);
} catch (const nlohmann::json::exception& e) {
  throw Error(origin + ": a field has an unexpected type or value (" + e.what() + ")");
}

Config load_config(const std::string& path) {
  return parse_config(read_regular_file(path, "a Hugging Face config.json"), path);
}

}  // namespace kvscope
