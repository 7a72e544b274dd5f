#include "model/arch/gguf.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/core/error.h"

namespace kvscope {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;  // the format's limit on a key
constexpr uint64_t kMaxNameBytes = 64;    // ... and on a tensor name
constexpr uint32_t kMaxDims = 4;          // ggml's tensors have at most 4 dims
// The fewest bytes a metadata entry takes (a 1-byte key and a u8 value) and a
// tensor info (an empty name, no dims), so a count can be checked against
// what is left of the file before anything is allocated for it.
constexpr uint64_t kMinEntryBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%s%02x", i ? " " : "", p[i]);
    s += b;
  }
  return s;
}

// Reads the header's fields in order, from a file (through a window of up to
// 4 MiB, refilled as the position passes it) or from bytes in memory. A read
// past the end of the file throws, naming the field it was for.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& origin) : origin_(origin), size_(bytes.size()), view_(bytes) {}
  Cursor(const ReadOnlyFile& file, const std::atomic<bool>* cancel)
      : origin_(file.path()), size_(file.size()), file_(&file), cancel_(cancel) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // The next n bytes (n <= kWindow), valid until the next call.
  const uint8_t* take(uint64_t n, const std::string& field) {
    need(n, field);
    if (!file_) {
      const auto* p = reinterpret_cast<const uint8_t*>(view_.data()) + pos_;
      pos_ += n;
      return p;
    }
    if (pos_ < window_start_ || pos_ + n > window_start_ + window_.size()) {
      window_.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, size_ - pos_)));
      file_->read(pos_, window_.size(), window_.data(), cancel_, {}, field);
      window_start_ = pos_;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(window_.data()) + (pos_ - window_start_);
    pos_ += n;
    return p;
  }

  // Appends the next n bytes (any n the file still holds) to `out`.
  void append(std::string& out, uint64_t n, const std::string& field) {
    need(n, field);
    if (n > out.max_size() - out.size()) {  // (a 32-bit build: WebAssembly)
      throw Error(origin_ + ": " + field + ": " + std::to_string(n) + " bytes, more than this build can hold");
    }
    if (n <= kWindow) {
      const uint8_t* p = take(n, field);
      out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
      return;
    }
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    if (file_) {
      file_->read(pos_, n, out.data() + at, cancel_, {}, field);
    } else {
      std::memcpy(out.data() + at, view_.data() + pos_, static_cast<size_t>(n));
    }
    pos_ += n;
  }

  uint64_t u64(const std::string& field) { return little_endian(take(8, field), 8); }
  uint32_t u32(const std::string& field) { return static_cast<uint32_t>(little_endian(take(4, field), 4)); }

 private:
  static constexpr uint64_t kWindow = uint64_t{4} << 20;

  static uint64_t little_endian(const uint8_t* p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      throw Error(origin_ + ": truncated GGUF file: " + field + " needs " + std::to_string(n) + " bytes at byte " +
                  std::to_string(pos_) + ", but the file ends at byte " + std::to_string(size_));
    }
  }

  const std::string& origin_;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  std::string_view view_;
  const ReadOnlyFile* file_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  std::string window_;
  uint64_t window_start_ = 0;
};

}  // namespace

// Reads a whole header into a GgufFile, checking each field as it comes.
class GgufParser {
 public:
  GgufParser(GgufFile& f, Cursor& c) : f_(f), c_(c) {}

  void parse() {
    read_preamble();
    for (uint64_t i = 0; i < n_kv_; ++i) read_entry(i);
    read_alignment();
    check_count(n_tensors_, kMinTensorInfoBytes, "tensor count", "tensor infos");
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    place_data();
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(f_.origin_ + ": " + field + ": " + what);
  }

