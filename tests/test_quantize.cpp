// `kvscope quantize` against independent references: each file it writes is
// read by tools/numpy_quantize_check.py (numpy_gguf.py's reader, not
// kvscope's) and compared with what llama.cpp's converter and llama-quantize
// write for the same checkpoint (metadata, names, dims, types, offsets, and
// the bytes: byte for byte where llama.cpp's rule is deterministic, within
// the error of NumPy's quantizer for the fitted K-quants); then loaded back
// into kvscope and run against the NumPy float64 forward over the weights it
// stores. Tokenizers round-trip to the same ids.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "model/arch/gguf.h"
#include "model/arch/gguf_export.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/arch/gguf_write.h"
#include "model/arch/model.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::Greedy;
using testutil::json;

std::string tool(const std::string& name) {
  return std::string(KVSCOPE_SOURCE_DIR) + "/tools/" + name;
}

// numpy_quantize_check.py's checkpoints, generated once per version of the scripts it imports.
const std::string& checkpoints() {
  static const std::string dir = [] {
    const size_t deps = std::hash<std::string>{}(testutil::read_file(tool("numpy_gguf.py")) +
                                                 testutil::read_file(tool("numpy_gguf_convert.py")) +
                                                 testutil::read_file(tool("numpy_ref_llama.py")));
    char tag[64];
    std::snprintf(tag, sizeof tag, "numpy_quantize_%08zx", deps & 0xffffffffu);
    return testutil::generated_suite(tool("numpy_quantize_check.py"), tag);
  }();
  return dir;
}

// numpy_gguf_convert.py's suite (its tokenizers), as test_gguf_model.cpp names it.
const std::string& convert_suite() {
  static const std::string dir = [] {
    const size_t deps = std::hash<std::string>{}(testutil::read_file(tool("numpy_gguf.py")) +
                                                 testutil::read_file(tool("numpy_ref_llama.py")));
    char tag[64];
    std::snprintf(tag, sizeof tag, "numpy_gguf_models_%08zx", deps & 0xffffffffu);
    return testutil::generated_suite(tool("numpy_gguf_convert.py"), tag);
  }();
  return dir;
}

double max_abs_diff(const std::vector<float>& a, const json& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i].get<double>());
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

struct Case {
  const char* checkpoint;
  const char* type;
};
std::ostream& operator<<(std::ostream& o, const Case& c) {
  return o << c.checkpoint << "." << c.type;
}

class Quantize : public ::testing::TestWithParam<Case> {};

