#include "model/arch/config.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"

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
    throw Error(origin + ": field \"" + key + "\" must be an integer, got " + json_quote(v));
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw Error(origin + ": field \"" + key + "\" = " + std::to_string(x) + " is out of range (expected " +
                std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  return static_cast<int>(x);
}

// A positive number that survives the conversion to float (1e-50 would become 0).
double get_positive(const json& j, const std::string& origin, const char* key, double fallback, bool required = false) {
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

// A string field (absent or null: `fallback`).
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

void parse_rope_scaling(const json& j, const std::string& origin, Config& c) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return;
  const json& r = j["rope_scaling"];
  const std::string where = origin + ": rope_scaling";
  if (!r.is_object()) throw Error(where + " must be an object or null, got " + json_quote(r));
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (type.empty()) type = get_string(r, where, key, "");
  }
  if (type.empty()) throw Error(where + ": missing \"rope_type\" (expected default, linear or llama3)");
  if (type == "default") return;
  if (type != "llama3" && type != "linear") {
    throw Error(where + ": rope_type \"" + type + "\" is not supported (supported: default, linear, llama3)");
  }
  c.rope_scaling.type = type;
  c.rope_scaling.factor = get_positive(r, where, "factor", 1.0, true);
  if (type == "llama3") {
    c.rope_scaling.low_freq_factor = get_positive(r, where, "low_freq_factor", 1.0, true);
    c.rope_scaling.high_freq_factor = get_positive(r, where, "high_freq_factor", 4.0, true);
    c.rope_scaling.original_max_position_embeddings =
        get_int(r, where, "original_max_position_embeddings", 1, 1 << 24, true, 0);
    if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor)) {
      throw Error(where + ": high_freq_factor (" + std::to_string(c.rope_scaling.high_freq_factor) +
                  ") must be greater than low_freq_factor (" + std::to_string(c.rope_scaling.low_freq_factor) + ")");
    }
  }
}

// eos_token_id: an integer or a list of them.
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

Config parse_llama(const json& j, const std::string& origin, const std::string& type) {
  Config c;
  c.arch = Arch::kLlama;
  c.model_type = type;
  c.activation_function = "silu";
  c.n_layer = get_int(j, origin, "num_hidden_layers", 1, 1024, true, 0);
  c.n_embd = get_int(j, origin, "hidden_size", 1, 65536, true, 0);
  c.n_head = get_int(j, origin, "num_attention_heads", 1, 1024, true, 0);
  c.n_kv_head = get_int(j, origin, "num_key_value_heads", 1, 1024, false, c.n_head);
  c.head_size = get_int(j, origin, "head_dim", 1, 4096, false, 0);
  c.n_inner = get_int(j, origin, "intermediate_size", 1, 1 << 20, true, 0);
  c.vocab_size = get_int(j, origin, "vocab_size", 1, 1 << 24, true, 0);
  c.max_position_embeddings = get_int(j, origin, "max_position_embeddings", 1, 1 << 24, true, 0);
  c.n_positions = std::min(c.max_position_embeddings, kLlamaContextCap);
  c.bos_token_id = get_int(j, origin, "bos_token_id", -1, c.vocab_size - 1, false, -1);
  parse_eos(j, origin, c);
  c.layer_norm_epsilon = static_cast<float>(get_positive(j, origin, "rms_norm_eps", 1e-6));
  c.rope_theta = get_positive(j, origin, "rope_theta", 10000.0);
  c.tie_word_embeddings = get_bool(j, origin, "tie_word_embeddings", false);
  if (c.head_size == 0 && c.n_embd % c.n_head != 0) {
    throw Error(origin + ": hidden_size (" + std::to_string(c.n_embd) + ") must be divisible by num_attention_heads (" +
                std::to_string(c.n_head) + ") when head_dim is not given");
  }
  if (c.n_head % c.n_kv_head != 0) {
    throw Error(origin + ": num_attention_heads (" + std::to_string(c.n_head) +
                ") must be a multiple of num_key_value_heads (" + std::to_string(c.n_kv_head) +
                "): each K/V head serves the same number of query heads");
  }
  if (c.head_dim() % 2 != 0) {
    throw Error(origin + ": the head width " + std::to_string(c.head_dim()) + " must be even (RoPE rotates pairs)");
  }
  const std::string act = get_string(j, origin, "hidden_act", "silu");
  if (act != "silu") throw Error(origin + ": hidden_act \"" + act + "\" is not supported (expected \"silu\")");
  if (get_bool(j, origin, "mlp_bias", false)) throw Error(origin + ": mlp_bias: true is not supported");
  c.qkv_bias = type == "qwen2" || get_bool(j, origin, "attention_bias", false);
  if (type == "llama" && get_bool(j, origin, "attention_bias", false)) {
    throw Error(origin + ": attention_bias: true is not supported for llama (o_proj bias); qwen2's q/k/v biases are");
  }
  parse_rope_scaling(j, origin, c);
  if (type == "mistral") {
    c.sliding_window = get_int(j, origin, "sliding_window", 1, 1 << 24, false, 0);
  } else if (type == "qwen2" && get_bool(j, origin, "use_sliding_window", false)) {
    // Qwen2 windows only layers from max_window_layers on: one window for all is what kvscope runs.
    const int from = get_int(j, origin, "max_window_layers", 0, 1 << 20, false, 0);
    if (from != 0) {
      throw Error(origin + ": use_sliding_window with max_window_layers = " + std::to_string(from) +
                  " (a window on some layers only) is not supported");
    }
    c.sliding_window = get_int(j, origin, "sliding_window", 1, 1 << 24, true, 0);
  }
  if (c.sliding_window >= c.n_positions) c.sliding_window = 0;  // never binds
  return c;
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
  if (!type.empty() && type != "gpt2") return parse_llama(j, origin, type);

  Config c;
  // HF GPT-2 names; n_ctx is an older alias of n_positions.
  c.n_layer = get_int(j, origin, "n_layer", 1, 1024, true, 0);
  c.n_head = get_int(j, origin, "n_head", 1, 1024, true, 0);
  c.n_embd = get_int(j, origin, "n_embd", 1, 65536, true, 0);
  const int n_ctx = get_int(j, origin, "n_ctx", 1, 1 << 20, false, 0);
  c.n_positions = get_int(j, origin, "n_positions", 1, 1 << 20, n_ctx == 0, n_ctx);
  c.vocab_size = get_int(j, origin, "vocab_size", 1, 1 << 24, true, 0);
  c.bos_token_id = get_int(j, origin, "bos_token_id", -1, 1 << 24, false, -1);
  // A list of ids is accepted as for Llama configs (PretrainedConfig allows it).
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array())
    parse_eos(j, origin, c);
  else
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
                  json_quote(j["layer_norm_epsilon"]));
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
  c.n_kv_head = c.n_head;
  c.n_inner = 4 * c.n_embd;
  c.max_position_embeddings = c.n_positions;
  if (c.eos_token_ids.empty() && c.eos_token_id >= 0) c.eos_token_ids = {c.eos_token_id};
  return c;
} catch (const nlohmann::json::exception& e) {
  throw Error(origin + ": a field has an unexpected type or value (" + e.what() + ")");
}

Config load_config(const std::string& path) {
  return parse_config(read_regular_file(path, "a Hugging Face config.json"), path);
}

}  // namespace kvscope
