// GGUF files as models: tools/numpy_gguf_convert.py converts random Hugging
// Face checkpoints (numpy_ref.py's GPT-2, numpy_ref_llama.py's Llama with
// grouped-query attention and Qwen2 with biases) by llama.cpp's rules (Q/K
// permuted for llama, Conv1D weights transposed for gpt2, a tied head left
// out). An F32 / F16 GGUF gives the logits and greedy tokens of the
// safetensors folder it came from; a quantized one those of the NumPy
// float64 forward over its weights as stored, decoded. Its tokenizer gives
// the ids of the tokenizer.json it came from; broken files are refused
// naming the file and the tensor or key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "model/arch/gguf.h"
#include "model/arch/gguf_model.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/arch/gguf_weights.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/chat/chat_template.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::Greedy;
using testutil::json;

// The suite, generated once per version of the converter and of the scripts
// it imports (their hash is part of the tag: generated_suite hashes the
// converter and numpy_ref.py).
const std::string& suite_dir() {
  static const std::string dir = [] {
    const std::string tools = std::string(KVSCOPE_SOURCE_DIR) + "/tools/";
    const size_t deps = std::hash<std::string>{}(testutil::read_file(tools + "numpy_gguf.py") +
                                                 testutil::read_file(tools + "numpy_ref_llama.py"));
    char tag[64];
    std::snprintf(tag, sizeof tag, "numpy_gguf_models_%08zx", deps & 0xffffffffu);
    return testutil::generated_suite(tools + "numpy_gguf_convert.py", tag);
  }();
  return dir;
}

json suite() {
  return testutil::read_json(suite_dir() + "/suite.json");
}

json model_entry(const std::string& name) {
  const json s = suite();
  for (const json& m : s["models"])
    if (m["name"] == name) return m;
  throw std::runtime_error("no model " + name);
}

std::string path_of(const std::string& file) {
  return suite_dir() + "/" + file;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

class GgufModel : public ::testing::TestWithParam<const char*> {};

// An F32 or F16 GGUF and the safetensors folder it came from: the same
// config, parameter count, stored type, logits and greedy tokens.
TEST_P(GgufModel, MatchesItsSafetensors) {
  const json e = model_entry(GetParam());
  const auto g = load_model(path_of(e["gguf"]));
  const auto s = load_model(path_of(e["safetensors"]));
  EXPECT_EQ(g->name, GetParam());
  EXPECT_EQ(g->dir, path_of(e["gguf"]));
  EXPECT_EQ(g->config.n_layer, s->config.n_layer);
  EXPECT_EQ(g->config.n_head, s->config.n_head);
  EXPECT_EQ(g->config.kv_heads(), s->config.kv_heads());
  EXPECT_EQ(g->config.n_inner, s->config.n_inner);
  EXPECT_EQ(g->config.qkv_bias, s->config.qkv_bias);
  EXPECT_EQ(g->config.n_positions, s->config.n_positions);
  EXPECT_EQ(g->n_params, s->n_params);  // a tied head (and gpt2's copy of it) counted once
  EXPECT_EQ(g->stored_dtype, e["type"].get<std::string>());
  EXPECT_EQ(g->weight_bytes(), s->weight_bytes());
  if (e["output_copy"].get<bool>()) {
    EXPECT_TRUE(std::get<Gpt2Weights>(g->weights).lm_head.empty());
  }
  std::vector<int> prompt = {5, 17, 42, 100, 7, 250};
  const Greedy a = testutil::greedy_run(*g, prompt, 10), b = testutil::greedy_run(*s, prompt, 10);
  for (size_t i = 0; i < a.logits.size(); ++i) {
    std::vector<double> ref(b.logits[i].begin(), b.logits[i].end());
    EXPECT_LE(max_abs_diff(a.logits[i], ref), 1e-6) << GetParam() << " step " << i;
  }
  EXPECT_EQ(a.tokens, b.tokens);
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, GgufModel,
                         ::testing::Values("gpt2.F32", "gpt2.F16", "llama.F32", "llama.F16", "llama.BF16", "qwen2.F32",
                                           "qwen2.F16"));

class GgufQuantized : public ::testing::TestWithParam<const char*> {};

// A quantized GGUF against the NumPy float64 forward over its weights as
// stored (decoded from the blocks, Q/K rows put back): logits within 1e-4 at
// every step, the same greedy tokens.
TEST_P(GgufQuantized, MatchesNumpyOfDecodedWeights) {
  const json e = model_entry(GetParam());
  const json ref = testutil::read_json(path_of(e["reference"].get<std::string>() + "/ref.json"));
  const auto g = load_model(path_of(e["gguf"]));
  EXPECT_EQ(g->stored_dtype, e["type"].get<std::string>());
  const std::vector<int> prompt = ref["prompt"];
  const int steps = ref["n_steps"];
  const Greedy a = testutil::greedy_run(*g, prompt, steps);
  for (int i = 0; i <= steps; ++i) {
    EXPECT_LE(max_abs_diff(a.logits[static_cast<size_t>(i)], ref["logits"][static_cast<size_t>(i)]), 1e-4)
        << GetParam() << " step " << i;
  }
  EXPECT_EQ(a.tokens, ref["tokens"].get<std::vector<int>>());
}

INSTANTIATE_TEST_SUITE_P(Quantized, GgufQuantized,
                         ::testing::Values("gpt2.Q8_0", "gpt2.Q4_K", "llama.Q8_0", "llama.Q4_K", "qwen2.Q8_0",
                                           "qwen2.Q4_K"));

// The layouts behind the equal logits, read from the files: gpt2's Conv1D
// weight (in, out) is stored transposed, as (out, in) with dims [in, out];
// llama's q_proj rows are permuted by head and unpermute_head_rows puts them
// back; qwen2's are stored as they are.
TEST(GgufLayout, ConverterTransposesAndPermutes) {
  auto hf = [](const std::string& dir, const std::string& name) {
    return SafeTensors::open_header(path_of(dir) + "/model.safetensors").to_f32(name);
  };
  {
    const GgufFile f = GgufFile::open(path_of("gpt2.F32.gguf"));
    const std::vector<float> g = f.to_f32("blk.0.attn_qkv.weight"),
                             h = hf("hf_gpt2_F32", "transformer.h.0.attn.c_attn.weight");
    const int64_t d = 32;
    EXPECT_EQ(f.tensor("blk.0.attn_qkv.weight")->dims, (std::vector<int64_t>{d, 3 * d}));
    for (int64_t out = 0; out < 3 * d; ++out)
      for (int64_t in = 0; in < d; ++in)
        ASSERT_EQ(g[static_cast<size_t>(out * d + in)], h[static_cast<size_t>(in * 3 * d + out)]);
  }
  for (const char* family : {"llama", "qwen2"}) {
    const GgufFile f = GgufFile::open(path_of(std::string(family) + ".F32.gguf"));
    std::vector<float> g = f.to_f32("blk.0.attn_q.weight");
    const std::vector<float> h = hf(std::string("hf_") + family + "_F32", "model.layers.0.self_attn.q_proj.weight");
    const bool llama = std::string(family) == "llama";
    EXPECT_EQ(g == h, !llama) << family;
    if (llama) unpermute_head_rows(reinterpret_cast<uint8_t*>(g.data()), 32, 32 * 4, 4);
    EXPECT_EQ(g, h) << family;
  }
}

// A folder holding one .gguf (and no config.json) and an Ollama blob (no
// extension) load as the file does; a folder with two is refused naming both.
TEST(GgufModelPaths, FolderAndBlob) {
  testutil::TempDir tmp("gguf_model");
  const fs::path one = tmp / "one";
  fs::create_directories(one);
  fs::copy_file(path_of("llama.F32.gguf"), one / "m.gguf");
  EXPECT_EQ(load_model(one.string())->name, "m");
  fs::copy_file(path_of("llama.F32.gguf"), tmp / "sha256-0123");
  const auto blob = load_model(tmp / "sha256-0123");
  EXPECT_EQ(blob->name, "sha256-0123");
  EXPECT_EQ(blob->config.n_layer, 2);
  fs::copy_file(path_of("qwen2.F32.gguf"), one / "other.gguf");
  try {
    load_model(one.string());
    ADD_FAILURE() << "two GGUF files loaded";
  } catch (const Error& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("m.gguf, other.gguf"), std::string::npos) << msg;
  }
}

