// Bad GGUF files: each made by corrupting one field of a good file written by
// tools/numpy_gguf.py (whose suite.json says where each header field lies),
// read from a file and from memory. Each must be refused with a
// kvscope::Error naming the file and the field.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/arch/gguf.h"
#include "model/arch/gguf_config.h"
#include "model/core/error.h"
#include "gguf_test_util.h"

namespace kvscope {
namespace {

using testutil::json;

// A good file's bytes and its layout, to corrupt.
struct Good {
  std::string bytes;
  json ref;
  explicit Good(const std::string& name) : bytes(testutil::read_file(testutil::gguf_suite_dir() + "/" + name)) {
    const json all = testutil::read_json(testutil::gguf_suite_dir() + "/suite.json");
    for (const json& f : all["files"])
      if (f["file"] == name) ref = f;
  }
  uint64_t kv_field(const std::string& key, const char* field) const {
    for (const json& k : ref["layout"]["kv"])
      if (k["key"] == key) return k[field].get<uint64_t>();
    throw std::runtime_error("no key " + key);
  }
  uint64_t tensor_field(const std::string& name, const char* field) const {
    for (const json& t : ref["layout"]["tensors"])
      if (t["name"] == name) return t[field].get<uint64_t>();
    throw std::runtime_error("no tensor " + name);
  }
  uint64_t tensor_ref(const std::string& name, const char* field) const {
    for (const json& t : ref["tensors"])
      if (t["name"] == name) return t[field].get<uint64_t>();
    throw std::runtime_error("no tensor " + name);
  }
  std::string with_u32(uint64_t at, uint32_t v) const {
    std::string b = bytes;
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  }
  std::string with_u64(uint64_t at, uint64_t v) const {
    std::string b = bytes;
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  }
};

// `bytes` is refused, from a file and from memory, with a message that names
// the file and each of `named`.
void expect_refused(const std::string& bytes, const std::vector<std::string>& named) {
  testutil::TempDir tmp("gguf-bad");
  const std::string path = tmp / "bad.gguf";
  testutil::write_file(path, bytes);
  for (int from_file = 0; from_file < 2; ++from_file) {
    try {
      if (from_file) {
        GgufFile::open(path);
      } else {
        GgufFile::from_bytes(bytes, path);
      }
      ADD_FAILURE() << "accepted; expected an error naming " << named[0];
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      for (const std::string& n : named)
        EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
    }
  }
}

TEST(GgufBadFiles, Truncated) {
  const Good g("all_types.gguf");
  expect_refused(g.bytes.substr(0, 2), {"truncated", "magic number", "ends at byte 2"});
  expect_refused(g.bytes.substr(0, 12), {"truncated", "tensor count"});
  // Cut inside the entries or tensor infos: fewer bytes are left than their counts need.
  const uint64_t value_at = g.kv_field("test.u64", "value_at");
  expect_refused(g.bytes.substr(0, value_at + 3), {"metadata count: found 30", "truncated"});
  const uint64_t dims_at = g.tensor_field("q.Q4_K", "dims_at");
  expect_refused(g.bytes.substr(0, dims_at + 4), {"tensor count: found 21", "truncated"});
  // Cut inside a string whose entry count still fits.
  const Good big("big_header.gguf");
  const uint64_t long_at = big.kv_field("test.long_string", "value_at");
  expect_refused(big.bytes.substr(0, long_at + 1000),
                 {"metadata \"test.long_string\" length: found 5242880, but only", "truncated"});
  expect_refused(big.bytes.substr(0, long_at + 4), {"truncated GGUF file: metadata \"test.long_string\" length"});
  // Cut inside the data section: the last tensor's bytes run past the end.
  expect_refused(g.bytes.substr(0, g.bytes.size() - 40), {"tensor \"q.F32_4d\" offset", "past the end"});
}

TEST(GgufBadFiles, WrongMagicOrVersion) {
  const Good g("all_types.gguf");
  std::string b = g.bytes;
  b[0] = 'X';
  expect_refused(b, {"magic number", "expected \"GGUF\"", "not a GGUF file"});
  expect_refused(g.with_u32(4, 2), {"version", "found 2, expected 3", "v1 and v2"});
  expect_refused(g.with_u32(4, 1), {"version", "found 1"});
  expect_refused(g.with_u32(4, 0x03000000u), {"version", "big-endian"});
  expect_refused(g.with_u32(4, 4), {"version", "found 4, expected 3"});
}

TEST(GgufBadFiles, AbsurdCounts) {
  const Good g("all_types.gguf");
  expect_refused(g.with_u64(8, UINT64_MAX), {"tensor count", "found 18446744073709551615", "at most"});
  expect_refused(g.with_u64(16, UINT64_MAX), {"metadata count", "at most"});
  expect_refused(g.with_u64(16, 1u << 30), {"metadata count"});
  expect_refused(g.with_u64(g.kv_field("test.arr_u64", "count_at"), UINT64_MAX / 4),
                 {"metadata \"test.arr_u64\" array length", "u64 elements"});
  expect_refused(g.with_u64(g.kv_field("test.arr_string", "count_at"), 1ull << 40),
                 {"metadata \"test.arr_string\" array length"});
  expect_refused(g.with_u64(g.kv_field("test.string", "value_at"), UINT64_MAX),
                 {"metadata \"test.string\" length", "bytes are left in the file"});
  expect_refused(g.with_u64(g.kv_field("test.u8", "key_at"), 1ull << 20), {"metadata entry", "key length"});
  expect_refused(g.with_u64(g.tensor_field("q.F16", "name_at"), 65), {"tensor", "name length", "at most 64"});
}

TEST(GgufBadFiles, UnknownValueTypes) {
  const Good g("all_types.gguf");
  expect_refused(g.with_u32(g.kv_field("test.u8", "type_at"), 13),
                 {"metadata \"test.u8\" value type", "found 13", "expected 0 to 12"});
  expect_refused(g.with_u32(g.kv_field("test.arr_i8", "elem_type_at"), 77),
                 {"metadata \"test.arr_i8\" array element type", "found 77"});
  expect_refused(g.with_u32(g.kv_field("test.arr_i8", "elem_type_at"), 9), {"arrays of arrays"});
  std::string b = g.bytes;
  b[g.kv_field("test.bool_true", "value_at")] = 2;
  expect_refused(b, {"metadata \"test.bool_true\"", "expected a bool (0 or 1)"});
}

TEST(GgufBadFiles, DuplicateKeysAndTensorNames) {
  const Good g("all_types.gguf");
  std::string b = g.bytes;
  const uint64_t dup_b = g.kv_field("test.dup_b", "key_at") + 8;  // after the length
  ASSERT_EQ(b.substr(dup_b, 10), "test.dup_b");
  b[dup_b + 9] = 'a';
  expect_refused(b, {"metadata \"test.dup_a\"", "appears twice"});
  b = g.bytes;
  const uint64_t name = g.tensor_field("q.Q4_1", "name_at") + 8;
  ASSERT_EQ(b.substr(name, 6), "q.Q4_1");
  b[name + 5] = '0';
  expect_refused(b, {"tensor \"q.Q4_0\"", "appears twice"});
}

TEST(GgufBadFiles, ShapesAndTypes) {
  const Good g("all_types.gguf");
  const uint64_t dims = g.tensor_field("q.Q4_0", "dims_at");  // [32, 2, 2]
  expect_refused(g.with_u64(dims + 8, 1ull << 62),            // 32 x 2^62 x 2 elements
                 {"tensor \"q.Q4_0\" dims", "overflows"});
  expect_refused(g.with_u64(dims, UINT64_MAX), {"tensor \"q.Q4_0\" dims[0]", "expected at most"});
  expect_refused(g.with_u64(g.tensor_field("q.Q4_K", "dims_at"), 100),
                 {"tensor \"q.Q4_K\" dims[0]", "row length 100", "Q4_K's block of 256"});
  expect_refused(g.with_u32(g.tensor_field("q.F16", "n_dims_at"), 5), {"tensor \"q.F16\" n_dims", "found 5"});
  expect_refused(g.with_u32(g.tensor_field("q.F16", "n_dims_at"), 0), {"tensor \"q.F16\" n_dims", "found 0"});
  expect_refused(g.with_u32(g.tensor_field("q.Q8_0", "type_at"), 11),
                 {"tensor \"q.Q8_0\" type", "Q3_K (type id 11)", "cannot read", "Q4_K"});
  expect_refused(g.with_u32(g.tensor_field("q.Q8_0", "type_at"), 16), {"tensor \"q.Q8_0\" type", "IQ2_XXS"});
  expect_refused(g.with_u32(g.tensor_field("q.Q8_0", "type_at"), 35), {"TQ2_0"});
  expect_refused(g.with_u32(g.tensor_field("q.Q8_0", "type_at"), 4000), {"type id 4000", "no ggml type"});
}

TEST(GgufBadFiles, OffsetsAndAlignment) {
  const Good g("all_types.gguf");
  const uint64_t at = g.tensor_field("q.Q6_K", "offset_at");
  const uint64_t offset = g.tensor_ref("q.Q6_K", "offset");
  expect_refused(g.with_u64(at, offset + 1),
                 {"tensor \"q.Q6_K\" offset", "not a multiple of the alignment 32", "misaligned"});
  expect_refused(g.with_u64(at, 1ull << 40), {"tensor \"q.Q6_K\" offset", "past the end"});
  expect_refused(g.with_u64(at, UINT64_MAX - 31), {"tensor \"q.Q6_K\" offset", "past the end"});
  expect_refused(g.with_u64(at, g.tensor_ref("q.Q5_K", "offset")), {"tensor", "share bytes"});
  const Good a("aligned64.gguf");
  const uint64_t align_at = a.kv_field("general.alignment", "value_at");
  expect_refused(a.with_u32(align_at, 48), {"metadata \"general.alignment\"", "found 48", "power of two"});
  expect_refused(a.with_u32(align_at, 0), {"metadata \"general.alignment\"", "found 0"});
  expect_refused(a.with_u32(a.kv_field("general.alignment", "type_at"), 10),
                 {"metadata \"general.alignment\"", "expected a u32, found u64"});
  // 32-byte alignment read where the file says 64: the offsets stay valid
  // multiples, but with alignment 128 one of them is not.
  expect_refused(a.with_u32(align_at, 128), {"offset", "not a multiple of the alignment 128"});
}

// A config key missing, out of the parsers' range, or an architecture
// kvscope does not run: refused naming the file and the GGUF key.
void expect_config_refused(const std::string& bytes, const std::vector<std::string>& named) {
  testutil::TempDir tmp("gguf-config");
  const std::string path = tmp / "config.gguf";
  testutil::write_file(path, bytes);
  try {
    config_from_gguf(GgufFile::open(path));
    ADD_FAILURE() << "accepted; expected an error naming " << named[0];
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& n : named) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
}

TEST(GgufBadFiles, ConfigKeys) {
  const Good g("llama_config.gguf");
  std::string b = g.bytes;
  const uint64_t key = g.kv_field("llama.block_count", "key_at") + 8;
  b[key + std::string("llama.block_c").size()] = 'O';
  expect_config_refused(b, {"metadata \"llama.block_count\" is missing", "expected a non-negative integer"});
  expect_config_refused(g.with_u32(g.kv_field("llama.block_count", "value_at"), 0),
                        {"num_hidden_layers", "out of range", "GGUF metadata llama.block_count"});
  expect_config_refused(g.with_u32(g.kv_field("llama.block_count", "type_at"), 8), {"llama.block_count"});
  b = g.bytes;
  b[g.kv_field("general.architecture", "value_at") + 8 + 4] = 'x';
  expect_config_refused(b, {"general.architecture", "\"llamx\"", "expected gpt2, llama or qwen2"});
  const Good gpt2("gpt2_config.gguf");
  expect_config_refused(gpt2.with_u32(gpt2.kv_field("gpt2.feed_forward_length", "value_at"), 65),
                        {"gpt2.feed_forward_length", "found 65"});
}

}  // namespace
}  // namespace kvscope
