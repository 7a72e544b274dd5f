#include "model/arch/gguf_write.h"

#include <cstring>
#include <stdexcept>

namespace kvscope {
namespace {

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (as the reader)
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

template <typename T>
GgufValue scalar(GgufValueType type, T v) {
  GgufValue g;
  g.type = type;
  g.bytes.resize(sizeof(T));
  std::memcpy(g.bytes.data(), &v, sizeof(T));
  return g;
}

template <typename T>
GgufValue array(GgufValueType type, const std::vector<T>& v) {
  GgufValue g;
  g.is_array = true;
  g.type = type;
  g.count = v.size();
  g.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(g.bytes.data(), v.data(), g.bytes.size());
  return g;
}

// One value as the file stores it after its type: a scalar's bytes, a
// string as u64 length + bytes, an array as element type, count, elements.
void put_value(std::string& out, const GgufValue& v) {
  if (v.is_array) {
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put<uint64_t>(out, v.count);
  }
  if (v.type != GgufValueType::kString) {
    out += v.bytes;
    return;
  }
  uint64_t begin = 0;
  for (uint64_t i = 0; i < v.count; ++i) {
    const uint64_t end = v.string_ends.empty() ? v.bytes.size() : v.string_ends[i];
    put_string(out, v.bytes.substr(begin, end - begin));
    begin = end;
  }
}

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw std::logic_error("GgufWriter: alignment must be a power of two");
  add_u32("general.alignment", alignment);
}

void GgufWriter::add(const std::string& key, GgufValue value) {
  for (const auto& [k, v] : meta_)
    if (k == key) throw std::logic_error("GgufWriter: key " + key + " added twice");
  meta_.emplace_back(key, std::move(value));
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  GgufValue g;
  g.type = GgufValueType::kString;
  g.bytes = v;
  g.string_ends = {v.size()};
  add(key, std::move(g));
}
void GgufWriter::add_u32(const std::string& key, uint32_t v) {
  add(key, scalar(GgufValueType::kU32, v));
}
void GgufWriter::add_f32(const std::string& key, float v) {
  add(key, scalar(GgufValueType::kF32, v));
}
void GgufWriter::add_bool(const std::string& key, bool v) {
  add(key, scalar<uint8_t>(GgufValueType::kBool, v ? 1 : 0));
}
void GgufWriter::add_i32s(const std::string& key, const std::vector<int32_t>& v) {
  add(key, array(GgufValueType::kI32, v));
}
void GgufWriter::add_f32s(const std::string& key, const std::vector<float>& v) {
  add(key, array(GgufValueType::kF32, v));
}
void GgufWriter::add_strings(const std::string& key, const std::vector<std::string>& v) {
  GgufValue g;
  g.is_array = true;
  g.type = GgufValueType::kString;
  g.count = v.size();
  for (const std::string& s : v) {
    g.bytes += s;
    g.string_ends.push_back(g.bytes.size());
  }
  add(key, std::move(g));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                            std::vector<uint8_t> bytes) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  if (dims.empty() || dims[0] % info.block_size != 0 ||
      bytes.size() != n / static_cast<uint64_t>(info.block_size) * static_cast<uint64_t>(info.block_bytes))
    throw std::logic_error("GgufWriter: tensor " + name + " bytes do not match its dims and type");
  tensors_.push_back({name, std::move(dims), type, std::move(bytes)});
}

std::string GgufWriter::build() const {
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, meta_.size());
  for (const auto& [key, v] : meta_) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(v.is_array ? GgufValueType::kArray : v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += align_up(t.bytes.size(), alignment_);
  }
  const uint64_t data = align_up(out.size(), alignment_);
  out.reserve(data + offset);
  out.resize(data, '\0');
  for (const Tensor& t : tensors_) {
    out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    out.resize(align_up(out.size() - data, alignment_) + data, '\0');
  }
  return out;
}

}  // namespace kvscope
