// The GGUF reader (model/arch/gguf.*) against an independent NumPy writer and
// float64 dequantizer (tools/numpy_gguf.py, written from the format's
// description): every metadata value type, every tensor type kvscope reads,
// a non-default alignment, a header larger than the reader's read window;
// then each kind of bad file, made by corrupting a good one here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "model/arch/gguf.h"
#include "model/arch/gguf_config.h"
#include "model/core/error.h"

namespace kvscope {
namespace {

using testutil::json;

const json& suite() {
  static const json j = testutil::read_json(testutil::gguf_suite_dir() + "/suite.json");
  return j;
}

const json& suite_file(const std::string& name) {
  for (const json& f : suite()["files"])
    if (f["file"] == name) return f;
  throw std::runtime_error("no " + name + " in the GGUF suite");
}

std::string path_of(const std::string& name) {
  return testutil::gguf_suite_dir() + "/" + name;
}

std::vector<double> read_f64(const std::string& path) {
  const std::string raw = testutil::read_file(path);
  std::vector<double> v(raw.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), raw.data(), v.size() * 8);
  return v;
}

TEST(Gguf, TypeTableEqualsTheReference) {
  const json& types = suite()["types"];
  ASSERT_EQ(types.size(), ggml_readable_types().size());
  for (const json& t : types) {
    const GgmlTypeInfo* info = ggml_type_info(t["id"].get<uint32_t>());
    ASSERT_NE(info, nullptr) << t["name"];
    EXPECT_EQ(info->name, t["name"].get<std::string>());
    EXPECT_EQ(info->block_size, t["block_size"].get<int>()) << info->name;
    EXPECT_EQ(info->block_bytes, t["block_bytes"].get<int>()) << info->name;
  }
  EXPECT_EQ(ggml_block_layout(ggml_type_info(GgmlType::kQ4_K)), "256 weights in 144 bytes = 4.5 bits each");
  EXPECT_EQ(ggml_block_layout(ggml_type_info(GgmlType::kQ8_0)), "32 weights in 34 bytes = 8.5 bits each");
  EXPECT_EQ(ggml_block_layout(ggml_type_info(GgmlType::kQ6_K)), "256 weights in 210 bytes = 6.5625 bits each");
  EXPECT_EQ(ggml_block_layout(ggml_type_info(GgmlType::kF16)), "1 weight in 2 bytes = 16 bits");
  EXPECT_EQ(ggml_type_name(11), "Q3_K");
  EXPECT_EQ(ggml_type_name(16), "IQ2_XXS");
  EXPECT_EQ(ggml_type_name(1000), "unknown");
}

// One metadata value against the reference's JSON list of values.
void expect_value(const GgufValue& v, const json& ref) {
  const std::string key = ref["key"];
  ASSERT_EQ(to_string(v.type), ref["type"].get<std::string>()) << key;
  ASSERT_EQ(v.is_array, ref["array"].get<bool>()) << key;
  ASSERT_EQ(v.count, ref["count"].get<uint64_t>()) << key;
  if (ref["values"].is_null()) return;
  for (uint64_t i = 0; i < v.count; ++i) {
    const json& r = ref["values"][i];
    if (v.type == GgufValueType::kString) {
      EXPECT_EQ(v.string_at(i), r.get<std::string>()) << key << "[" << i << "]";
    } else if (v.type == GgufValueType::kBool) {
      EXPECT_EQ(v.bool_at(i), r.get<int>() != 0) << key << "[" << i << "]";
    } else if (v.is_float()) {
      EXPECT_EQ(v.number_at(i), r.get<double>()) << key << "[" << i << "]";  // f32 values: the reference rounded them
    } else if (r.is_number_unsigned()) {
      EXPECT_EQ(v.uint_at(i), r.get<uint64_t>()) << key << "[" << i << "]";
    } else {
      EXPECT_EQ(v.int_at(i), r.get<int64_t>()) << key << "[" << i << "]";
    }
  }
}

TEST(Gguf, MetadataEqualsTheReference) {
  for (const json& ref : suite()["files"]) {
    const GgufFile f = GgufFile::open(path_of(ref["file"]));
    ASSERT_EQ(f.metadata().size(), ref["metadata"].size()) << ref["file"];
    for (size_t i = 0; i < f.metadata().size(); ++i) {
      EXPECT_EQ(f.metadata()[i].first, ref["metadata"][i]["key"].get<std::string>());
      expect_value(f.metadata()[i].second, ref["metadata"][i]);
    }
    EXPECT_EQ(f.alignment(), ref["alignment"].get<uint64_t>()) << ref["file"];
    EXPECT_EQ(f.data_offset(), ref["data_offset"].get<uint64_t>()) << ref["file"];
  }
  const GgufFile f = GgufFile::open(path_of("all_types.gguf"));
  EXPECT_EQ(f.meta_string("general.architecture"), "llama");
  EXPECT_EQ(f.meta_uint("test.u64"), UINT64_MAX);
  EXPECT_EQ(f.meta_number("test.i16"), -32768.0);
  EXPECT_THROW(f.meta_uint("test.i8"), Error);  // negative
}

TEST(Gguf, TensorInfosEqualTheReference) {
  for (const json& ref : suite()["files"]) {
    const GgufFile f = GgufFile::open(path_of(ref["file"]));
    ASSERT_EQ(f.tensors().size(), ref["tensors"].size()) << ref["file"];
    for (size_t i = 0; i < f.tensors().size(); ++i) {
      const GgufTensor& t = f.tensors()[i];
      const json& r = ref["tensors"][i];
      EXPECT_EQ(t.name, r["name"].get<std::string>());
      EXPECT_EQ(t.dims, r["dims"].get<std::vector<int64_t>>()) << t.name;
      EXPECT_EQ(ggml_type_info(t.type).name, r["type"].get<std::string>()) << t.name;
      EXPECT_EQ(t.offset, r["offset"].get<uint64_t>()) << t.name;
      EXPECT_EQ(t.n_bytes, r["n_bytes"].get<uint64_t>()) << t.name;
      EXPECT_EQ(f.tensor(t.name), &t);
    }
  }
}

TEST(Gguf, DequantizedTensorsEqualTheReference) {
  for (const json& ref : suite()["files"]) {
    const GgufFile f = GgufFile::open(path_of(ref["file"]));
    for (const json& r : ref["tensors"]) {
      const std::string name = r["name"];
      const std::vector<float> got = f.to_f32(name);
      const std::vector<double> want = read_f64(path_of(r["ref"]));
      ASSERT_EQ(got.size(), want.size()) << name;
      // Every block value is a 16-bit float scale times small integers (and
      // minus a second such product): each product is exact in float, so the
      // reader's only rounding is the last, to nearest. The float64 reference
      // rounded to float must then come out: |got - want| <= half an ulp,
      // 2^-24 of |want| (0 for F32, F16, BF16, Q8_0, Q4_0, Q5_0).
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), std::ldexp(std::fabs(want[i]), -24))
            << ref["file"] << " " << name << " [" << i << "] (" << r["type"] << ")";
      }
    }
  }
}