// `kvscope quantize` on a checkpoint at a type: its JSON record, the file as
// NumPy reads it, then the file loaded back against the NumPy forward over
// the weights it stores (1e-4, the same greedy tokens); F16 and BF16 files
// also give the source's greedy tokens.
TEST_P(Quantize, FileAsLlamaCppWritesItAndLogitsAsNumpy) {
  const Case c = GetParam();
  testutil::TempDir tmp(std::string("quantize-") + c.checkpoint + "-" + c.type);
  const std::string src = checkpoints() + "/" + c.checkpoint, out = tmp / "m.gguf";
  std::string text;
  ASSERT_EQ(testutil::run_kvscope("quantize --model " + testutil::shell_quote(src) + " --type " + c.type + " --out " +
                                      testutil::shell_quote(out) + " --json",
                                  text, tmp),
            0)
      << text;
  const json rec = json::parse(text);
  EXPECT_EQ(rec["file_bytes"].get<uint64_t>(), fs::file_size(out));
  std::string upper = c.type;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_EQ(rec["type"].get<std::string>(), upper);
  testutil::run_numpy_ref("check --model " + testutil::shell_quote(src) + " --gguf " + testutil::shell_quote(out) +
                              " --type " + upper + " --ref " + testutil::shell_quote(tmp / "ref") + " --out " +
                              testutil::shell_quote(tmp / "report.json"),
                          tmp / "check.log", tool("numpy_quantize_check.py"));
  const json report = testutil::read_json(tmp / "report.json");
  for (const json& p : report["problems"]) ADD_FAILURE() << p.get<std::string>();
  ASSERT_TRUE(report["problems"].empty());

  const json ref = testutil::read_json(tmp / "ref/ref.json");
  const auto g = load_model(out);
  const std::vector<int> prompt = ref["prompt"];
  const int steps = ref["n_steps"];
  const Greedy a = testutil::greedy_run(*g, prompt, steps);
  // inspect's bytes per decode step, from the file's tensor list, are the engine's for the loaded model.
  ASSERT_EQ(testutil::run_kvscope("inspect --json --model " + testutil::shell_quote(out), text, tmp), 0) << text;
  EXPECT_EQ(json::parse(text)["decode_step_bytes"].get<uint64_t>(), forward_read_bytes(*g, 0));
  for (int i = 0; i <= steps; ++i)
    EXPECT_LE(max_abs_diff(a.logits[static_cast<size_t>(i)], ref["logits"][static_cast<size_t>(i)]), 1e-4)
        << "step " << i;
  EXPECT_EQ(a.tokens, ref["tokens"].get<std::vector<int>>());
  if (upper == "F16" || upper == "BF16") {
    EXPECT_EQ(a.tokens, testutil::greedy_run(*load_model(src), prompt, steps).tokens);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* ck : {"gpt2", "gpt2_wide", "llama", "llama_wide", "qwen2"})
    for (const char* t : {"f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}) out.push_back({ck, t});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Quantize, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.checkpoint) + "_" + i.param.type;
                         });

// A tokenizer written as GGUF metadata (tokenizer_export) and read back
// (tokenizer_from_gguf): the ids, prompts and texts of the tokenizer.json it
// came from on numpy_gguf_convert.py's corpus, for the four byte-level
// pre-tokenizers and a SentencePiece-style vocabulary (scores from merges).
TEST(QuantizeTokenizer, RoundTripsToTheSameIds) {
  const json s = testutil::read_json(convert_suite() + "/suite.json");
  int sentencepiece = 0;
  for (const json& t : s["tokenizers"]) {
    sentencepiece += t["pre"].get<std::string>().find("SentencePiece") != std::string::npos;
    const std::string pre = t["pre"],
                      dir = fs::path(convert_suite() + "/" + t["json"].get<std::string>()).parent_path();
    const Tokenizer hf = Tokenizer::load(dir);
    Model m;
    m.dir = dir;
    m.config.vocab_size = hf.vocab_size();
    m.config.bos_token_id = t["bos"];
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    tokenizer_export(m, w);
    const Tokenizer g = tokenizer_from_gguf(GgufFile::from_bytes(w.build(), "tok.gguf"));
    EXPECT_EQ(g.vocab_size(), hf.vocab_size()) << pre;
    EXPECT_EQ(g.bos_prefix_id(), hf.bos_prefix_id()) << pre;
    for (const json& text : s["corpus"]) {
      const std::string x = text;
      const std::vector<int> ids = g.encode(x);
      EXPECT_EQ(ids, hf.encode(x)) << pre << ": " << x;
      EXPECT_EQ(g.encode_prompt(x), hf.encode_prompt(x)) << pre << ": " << x;
      EXPECT_EQ(g.decode_text(ids), hf.decode_text(ids)) << pre << ": " << x;
    }
  }
  EXPECT_EQ(sentencepiece, 1);  // and the four byte-level ones
}

// The embedded model (GPT-2's vocab.json + merges.txt) through a q8_0 file:
// the same ids on the corpus (texts without <|endoftext|>, which vocab.json
// files never match whole and GGUF files mark CONTROL, as llama.cpp's
// converter does), and the same first 16 greedy tokens as its safetensors
// folder on three prompts (measured: the first 46, 200 and 200 of 200 agree,
// docs/gguf.md's lesson).
TEST(QuantizeEmbedded, Q8_0SameIdsAndFirstTokens) {
  testutil::TempDir tmp("quantize-tiny");
  std::string text;
  const std::string src = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny";
  ASSERT_EQ(testutil::run_kvscope("quantize --type q8_0 --out " + testutil::shell_quote(tmp / "t.gguf"), text, tmp), 0)
      << text;
  const auto g = load_model(tmp / "t.gguf");
  const auto s = load_model(src);
  const json suite = testutil::read_json(convert_suite() + "/suite.json");
  for (const json& t : suite["corpus"]) {
    const std::string x = t;
    if (x.find("<|") != std::string::npos) continue;
    EXPECT_EQ(g->tokenizer.encode(x), s->tokenizer.encode(x)) << x;
  }
  for (const char* prompt : {"Once upon a time", "The little dog", "Tom and Mia went to the park. They"}) {
    const std::vector<int> ids = s->tokenizer.encode_prompt(prompt);
    EXPECT_EQ(testutil::greedy_run(*g, ids, 15).tokens, testutil::greedy_run(*s, ids, 15).tokens) << prompt;
  }
}

// llama_tensor_get_type's fallback (llama.cpp src/llama-quant.cpp): a
// K-quant needs rows of a multiple of 256 (Q4_K -> Q5_0, Q6_K -> Q8_0), and
// a row that fits no 32-weight block either is written F16.
TEST(QuantizeTypes, FallbackAsLlamaQuantize) {
  EXPECT_EQ(export_type(GgmlType::kQ4_K, 512), GgmlType::kQ4_K);
  EXPECT_EQ(export_type(GgmlType::kQ4_K, 160), GgmlType::kQ5_0);
  EXPECT_EQ(export_type(GgmlType::kQ6_K, 640), GgmlType::kQ8_0);
  EXPECT_EQ(export_type(GgmlType::kQ6_K, 48), GgmlType::kF16);
  EXPECT_EQ(export_type(GgmlType::kQ4_K, 48), GgmlType::kF16);
  EXPECT_EQ(export_type(GgmlType::kQ8_0, 48), GgmlType::kF16);
  EXPECT_EQ(export_type(GgmlType::kQ4_0, 96), GgmlType::kQ4_0);
  EXPECT_EQ(export_type(GgmlType::kBF16, 7), GgmlType::kBF16);
}

// A GGUF quantized again at its own type: every tensor's bytes and the
// tokenizer's metadata as they were (blocks copied, keys copied).
TEST(QuantizeGguf, SameTypeCopiesBlocksAndTokenizer) {
  testutil::TempDir tmp("quantize-again");
  std::string text;
  const std::string src = checkpoints() + "/llama";
  ASSERT_EQ(testutil::run_kvscope("quantize --model " + testutil::shell_quote(src) + " --type q8_0 --out " +
                                      testutil::shell_quote(tmp / "a.gguf"),
                                  text, tmp),
            0)
      << text;
  ASSERT_EQ(testutil::run_kvscope("quantize --model " + testutil::shell_quote(tmp / "a.gguf") + " --type q8_0 --out " +
                                      testutil::shell_quote(tmp / "b.gguf"),
                                  text, tmp),
            0)
      << text;
  const GgufFile a = GgufFile::open(tmp / "a.gguf"), b = GgufFile::open(tmp / "b.gguf");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const GgufTensor& t : a.tensors()) {
    const GgufTensor* u = b.tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type) << t.name;
    std::vector<uint8_t> x(t.n_bytes), y(u->n_bytes);
    a.read_raw(t, x.data());
    b.read_raw(*u, y.data());
    EXPECT_EQ(x, y) << t.name;
  }
  for (const auto& [key, v] : a.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ASSERT_NE(b.find(key), nullptr) << key;
    EXPECT_EQ(b.find(key)->bytes, v.bytes) << key;
  }
}

