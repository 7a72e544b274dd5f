// GGUF v3 reader (the format of llama.cpp, Ollama and LM Studio models):
//
//   "GGUF"  u32 version (3)  u64 tensor_count  u64 metadata_kv_count
//   metadata_kv_count x { string key, u32 value_type, value }
//   tensor_count x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then the data section:
//   each tensor's blocks at data start + offset (a multiple of the alignment).
//
// A string is a u64 byte length and that many bytes (no terminator); an
// array is a u32 element type, a u64 count and the elements. All numbers are
// little-endian. Every field is checked against the file's size before
// anything is allocated for it; a bad file gets a kvscope::Error naming the
// file, the field, and what was expected against what was found.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/arch/gguf_types.h"
#include "model/core/file_io.h"

namespace kvscope {

// A metadata value's type, as the file stores it (u32).
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* to_string(GgufValueType t);  // "u32", "string", "array", ...
// Bytes of one number or bool of type t (1, 2, 4 or 8); 0 for string, array.
int gguf_scalar_bytes(GgufValueType t);
// A key, name or string value as messages and listings show it: in double
// quotes, printable ASCII and whole UTF-8 characters as themselves, every
// other byte (and quote, backslash) as \xNN, so the text is valid UTF-8 and
// reads one way; cut after at most `max_bytes` bytes with "...".
std::string gguf_quote(std::string_view s, size_t max_bytes = 80);

// One metadata value: a scalar, or an array of scalars of one type (an array
// of arrays is refused). Numbers and bools keep their stored little-endian
// bytes, strings their texts back to back, so a 150 000-token vocabulary
// costs about what it takes in the file.
struct GgufValue {
  bool is_array = false;
  GgufValueType type = GgufValueType::kU8;  // the scalar's type, or the array's element type
  uint64_t count = 1;                       // elements (1 for a scalar)
  std::string bytes;                        // numbers/bools: count x element size; strings: the texts
  std::vector<uint64_t> string_ends;        // strings: element i is bytes[end(i-1), end(i))

  bool is_integer() const;  // u8 ... i64 (not bool)
  bool is_float() const;    // f32, f64
  // Element i (0 for a scalar). Each throws kvscope::Error (naming nothing:
  // callers add the file and key) when the type does not fit: int_at takes
  // any integer type and refuses a u64 above INT64_MAX; number_at takes any
  // integer or float type.
  int64_t int_at(uint64_t i = 0) const;
  uint64_t uint_at(uint64_t i = 0) const;  // any integer type, refusing negatives
  double number_at(uint64_t i = 0) const;
  bool bool_at(uint64_t i = 0) const;
  std::string_view string_at(uint64_t i = 0) const;
  // "u32 12", "string \"llama\"", "array of 49152 string" (for listings).
  std::string summary() const;
};

// One tensor's info. dims are in ggml's order: dims[0] is the row length
// (contiguous weights), so a PyTorch [out, in] matrix is stored as
// dims [in, out], e.g. token_embd.weight [n_embd, n_vocab].
struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // 1 to 4 entries, each >= 0
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;     // from the data section's start, a multiple of the alignment
  int64_t n_elements = 0;  // product of dims
  uint64_t n_bytes = 0;    // n_elements / block_size x block_bytes
  int64_t row_length() const { return dims[0]; }
};

// True when `path` is a regular file named *.gguf (any case) or starting with
// the GGUF magic (an Ollama blob has no extension). Reads at most 4 bytes.
bool looks_like_gguf(const std::string& path);

class GgufFile {
 public:
  // Reads and checks the header (metadata and tensor infos) from the file;
  // tensor data is read on demand (read_raw, to_f32). `cancel`: see
  // read_regular_file.
  static GgufFile open(const std::string& path, const std::atomic<bool>* cancel = nullptr);
  // The same for a file already in memory (tests, fuzzing); `origin` names it.
  static GgufFile from_bytes(std::string bytes, const std::string& origin);

  const std::string& origin() const { return origin_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section begins
  // In file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;

  // Typed metadata for the loaders: throw kvscope::Error naming the file and
  // the key when it is missing or of another type.
  uint64_t meta_uint(const std::string& key) const;
  double meta_number(const std::string& key) const;
  std::string meta_string(const std::string& key) const;

  // The tensor's blocks as stored (t.n_bytes bytes) into dst.
  void read_raw(const GgufTensor& t, void* dst) const;
  // The tensor decoded to f32: n_elements values, rows of dims[0].
  std::vector<float> to_f32(const std::string& name) const;

 private:
  friend class GgufParser;
  std::string origin_;
  uint64_t file_size_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> key_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::string bytes_;                          // the whole file (from_bytes), else empty
  std::optional<ReadOnlyFile> file_;           // open's
  const std::atomic<bool>* cancel_ = nullptr;  // open's
};

}  // namespace kvscope