// The big header crosses the file reader's read windows; it and the reader of
// bytes in memory must agree.
TEST(Gguf, FileAndMemoryReadersAgreeOnAHeaderLargerThanTheReadWindow) {
  const json& ref = suite_file("big_header.gguf");
  const GgufFile a = GgufFile::open(path_of("big_header.gguf"));
  const GgufFile b = GgufFile::from_bytes(testutil::read_file(path_of("big_header.gguf")), "memory");
  for (const GgufFile* f : {&a, &b}) {
    const GgufValue* tokens = f->find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->count, 200000u);
    for (const auto& [i, s] : ref["spot_strings"].items())
      EXPECT_EQ(tokens->string_at(std::stoull(i)), s.get<std::string>());
    EXPECT_EQ(f->meta_string("test.long_string").size(), size_t{5} << 20);
    EXPECT_EQ(f->find("tokenizer.ggml.scores")->number_at(199999), 99 / 4.0);
    EXPECT_EQ(f->data_offset(), ref["data_offset"].get<uint64_t>());
    EXPECT_EQ(f->to_f32("big.0"), a.to_f32("big.0"));
  }
}

// Names in messages and listings: whole UTF-8 characters kept, anything else
// escaped, so the text is valid UTF-8 (JSON can hold it) and reads one way.
TEST(Gguf, QuoteKeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(gguf_quote("\u00fc\u00df\u2713"), "\"\u00fc\u00df\u2713\"");
  EXPECT_EQ(gguf_quote(std::string("a\xc3", 2)), "\"a\\xc3\"");  // a cut character
  EXPECT_EQ(gguf_quote("\xc0\xaf\xed\xa0\x80\xc2\x85"),
            "\"\\xc0\\xaf\\xed\\xa0\\x80\\xc2\\x85\"");  // overlong, surrogate, C1
  EXPECT_EQ(gguf_quote("q\"\\\n"), "\"q\\x22\\x5c\\x0a\"");
  EXPECT_EQ(gguf_quote("ab\u00fc", 3), "\"ab...\"");  // never half a character
}

TEST(Gguf, DequantizeRowRefusesAPartialBlock) {
  std::vector<uint8_t> blocks(144, 0);
  std::vector<float> out(256);
  EXPECT_THROW(dequantize_row(GgmlType::kQ4_K, blocks.data(), 100, out.data()), Error);
  dequantize_row(GgmlType::kQ4_K, blocks.data(), 256, out.data());
  EXPECT_EQ(out[255], 0.0f);
}