  void read_preamble() {
    const uint8_t* magic = c_.take(4, "the magic number (expected a GGUF file)");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      fail("magic number",
           "expected \"GGUF\" (47 47 55 46), found " + hex_bytes(magic, 4) + ": this is not a GGUF file");
    }
    const uint32_t version = c_.u32("version");
    if (version != kVersion) {
      std::string why = "found " + std::to_string(version) + ", expected 3";
      if (version == 1 || version == 2) {
        why += " (GGUF v1 and v2 files are not supported: convert the model again with a current llama.cpp)";
      } else if (version == 0x03000000u) {
        why += " (this looks like a big-endian GGUF file; only little-endian files are supported)";
      }
      fail("version", why);
    }
    n_tensors_ = c_.u64("tensor count");
    n_kv_ = c_.u64("metadata count");
    check_count(n_kv_, kMinEntryBytes, "metadata count", "metadata entries");
    check_count(n_tensors_, kMinTensorInfoBytes, "tensor count", "tensor infos");
  }

  // A count of things each at least `min_bytes` long must fit in what is left.
  void check_count(uint64_t n, uint64_t min_bytes, const std::string& field, const char* things) const {
    if (n > c_.remaining() / min_bytes) {
      fail(field, "found " + std::to_string(n) + ", but the " + std::to_string(c_.remaining()) +
                      " bytes left in the file hold at most " + std::to_string(c_.remaining() / min_bytes) + " " +
                      things + " of at least " + std::to_string(min_bytes) +
                      " bytes each (a damaged count, or a truncated file)");
    }
  }

  // A u64 length followed by that many bytes, appended to `out`.
  uint64_t read_string(std::string& out, const std::string& field, uint64_t max_bytes) {
    const uint64_t n = c_.u64(field + " length");
    if (n > c_.remaining() && n <= max_bytes) {
      fail(field + " length", "found " + std::to_string(n) + ", but only " + std::to_string(c_.remaining()) +
                                  " bytes are left in the file (a damaged length, or a truncated file)");
    }
    if (n > max_bytes) {
      fail(field + " length",
           "found " + std::to_string(n) + ", expected at most " + std::to_string(max_bytes) + " bytes");
    }
    c_.append(out, n, field);
    return n;
  }

  GgufValueType read_type(const std::string& field) {
    const uint32_t t = c_.u32(field);
    if (t > static_cast<uint32_t>(GgufValueType::kF64)) {
      fail(field, "found " + std::to_string(t) +
                      ", expected 0 to 12 (u8, i8, u16, i16, u32, i32, f32, bool, string, array, u64, i64, f64)");
    }
    return static_cast<GgufValueType>(t);
  }

  void read_entry(uint64_t i) {
    std::string key;
    const std::string where = "metadata entry " + std::to_string(i);
    read_string(key, where + " key", kMaxKeyBytes);
    if (key.empty()) fail(where + " key", "found an empty key, expected a name such as general.architecture");
    const std::string field = "metadata " + gguf_quote(key);
    if (const auto it = f_.key_index_.find(key); it != f_.key_index_.end()) {
      fail(field, "the key appears twice (entries " + std::to_string(it->second) + " and " + std::to_string(i) +
                      "), expected each key once");
    }
    f_.key_index_.emplace(key, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(key), read_value(field));
  }

  GgufValue read_value(const std::string& field) {
    GgufValue v;
    v.type = read_type(field + " value type");
    if (v.type == GgufValueType::kArray) {
      v.is_array = true;
      v.type = read_type(field + " array element type");
      if (v.type == GgufValueType::kArray) {
        fail(field + " array element type",
             "found 9 (array), expected a scalar type: arrays of arrays are not supported");
      }
      v.count = c_.u64(field + " array length");
      // (a string takes at least its 8-byte length)
      const int min_bytes = v.type == GgufValueType::kString ? 8 : gguf_scalar_bytes(v.type);
      check_count(v.count, static_cast<uint64_t>(min_bytes), field + " array length",
                  (std::string(to_string(v.type)) + " elements").c_str());
    }
    if (v.type == GgufValueType::kString) {
      v.string_ends.reserve(static_cast<size_t>(v.count));  // <= remaining / 8 entries of 8 bytes
      for (uint64_t k = 0; k < v.count; ++k) {
        read_string(v.bytes, v.is_array ? field + " element " + std::to_string(k) : field,
                    std::numeric_limits<uint64_t>::max());
        v.string_ends.push_back(v.bytes.size());
      }
      return v;
    }
    c_.append(v.bytes, v.count * static_cast<uint64_t>(gguf_scalar_bytes(v.type)), field + " value");
    if (v.type == GgufValueType::kBool) {
      for (uint64_t k = 0; k < v.count; ++k) {
        const auto b = static_cast<unsigned char>(v.bytes[static_cast<size_t>(k)]);
        if (b > 1) {
          fail(field + (v.is_array ? " element " + std::to_string(k) : ""),
               "found " + std::to_string(b) + ", expected a bool (0 or 1)");
        }
      }
    }
    return v;
  }

  void read_alignment() {
    f_.alignment_ = kDefaultAlignment;
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    const std::string field = "metadata \"general.alignment\"";
    if (v->is_array || v->type != GgufValueType::kU32) {
      fail(field, std::string("expected a u32, found ") + (v->is_array ? "an array of " : "") + to_string(v->type));
    }
    const uint64_t a = v->uint_at(0);
    if (a == 0 || (a & (a - 1)) != 0) fail(field, "found " + std::to_string(a) + ", expected a power of two");
    f_.alignment_ = a;
  }

  void read_tensor_info(uint64_t i) {
    GgufTensor t;
    const std::string where = "tensor " + std::to_string(i);
    read_string(t.name, where + " name", kMaxNameBytes);
    const std::string field = "tensor " + gguf_quote(t.name);
    if (const auto it = f_.tensor_index_.find(t.name); it != f_.tensor_index_.end()) {
      fail(field, "the name appears twice (tensors " + std::to_string(it->second) + " and " + std::to_string(i) +
                      "), expected each name once");
    }
    const uint32_t n_dims = c_.u32(field + " n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) {
      fail(field + " n_dims", "found " + std::to_string(n_dims) + ", expected 1 to " + std::to_string(kMaxDims));
    }
    read_dims(t, n_dims, field);
    const uint32_t type = c_.u32(field + " type");
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (!info) fail(field + " type", unreadable_type(type));
    t.type = info->type;
    if (t.dims[0] % info->block_size != 0) {
      fail(field + " dims[0]", "the row length " + std::to_string(t.dims[0]) + " is not a multiple of " + info->name +
                                   "'s block of " + std::to_string(info->block_size) + " weights");
    }
    const uint64_t blocks = static_cast<uint64_t>(t.n_elements / info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->block_bytes)) {
      fail(field + " dims", "the tensor's byte count overflows 64 bits");
    }
    t.n_bytes = blocks * static_cast<uint64_t>(info->block_bytes);
    t.offset = c_.u64(field + " offset");
    if (t.offset % f_.alignment_ != 0) {
      fail(field + " offset", "found " + std::to_string(t.offset) + ", which is not a multiple of the alignment " +
                                  std::to_string(f_.alignment_) + " (misaligned tensor data)");
    }
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  void read_dims(GgufTensor& t, uint32_t n_dims, const std::string& field) {
    t.n_elements = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c_.u64(field + " dims[" + std::to_string(d) + "]");
      if (dim > uint64_t{std::numeric_limits<int64_t>::max()}) {
        fail(field + " dims[" + std::to_string(d) + "]", "found " + std::to_string(dim) + ", expected at most " +
                                                             std::to_string(std::numeric_limits<int64_t>::max()));
      }
      t.dims.push_back(static_cast<int64_t>(dim));
      const auto dim_s = static_cast<int64_t>(dim);
      if (dim_s != 0 && t.n_elements > std::numeric_limits<int64_t>::max() / dim_s) overflow = true;
      if (!overflow) t.n_elements *= dim_s;
    }
    if (overflow && std::find(t.dims.begin(), t.dims.end(), 0) == t.dims.end()) {
      std::string dims;
      for (size_t d = 0; d < t.dims.size(); ++d) dims += (d ? ", " : "") + std::to_string(t.dims[d]);
      fail(field + " dims", "[" + dims + "]: the element count overflows 64 bits");
    }
    if (overflow) t.n_elements = 0;  // a zero dim: an empty tensor
  }

  static std::string unreadable_type(uint32_t id) {
    std::string readable;
    for (const GgmlTypeInfo& t : ggml_readable_types()) readable += std::string(readable.empty() ? "" : ", ") + t.name;
    const std::string name = ggml_type_name(id);
    if (name == "unknown")
      return "found type id " + std::to_string(id) + ", which is no ggml type (expected " + readable + ")";
    return "found " + name + " (type id " + std::to_string(id) + "), which kvscope cannot read (expected " + readable +
           ")";
  }

  // The data section starts at the first multiple of the alignment after the
  // tensor infos; each tensor's bytes must lie inside it, none shared.
  void place_data() {
    const uint64_t a = f_.alignment_;
    f_.data_offset_ = (c_.pos() + a - 1) / a * a;
    const uint64_t data_size = c_.size() > f_.data_offset_ ? c_.size() - f_.data_offset_ : 0;
    std::vector<const GgufTensor*> by_offset;
    for (const GgufTensor& t : f_.tensors_) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        fail("tensor " + gguf_quote(t.name) + " offset",
             std::to_string(t.n_bytes) + " bytes at offset " + std::to_string(t.offset) +
                 " run past the end of the file: the data section (from byte " + std::to_string(f_.data_offset_) +
                 ") holds " + std::to_string(data_size) + " bytes");
      }
      if (t.n_bytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* x, const GgufTensor* y) { return x->offset < y->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const GgufTensor& prev = *by_offset[k - 1];
      const GgufTensor& cur = *by_offset[k];
      if (cur.offset < prev.offset + prev.n_bytes) {
        fail("tensor " + gguf_quote(cur.name) + " offset",
             "found " + std::to_string(cur.offset) + ", inside tensor " + gguf_quote(prev.name) + " (bytes " +
                 std::to_string(prev.offset) + " to " + std::to_string(prev.offset + prev.n_bytes) +
                 "); expected tensors not to share bytes");
      }
    }
  }

  GgufFile& f_;
  Cursor& c_;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
};

bool looks_like_gguf(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext == ".gguf") return true;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile GgufFile::open(const std::string& path, const std::atomic<bool>* cancel) {
  GgufFile f;
  f.origin_ = path;
  f.file_ = ReadOnlyFile::open(path, "a GGUF file");
  f.cancel_ = cancel;
  f.file_size_ = f.file_->size();
  Cursor c(*f.file_, cancel);
  GgufParser(f, c).parse();
  return f;
}

GgufFile GgufFile::from_bytes(std::string bytes, const std::string& origin) {
  GgufFile f;
  f.origin_ = origin;
  f.bytes_ = std::move(bytes);
  f.file_size_ = f.bytes_.size();
  Cursor c(f.bytes_, f.origin_);
  GgufParser(f, c).parse();
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// The value of `key` as `get` reads it; a missing key or a value of another
// type is an Error naming the file and the key.
template <class Get>
auto typed_meta(const GgufFile& f, const std::string& key, const char* expected, Get get) {
  const GgufValue* v = f.find(key);
  if (!v) throw Error(f.origin() + ": metadata " + gguf_quote(key) + " is missing (expected " + expected + ")");
  if (v->is_array) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": expected " + expected + ", found an array of " +
                to_string(v->type));
  }
  try {
    return get(*v);
  } catch (const Error& e) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": " + e.what());
  }
}

}  // namespace

