#include "model/arch/gguf_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/core/error.h"
#include "model/models/gpt2.h"
#include "model/models/llama.h"

namespace kvscope {
namespace {

using nlohmann::json;

// One hyperparameter: its GGUF key (after "<arch>."), the config.json field
// it fills, whether the file must have it, and whether it is a float.
struct KeyField {
  const char* key;
  const char* field;
  bool required;
  bool is_float;
};

const std::vector<KeyField> kGpt2 = {
    {"block_count", "n_layer", true, false},
    {"embedding_length", "n_embd", true, false},
    {"attention.head_count", "n_head", true, false},
    {"context_length", "n_positions", true, false},
    {"attention.layer_norm_epsilon", "layer_norm_epsilon", false, true},
};

const std::vector<KeyField> kLlama = {
    {"block_count", "num_hidden_layers", true, false},
    {"embedding_length", "hidden_size", true, false},
    {"attention.head_count", "num_attention_heads", true, false},
    {"attention.head_count_kv", "num_key_value_heads", false, false},
    {"attention.key_length", "head_dim", false, false},
    {"feed_forward_length", "intermediate_size", true, false},
    {"context_length", "max_position_embeddings", true, false},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", false, true},
    {"rope.freq_base", "rope_theta", false, true},
};

// An integer as JSON, clamped so that the parsers' range checks see it (a
// u64 above INT64_MAX is out of every range).
json int_json(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, uint64_t{std::numeric_limits<int64_t>::max()}));
}

// The vocabulary size: <arch>.vocab_size, else the tokenizer's token count,
// else the embedding's rows.
uint64_t vocab_size(const GgufFile& f, const std::string& arch) {
  if (f.find(arch + ".vocab_size")) return f.meta_uint(arch + ".vocab_size");
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->is_array) return tokens->count;
  if (const GgufTensor* emb = f.tensor("token_embd.weight"); emb && emb->dims.size() == 2)
    return static_cast<uint64_t>(emb->dims[1]);
  throw Error(f.origin() + ": metadata " + gguf_quote(arch + ".vocab_size") +
              " is missing, and so are tokenizer.ggml.tokens and the tensor token_embd.weight (expected one of them "
              "to give the vocabulary size)");
}

void add_rope_scaling(const GgufFile& f, const std::string& arch, json& j) {
  if (f.tensor("rope_freqs.weight")) {
    throw Error(f.origin() +
                ": tensor \"rope_freqs.weight\" (Llama-3.1/3.2's RoPE scaling, stored as a tensor) is "
                "not supported yet");
  }
  const std::string key = arch + ".rope.scaling.type";
  if (!f.find(key)) return;
  const std::string type = f.meta_string(key);
  if (type == "none") return;
  if (type != "linear") {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": found \"" + type +
                "\", expected \"none\" or \"linear\" (other RoPE scalings are not supported)");
  }
  j["rope_scaling"] = {{"type", "linear"}, {"factor", f.meta_number(arch + ".rope.scaling.factor")}};
}

// The config.json fields of `table` from the metadata; a message of the
// parsers that names a field gets the GGUF key it came from.
json fields_of(const GgufFile& f, const std::string& arch, const std::vector<KeyField>& table) {
  json j = json::object();
  for (const KeyField& k : table) {
    const std::string key = arch + "." + k.key;
    if (!k.required && !f.find(key)) continue;
    j[k.field] = k.is_float ? json(f.meta_number(key)) : int_json(f.meta_uint(key));
  }
  j["vocab_size"] = int_json(vocab_size(f, arch));
  for (const char* id : {"bos_token_id", "eos_token_id"}) {
    const std::string key = std::string("tokenizer.ggml.") + id;
    if (f.find(key)) j[id] = int_json(f.meta_uint(key));
  }
  return j;
}

Config parse_with_keys(const GgufFile& f, const std::string& arch, const json& j, const std::vector<KeyField>& table) {
  try {
    return arch == "gpt2" ? parse_gpt2_config(j, f.origin()) : parse_llama_config(j, f.origin(), arch);
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const KeyField& k : table)
      if (msg.find(k.field) != std::string::npos) msg += " (GGUF metadata " + arch + "." + k.key + ")";
    throw Error(msg);
  }
}

}  // namespace

Config config_from_gguf(const GgufFile& f) {
  const std::string arch = f.meta_string("general.architecture");
  if (arch != "gpt2" && arch != "llama" && arch != "qwen2") {
    throw Error(f.origin() + ": metadata \"general.architecture\": found " + gguf_quote(arch) +
                ", expected gpt2, llama or qwen2");
  }
  const std::vector<KeyField>& table = arch == "gpt2" ? kGpt2 : kLlama;
  json j = fields_of(f, arch, table);
  if (arch == "gpt2") {
    const std::string ff = "gpt2.feed_forward_length";
    if (f.find(ff) && f.meta_uint(ff) != 4 * f.meta_uint("gpt2.embedding_length")) {
      throw Error(f.origin() + ": metadata \"" + ff + "\": found " + std::to_string(f.meta_uint(ff)) +
                  ", expected 4 x gpt2.embedding_length (GPT-2's MLP width)");
    }
  } else {
    // llama.cpp's converter stores no output.weight for a tied model.
    j["tie_word_embeddings"] = f.tensor("output.weight") == nullptr;
    add_rope_scaling(f, arch, j);
  }
  return parse_with_keys(f, arch, j, table);
}

}  // namespace kvscope