// Each architecture's hyperparameters, as the reference wrote them under
// llama.cpp's key names, become the Config the config.json parsers give.
TEST(Gguf, ConfigFromTheMetadataEqualsTheReference) {
  for (const char* arch : {"gpt2", "llama", "qwen2"}) {
    const json& r = suite_file(std::string(arch) + "_config.gguf")["config"];
    const Config c = config_from_gguf(GgufFile::open(path_of(std::string(arch) + "_config.gguf")));
    EXPECT_EQ(c.arch, std::string(arch) == "gpt2" ? Arch::kGpt2 : Arch::kLlama) << arch;
    EXPECT_EQ(c.model_type, arch);
    EXPECT_EQ(c.n_layer, r["n_layer"].get<int>()) << arch;
    EXPECT_EQ(c.n_embd, r["n_embd"].get<int>()) << arch;
    EXPECT_EQ(c.n_head, r["n_head"].get<int>()) << arch;
    EXPECT_EQ(c.kv_heads(), r["n_kv_head"].get<int>()) << arch;
    EXPECT_EQ(c.head_dim(), r["head_dim"].get<int>()) << arch;
    EXPECT_EQ(c.n_inner, r["n_inner"].get<int>()) << arch;
    EXPECT_EQ(c.vocab_size, r["vocab_size"].get<int>()) << arch;
    EXPECT_EQ(c.max_position_embeddings, r["max_position_embeddings"].get<int>()) << arch;
    EXPECT_EQ(c.n_positions, std::min(r["max_position_embeddings"].get<int>(),
                                      std::string(arch) == "gpt2" ? 1 << 30 : kLlamaContextCap))
        << arch;
    EXPECT_EQ(c.bos_token_id, r["bos"].get<int>()) << arch;
    EXPECT_TRUE(c.is_eos(r["eos"].get<int>())) << arch;
    EXPECT_EQ(c.layer_norm_epsilon, r["eps"].get<float>()) << arch;
    if (c.arch == Arch::kLlama) {
      EXPECT_EQ(c.rope_theta, r["rope_theta"].get<double>()) << arch;
      EXPECT_EQ(c.tie_word_embeddings, r["tie"].get<bool>()) << arch;
      EXPECT_EQ(c.qkv_bias, r["qkv_bias"].get<bool>()) << arch;
    }
  }
}

// `kvscope inspect` lists a GGUF file's tensors as the reference wrote them,
// found by its .gguf name, with no extension (an Ollama blob), and as the one
// .gguf in a folder.
TEST(Gguf, InspectListsTheTensorsOfAGgufFile) {
  const json& ref = suite_file("all_types.gguf");
  testutil::TempDir tmp("gguf-inspect");
  std::filesystem::create_directories(tmp / "folder");
  std::filesystem::copy_file(path_of("all_types.gguf"), tmp / "folder/model.gguf");
  std::filesystem::copy_file(path_of("all_types.gguf"), tmp / "sha256-0123abcd");
  for (const std::string& model : {path_of("all_types.gguf"), tmp / "folder", tmp / "sha256-0123abcd"}) {
    std::string out;
    ASSERT_EQ(testutil::run_kvscope("inspect --json --model " + testutil::shell_quote(model), out, tmp), 0) << out;
    const json got = json::parse(out);
    ASSERT_EQ(got["tensors"].size(), ref["tensors"].size());
    for (size_t i = 0; i < got["tensors"].size(); ++i) {
      const json& g = got["tensors"][i];
      const json& r = ref["tensors"][i];
      EXPECT_EQ(g["name"], r["name"]);
      EXPECT_EQ(g["dims"], r["dims"]);
      EXPECT_EQ(g["type"], r["type"]);
      EXPECT_EQ(g["bytes"], r["n_bytes"]);
    }
    EXPECT_EQ(got["metadata"]["test.u32"], "u32 4294967295");
    EXPECT_EQ(got["metadata"]["general.architecture"], "string \"llama\"");
  }
  std::string out;
  ASSERT_EQ(testutil::run_kvscope("inspect --model " + testutil::shell_quote(path_of("all_types.gguf")), out, tmp), 0)
      << out;
  EXPECT_NE(out.find("\"q.Q4_K\""), std::string::npos) << out;
  EXPECT_NE(out.find("[512, 2]"), std::string::npos) << out;
  EXPECT_NE(out.find("256 weights in 144 bytes = 4.5 bits each"), std::string::npos) << out;
  EXPECT_NE(out.find("array of 4 string: [\"a\", \"\", \"\u00fc\u00df\", \"<|eot|>\"]"), std::string::npos) << out;
  // A bad file: exit 1, the message naming the file and the field.
  std::string bad = testutil::read_file(path_of("all_types.gguf"));
  bad[4] = 2;
  testutil::write_file(tmp / "bad.gguf", bad);
  EXPECT_EQ(testutil::run_kvscope("inspect --model " + testutil::shell_quote(tmp / "bad.gguf"), out, tmp), 1);
  EXPECT_NE(out.find("bad.gguf: version: found 2, expected 3"), std::string::npos) << out;
  // The commands that run a model load it as a GGUF file (test_gguf_model.cpp): this
  // one, written to list every type, lacks the hyperparameters, named by the refusal.
  EXPECT_EQ(
      testutil::run_kvscope("generate --prompt hi --model " + testutil::shell_quote(tmp / "sha256-0123abcd"), out, tmp),
      1);
  EXPECT_NE(out.find("sha256-0123abcd: metadata \"llama.block_count\" is missing"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvscope
