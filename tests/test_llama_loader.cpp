// Llama-family config.json and weight loading: the random checkpoints of
// tools/numpy_ref_llama.py (Llama, Mistral, Qwen2; single file and shards;
// F32, F16, BF16), and corrupt or mismatched folders that must fail with the
// file, tensor or field, what was expected and what was found.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/models/llama.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testutil::llama_suite_dir;
using testutil::read_json;
using testutil::TempDir;

json suite_entry(const std::string& name) {
  const json suite = read_json(llama_suite_dir() + "/suite.json");
  for (const json& c : suite["checkpoints"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no checkpoint " + name);
}

// The checkpoints of numpy_ref_llama.py's SUITE (listing tests must not generate them).
const std::vector<std::string> kSuiteNames = {"llama_gqa1_f32_tied_single", "llama_gqa3_bf16_untied_sharded_llama3",
                                              "qwen2_gqa4_f32_bias_sharded", "mistral_gqa4_bf16_untied_window",
                                              "llama_gqa2_f16_headdim_linear"};

// Runs f, which must throw kvscope::Error whose message holds every needle.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needles[0];
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "\"" << n << "\" not in: " << msg;
  }
}

// ---- config.json ---------------------------------------------------------------

json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 32.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}},
          {"tie_word_embeddings", true},
          {"vocab_size", 1000},
          {"bos_token_id", 1},
          {"eos_token_id", {2, 3, 4}}};
}

Config parse(const json& j) {
  return parse_config(j.dump(), "dir/config.json");
}

TEST(LlamaConfig, ReadsEveryField) {
  const Config c = parse(llama_config());
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.n_inner, 128);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.n_positions, kLlamaContextCap);  // the KV cache is reserved for this many
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2, 3, 4}));

  json q = llama_config();
  q["model_type"] = "qwen2";
  q["use_sliding_window"] = false;
  q["sliding_window"] = 4096;
  q["head_dim"] = 16;
  q.erase("rope_scaling");
  const Config qc = parse(q);
  EXPECT_TRUE(qc.qkv_bias);
  EXPECT_EQ(qc.sliding_window, 0);
  EXPECT_EQ(qc.head_dim(), 16);
  EXPECT_EQ(qc.rope_scaling.type, "");

  json m = llama_config();
  m["model_type"] = "mistral";
  m["sliding_window"] = 4096;
  EXPECT_EQ(parse(m).sliding_window, 4096);
  m["sliding_window"] = nullptr;
  EXPECT_EQ(parse(m).sliding_window, 0);

  json a = llama_config();
  a.erase("model_type");
  a["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(parse(a).model_type, "mistral");
}

TEST(LlamaConfig, GptTwoKeepsItsShape) {
  const Config c = parse_config(R"({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32,
                                    "n_positions": 64, "vocab_size": 300})",
                                "gpt2/config.json");
  EXPECT_EQ(c.arch, Arch::kGpt2);
  EXPECT_EQ(c.kv_heads(), 4);
  EXPECT_EQ(c.n_inner, 128);
  EXPECT_EQ(c.head_dim(), 8);
}