// general.name is the model's folder name, or NAME for a Hugging Face cache
// snapshot (models--ORG--NAME/snapshots/HASH).
TEST(QuantizeGguf, GeneralNameOfACacheSnapshot) {
  testutil::TempDir tmp("quantize-name");
  const std::string snap = tmp / "hub/models--acme--tiny-gpt/snapshots/0123abcd";
  fs::create_directories(snap);
  for (const auto& e : fs::directory_iterator(checkpoints() + "/gpt2"))
    fs::copy_file(e.path(), snap + "/" + e.path().filename().string());
  std::string text;
  ASSERT_EQ(testutil::run_kvscope("quantize --model " + testutil::shell_quote(snap) + " --type f16 --out " +
                                      testutil::shell_quote(tmp / "a.gguf"),
                                  text, tmp),
            0)
      << text;
  EXPECT_EQ(GgufFile::open(tmp / "a.gguf").meta_string("general.name"), "tiny-gpt");
}

// Usage errors exit 2 naming the flag; nothing is written.
TEST(QuantizeCli, RefusesBadTypeAndMissingFolder) {
  testutil::TempDir tmp("quantize-bad");
  testutil::expect_refused(
      {{"quantize --type q3_k --out " + testutil::shell_quote(tmp / "a.gguf"), {"--type", "q3_k", "q4_k"}},
       {"quantize --type q8_0 --out " + testutil::shell_quote(tmp / "no/such/a.gguf"), {"--out", "does not exist"}},
       {"quantize --type q8_0 --out " + testutil::shell_quote(tmp.path()), {"--out", "is a folder"}},
       {"quantize --out " + testutil::shell_quote(tmp / "a.gguf"), {"--type"}}},
      tmp);
  EXPECT_FALSE(fs::exists(tmp / "a.gguf"));
  // A destination kvscope must not replace (a FIFO): a runtime error, exit 1, naming it.
  ASSERT_EQ(mkfifo((tmp / "fifo.gguf").c_str(), 0600), 0);
  testutil::expect_refused({{"quantize --type q8_0 --out " + testutil::shell_quote(tmp / "fifo.gguf"), {"fifo.gguf"}}},
                           tmp, 1);
}

}  // namespace
}  // namespace kvscope