uint64_t GgufFile::meta_uint(const std::string& key) const {
  return typed_meta(*this, key, "a non-negative integer", [](const GgufValue& v) { return v.uint_at(0); });
}

double GgufFile::meta_number(const std::string& key) const {
  return typed_meta(*this, key, "a number", [](const GgufValue& v) { return v.number_at(0); });
}

std::string GgufFile::meta_string(const std::string& key) const {
  return typed_meta(*this, key, "a string", [](const GgufValue& v) { return std::string(v.string_at(0)); });
}

void GgufFile::read_raw(const GgufTensor& t, void* dst) const {
  if (t.n_bytes == 0) return;
  if (file_) {
    file_->read(data_offset_ + t.offset, t.n_bytes, dst, cancel_, {}, "tensor " + gguf_quote(t.name));
  } else {
    std::memcpy(dst, bytes_.data() + data_offset_ + t.offset, static_cast<size_t>(t.n_bytes));
  }
}

std::vector<float> GgufFile::to_f32(const std::string& name) const {
  const GgufTensor* t = tensor(name);
  if (!t) throw Error(origin_ + ": missing tensor " + gguf_quote(name));
  if (t->n_bytes > std::vector<uint8_t>().max_size() ||
      static_cast<uint64_t>(t->n_elements) > std::vector<float>().max_size()) {  // (a 32-bit build)
    throw Error(origin_ + ": tensor " + gguf_quote(name) + " is larger than this build can hold in memory");
  }
  std::vector<uint8_t> raw(static_cast<size_t>(t->n_bytes));
  read_raw(*t, raw.data());
  std::vector<float> out(static_cast<size_t>(t->n_elements));
  dequantize_row(t->type, raw.data(), t->n_elements, out.data());
  return out;
}

}  // namespace kvscope