TEST(LlamaConfig, RefusesWhatItCannotRun) {
  json j = llama_config();
  j["model_type"] = "phi3";
  expect_error([&] { parse(j); }, {"dir/config.json", "model_type \"phi3\"", "gpt2, llama, mistral, qwen2"});
  j = llama_config();
  j.erase("model_type");
  j["architectures"] = {"GemmaForCausalLM"};
  expect_error([&] { parse(j); }, {"GemmaForCausalLM", "supported"});
  // A malformed architectures list is named, not mistaken for a GPT-2 config missing its fields.
  for (const json& bad : {json::array({5}), json("LlamaForCausalLM"), json::array({json::array({"x"})})}) {
    j = llama_config();
    j.erase("model_type");
    j["architectures"] = bad;
    expect_error([&] { parse(j); }, {"dir/config.json", "\"architectures\" must be a list of model class names"});
  }
  j = llama_config();
  j["num_key_value_heads"] = 3;
  expect_error([&] { parse(j); }, {"num_attention_heads (8)", "num_key_value_heads (3)"});
  j = llama_config();
  j["hidden_size"] = 60;
  expect_error([&] { parse(j); }, {"hidden_size (60)", "num_attention_heads (8)"});
  j = llama_config();
  j["head_dim"] = 7;
  expect_error([&] { parse(j); }, {"head width 7", "even"});
  j = llama_config();
  j["rope_scaling"]["rope_type"] = "yarn";
  expect_error([&] { parse(j); }, {"rope_scaling", "yarn", "llama3"});
  j = llama_config();
  j["rope_scaling"].erase("factor");
  expect_error([&] { parse(j); }, {"rope_scaling", "factor"});
  j = llama_config();
  j["rope_scaling"]["high_freq_factor"] = 0.5;
  expect_error([&] { parse(j); }, {"high_freq_factor", "low_freq_factor"});
  j = llama_config();
  j["rope_scaling"]["original_max_position_embeddings"] = "8k";
  expect_error([&] { parse(j); }, {"original_max_position_embeddings"});
  j = llama_config();
  j["rope_scaling"] = 8;
  expect_error([&] { parse(j); }, {"rope_scaling"});
  // Fields of the wrong type name the file and the field (not a JSON library message).
  j = llama_config();
  j["rope_scaling"]["rope_type"] = 5;
  expect_error([&] { parse(j); }, {"dir/config.json: rope_scaling", "\"rope_type\" must be a string, got 5"});
  j = llama_config();
  j["rope_scaling"] = {{"factor", 2.0}};
  expect_error([&] { parse(j); }, {"dir/config.json: rope_scaling", "missing \"rope_type\""});
  j = llama_config();
  j["hidden_act"] = 5;
  expect_error([&] { parse(j); }, {"dir/config.json", "\"hidden_act\" must be a string, got 5"});
  j = llama_config();
  j["eos_token_id"] = {2, 5000};
  expect_error([&] { parse(j); }, {"eos_token_id", "vocab_size"});
  j = llama_config();
  j["hidden_act"] = "gelu";
  expect_error([&] { parse(j); }, {"hidden_act", "gelu"});
  j = llama_config();
  j["mlp_bias"] = true;
  expect_error([&] { parse(j); }, {"mlp_bias"});
  j = llama_config();
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  expect_error([&] { parse(j); }, {"max_window_layers"});
  j = llama_config();
  j.erase("intermediate_size");
  expect_error([&] { parse(j); }, {"intermediate_size"});
}

// ---- weights -------------------------------------------------------------------

class LlamaSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaSuite, LoadsEveryTensorAsStored) {
  const std::string dir = llama_suite_dir() + "/" + GetParam();
  const json entry = suite_entry(GetParam());
  const Config c = load_config(dir + "/config.json");
  const LlamaLoadResult r = load_llama_weights(dir, c, {});
  EXPECT_EQ(r.n_params, entry["n_params"].get<uint64_t>());
  EXPECT_EQ(r.stored_dtype, entry["dtype"].get<std::string>());
  const LlamaWeights& w = r.weights;
  ASSERT_EQ(static_cast<int>(w.layers.size()), c.n_layer);
  const StoredType want = entry["dtype"] == "F32"   ? StoredType::kF32
                          : entry["dtype"] == "F16" ? StoredType::kF16
                                                    : StoredType::kBF16;
  // Half-precision checkpoints are kept as stored: no f32 copy at all.
  for (const WeightMatrix* m : {&w.embed, &w.layers[0].wq, &w.layers[0].wk, &w.layers[0].w_down}) {
    EXPECT_EQ(m->type, want);
    EXPECT_EQ(want == StoredType::kF32 ? m->f32.size() : m->half.size(), static_cast<size_t>(m->rows * m->cols));
    EXPECT_TRUE(want == StoredType::kF32 ? m->half.empty() : m->f32.empty());
  }
  EXPECT_EQ(w.layers[0].wk.rows, static_cast<int64_t>(c.kv_heads()) * c.head_dim());
  EXPECT_EQ(w.layers[0].wq.rows, static_cast<int64_t>(c.n_head) * c.head_dim());
  EXPECT_EQ(w.layers[0].w_gate.rows, c.n_inner);
  EXPECT_EQ(w.lm_head.empty(), c.tie_word_embeddings);
  // Panels (where built) for what the products read; an untied embedding is
  // only looked up a row at a time and stays row-major.
  EXPECT_EQ(w.embed.panels, kPanelWeights && c.tie_word_embeddings);
  EXPECT_EQ(w.layers[0].wq.panels, kPanelWeights);
  if (!w.lm_head.empty()) {
    EXPECT_EQ(w.lm_head.panels, kPanelWeights);
  }
  EXPECT_EQ(w.layers[0].bq.empty(), !c.qkv_bias);
  EXPECT_EQ(w.resident_bytes(), r.need_bytes - 2ull * c.n_layer * c.kv_heads() * c.head_dim() * 4 * c.n_positions);
  // Values: the stored bits, decoded, against the file read independently as f32.
  const std::string file =
      fs::exists(dir + "/model.safetensors")
          ? dir + "/model.safetensors"
          : dir + "/" +
                read_json(dir + "/model.safetensors.index.json")["weight_map"]["model.layers.1.mlp.up_proj.weight"]
                    .get<std::string>();
  const SafeTensors st = SafeTensors::open(file);
  const std::vector<float> up = st.to_f32("model.layers.1.mlp.up_proj.weight");
  std::vector<float> row(static_cast<size_t>(w.layers[1].w_up.cols));
  for (int64_t r0 = 0; r0 < w.layers[1].w_up.rows; r0 += 7) {
    w.layers[1].w_up.row_to_f32(r0, row.data());
    for (size_t k = 0; k < row.size(); ++k) ASSERT_EQ(row[k], up[static_cast<size_t>(r0) * row.size() + k]);
  }
}

INSTANTIATE_TEST_SUITE_P(RandomCheckpoints, LlamaSuite, ::testing::ValuesIn(kSuiteNames));

// A writable copy of a suite checkpoint.
struct Copy {
  TempDir tmp{"llama-corrupt"};
  std::string dir;
  explicit Copy(const std::string& name) : dir(tmp / name) {
    fs::copy(llama_suite_dir() + "/" + name, dir, fs::copy_options::recursive);
  }
  void edit_json(const std::string& file, const std::function<void(json&)>& f) const {
    json j = read_json(dir + "/" + file);
    f(j);
    testutil::write_file(dir + "/" + file, j.dump(1));
  }
  void load() const { load_llama_weights(dir, load_config(dir + "/config.json"), {}); }
};

const char* kSharded = "llama_gqa3_bf16_untied_sharded_llama3";
const char* kSingle = "llama_gqa1_f32_tied_single";

TEST(LlamaLoaderErrors, ShapeMismatchNamesFileTensorExpectedActual) {
  Copy c(kSingle);
  c.edit_json("config.json", [](json& j) { j["intermediate_size"] = 65; });
  expect_error([&] { c.load(); }, {"model.safetensors", "model.layers.0.mlp.gate_proj.weight", "[64, 32]", "[65, 32]"});
}

TEST(LlamaLoaderErrors, MissingShard) {
  Copy c(kSharded);
  fs::remove(c.dir + "/model-00002-of-00003.safetensors");
  expect_error([&] { c.load(); }, {"model.safetensors.index.json", "model-00002-of-00003.safetensors", "missing"});
}

TEST(LlamaLoaderErrors, IndexPointsAtAMissingFile) {
  Copy c(kSharded);
  c.edit_json("model.safetensors.index.json",
              [](json& j) { j["weight_map"]["model.norm.weight"] = "model-00009-of-00003.safetensors"; });
  expect_error([&] { c.load(); }, {"model.norm.weight", "model-00009-of-00003.safetensors", "missing"});
}

TEST(LlamaLoaderErrors, IndexSendsATensorToTheWrongShard) {
  Copy c(kSharded);
  c.edit_json("model.safetensors.index.json",
              [](json& j) { j["weight_map"]["model.embed_tokens.weight"] = j["weight_map"]["model.norm.weight"]; });
  expect_error([&] { c.load(); }, {"missing tensor \"model.embed_tokens.weight\""});
}

TEST(LlamaLoaderErrors, TensorNotInTheIndex) {
  Copy c(kSharded);
  c.edit_json("model.safetensors.index.json", [](json& j) { j["weight_map"].erase("lm_head.weight"); });
  expect_error([&] { c.load(); }, {"lm_head.weight", "weight_map"});
}

TEST(LlamaLoaderErrors, ShardsWithoutTheirIndex) {
  Copy c(kSharded);
  fs::remove(c.dir + "/model.safetensors.index.json");
  expect_error([&] { c.load(); }, {"model.safetensors.index.json", "missing", "shard"});
}

TEST(LlamaLoaderErrors, IndexWithAPathOutsideTheFolder) {
  Copy c(kSharded);
  c.edit_json("model.safetensors.index.json", [](json& j) { j["weight_map"]["model.norm.weight"] = "../x"; });
  expect_error([&] { c.load(); }, {"weight_map", "same folder"});
}

TEST(LlamaLoaderErrors, UntiedHeadMissing) {
  Copy c(kSingle);
  c.edit_json("config.json", [](json& j) { j["tie_word_embeddings"] = false; });
  expect_error([&] { c.load(); }, {"model.safetensors", "missing tensor \"lm_head.weight\""});
}

TEST(LlamaLoaderErrors, NoWeightsAtAll) {
  Copy c(kSingle);
  fs::remove(c.dir + "/model.safetensors");
  expect_error([&] { c.load(); }, {"model.safetensors", "missing"});
}

TEST(LlamaLoaderErrors, HeadCountsThatDoNotDivide) {
  Copy c(kSharded);
  c.edit_json("config.json", [](json& j) { j["num_key_value_heads"] = 4; });
  expect_error([&] { load_config(c.dir + "/config.json"); }, {"config.json", "num_key_value_heads (4)"});
}

TEST(LlamaLoaderErrors, BadRopeScaling) {
  Copy c(kSharded);
  c.edit_json("config.json", [](json& j) { j["rope_scaling"]["factor"] = -1; });
  expect_error([&] { load_config(c.dir + "/config.json"); }, {"config.json", "rope_scaling", "factor"});
}

// Writes `bits` (the tensor's element size) over element `index` of tensor
// `name` in the safetensors file `path`.
void poke(const std::string& path, const std::string& name, size_t index, const void* bits, size_t size) {
  std::string bytes = testutil::read_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const json header = json::parse(bytes.substr(8, header_len));
  const size_t at = 8 + header_len + header[name]["data_offsets"][0].get<size_t>() + index * size;
  std::memcpy(&bytes[at], bits, size);
  testutil::write_file(path, bytes);
}

// A NaN or infinity in any weight the model reads is refused as GPT-2's
// loader refuses it: the file, the tensor, its shape, the value and where.
TEST(LlamaLoaderErrors, NonFiniteWeights) {
  {  // F32 matrix (model.layers.0.mlp.up_proj.weight is (64, 32)): row 1, column 5
    Copy c(kSingle);
    const float nan = std::nanf("");
    poke(c.dir + "/model.safetensors", "model.layers.0.mlp.up_proj.weight", 32 + 5, &nan, 4);
    expect_error([&] { c.load(); }, {"model.safetensors", "\"model.layers.0.mlp.up_proj.weight\" [64, 32]", "NaN",
                                     "element 37 (row 1, column 5)", "expected finite weights"});
  }
  {  // F32 vector: -inf
    Copy c(kSingle);
    const float ninf = -INFINITY;
    poke(c.dir + "/model.safetensors", "model.norm.weight", 3, &ninf, 4);
    expect_error([&] { c.load(); }, {"model.safetensors", "\"model.norm.weight\"", "-inf", "element 3"});
  }
  {  // BF16 matrix in a shard: +inf (0x7f80), checked on the stored bits
    Copy c(kSharded);
    const std::string name = "model.layers.1.self_attn.o_proj.weight";
    const std::string shard = read_json(c.dir + "/model.safetensors.index.json")["weight_map"][name];
    const uint16_t inf = 0x7f80;
    poke(c.dir + "/" + shard, name, 2, &inf, 2);
    expect_error([&] { c.load(); }, {shard, "\"" + name + "\"", "+inf", "element 2 (row 0, column 2)"});
  }
}

TEST(LlamaLoaderErrors, ModelLoadNeedsTokenizerJson) {
  Copy c(kSingle);
  fs::remove(c.dir + "/tokenizer.json");
  expect_error([&] { load_model(c.dir); }, {"tokenizer.json", "missing"});
}

}  // namespace
}  // namespace kvscope