// The CLI runs a GGUF file where it runs a folder: `generate` picks the
// tokens of the safetensors folder it came from, and `tokenize` reads the
// file's tokenizer.
TEST(GgufCli, GenerateAndTokenizeAsItsSafetensors) {
  testutil::TempDir tmp("gguf_cli");
  auto tokens = [&](const std::string& cmd, const std::string& model) {
    std::string out;
    EXPECT_EQ(testutil::run_kvscope(cmd + " --model " + testutil::shell_quote(model), out, tmp), 0) << out;
    std::vector<int> ids;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("token")) ids.push_back(j["token"]);
      if (j.is_object() && j.contains("ids")) ids = j["ids"].get<std::vector<int>>();
    }
    return ids;
  };
  for (const char* name : {"gpt2.F16", "llama.F32", "qwen2.F16"}) {
    const json e = model_entry(name);
    const std::string gen = "generate --json --prompt 'The cat sat on' --max-new 8";
    const std::vector<int> g = tokens(gen, path_of(e["gguf"])), s = tokens(gen, path_of(e["safetensors"]));
    EXPECT_EQ(g.size(), 8u) << name;  // the prefill's token, then 7 steps
    EXPECT_EQ(g, s) << name;
    const std::string tok = "tokenize --json --text 'Hello, world: 12345 caf\u00e9'";
    EXPECT_EQ(tokens(tok, path_of(e["gguf"])), tokens(tok, path_of(e["safetensors"]))) << name;
  }
}

// Each broken file: an Error naming the file and the tensor or key.
TEST(GgufModelBad, RefusedNamingFileAndTensor) {
  const json s = suite();
  for (const json& b : s["bad"]) {
    const std::string path = path_of(b["gguf"]);
    try {
      load_model(path);
      ADD_FAILURE() << b["name"] << " loaded";
    } catch (const Error& err) {
      const std::string msg = err.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      for (const json& n : b["needles"]) EXPECT_NE(msg.find(n.get<std::string>()), std::string::npos) << msg;
    }
  }
}

// The tokenizer from a GGUF's metadata against the tokenizer.json it came
// from (byte-level BPE with the gpt-2, smollm, qwen2 and llama-bpe
// pre-tokenizers; SentencePiece-style BPE from scores, TinyLlama's layout)
// on a varied corpus: the same ids, prompts (bos first where the file adds
// it) and decoded text; special tokens match whole inside text.
TEST(GgufTokenizer, SameIdsAsTokenizerJson) {
  const json s = suite();
  for (const json& t : s["tokenizers"]) {
    const std::string pre = t["pre"];
    const Tokenizer hf = Tokenizer::from_tokenizer_json(testutil::read_file(path_of(t["json"])), "tokenizer.json");
    const Tokenizer g = tokenizer_from_gguf(GgufFile::open(path_of(t["gguf"])));
    EXPECT_EQ(g.vocab_size(), hf.vocab_size()) << pre;
    EXPECT_EQ(g.bos_prefix_id(), t["add_bos"].get<bool>() ? t["bos"].get<int>() : -1) << pre;
    for (const json& text : s["corpus"]) {
      const std::string x = text;
      const std::vector<int> ids = g.encode(x);
      EXPECT_EQ(ids, hf.encode(x)) << pre << ": " << x;
      EXPECT_EQ(g.encode_prompt(x), hf.encode_prompt(x)) << pre << ": " << x;
      EXPECT_EQ(g.decode_text(ids), hf.decode_text(ids)) << pre << ": " << x;
    }
    for (const json& sp : t["specials"]) {  // CONTROL, USER_DEFINED, UNKNOWN: one id, wherever they are
      const int id = g.token_id(sp.get<std::string>());
      ASSERT_GE(id, 0) << pre << " " << sp;
      const std::vector<int> ids = g.encode("x" + sp.get<std::string>() + "y");
      EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << pre << " " << sp;
    }
  }
}

// A GPT-2 GGUF's tokenizer and the vocab.json + merges.txt it came from.
TEST(GgufTokenizer, Gpt2FilesGiveSameIds) {
  const json s = suite();
  const auto g = load_model(path_of("gpt2.F32.gguf"));
  const Tokenizer hf = Tokenizer::load(path_of("hf_gpt2_F32"));
  for (const json& text : s["corpus"]) {
    const std::string x = text;
    if (x.find("<|") != std::string::npos) continue;  // vocab.json files match no special tokens
    EXPECT_EQ(g->tokenizer.encode(x), hf.encode(x)) << x;
  }
}

// The chat template from tokenizer.chat_template, with the bos and eos tokens' texts.
TEST(GgufChat, TemplateFromMetadata) {
  const json t = suite()["tokenizers"][0];
  const ChatTemplate ct = load_chat_template(path_of(t["gguf"]), std::nullopt);
  std::tm now{};
  EXPECT_EQ(render_chat(ct, {{"user", "hi"}}, false, now), "<|begin_of_text|>hi<|endoftext|>");
  EXPECT_NE(ct.origin.find("tokenizer.chat_template"), std::string::npos);
  try {
    load_chat_template(path_of("llama.F32.gguf"), std::nullopt);
    ADD_FAILURE() << "no template, no refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.chat_template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
