#include "model/arch/safetensors.h"

#include "model/core/json_quote.h"
#include "model/core/numeric.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {
namespace {

// Bytes per element; 0 for a dtype we do not know.
size_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

uint64_t read_u64_le(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(i)]);
  return v;
}

}  // namespace

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::optional<StoredType> weight_type(const std::string& dtype) {
  if (dtype == "F32") return StoredType::kF32;
  if (dtype == "F16") return StoredType::kF16;
  if (dtype == "BF16") return StoredType::kBF16;
  return std::nullopt;
}

SafeTensors SafeTensors::open(const std::string& path, const std::atomic<bool>* cancel) {
  // Straight into one buffer of the file's size (a stringstream would hold
  // a second copy of a possibly multi-GB file).
  return from_bytes(read_regular_file(path, "a model.safetensors file", cancel), path);
}

namespace {

uint64_t check_header_length(const std::string& first8, uint64_t size, const std::string& origin) {
  if (size < 8) {
    throw Error(origin + ": truncated safetensors file: " + std::to_string(size) +
                " bytes, expected at least 8 (the header length)");
  }
  const uint64_t header_len = read_u64_le(first8);
  // The format's own bound (the reference reader refuses longer headers): a
  // damaged length never asks for gigabytes of memory.
  constexpr uint64_t kMaxHeader = 100'000'000;
  if (header_len > kMaxHeader && header_len <= size - 8) {
    throw Error(origin + ": safetensors header length " + std::to_string(header_len) +
                " is over the format's limit of " + std::to_string(kMaxHeader) + " bytes");
  }
  if (header_len > size - 8) {
    throw Error(origin + ": safetensors header length " + std::to_string(header_len) + " runs past the end of the " +
                std::to_string(size) + "-byte file (expected at most " + std::to_string(size - 8) + ")");
  }
  return header_len;
}

}  // namespace

SafeTensors SafeTensors::from_bytes(std::string bytes, const std::string& origin) {
  SafeTensors st;
  st.origin_ = origin;
  const uint64_t header_len = check_header_length(bytes, bytes.size(), origin);
  st.tensors_ = parse_safetensors_header(bytes.data() + 8, header_len, bytes.size(), origin);
  st.data_offset_ = 8 + header_len;
  st.bytes_ = std::move(bytes);
  return st;
}

SafeTensors SafeTensors::open_header(const std::string& path, const std::atomic<bool>* cancel,
                                     uint64_t read_whole_up_to) {
  ReadOnlyFile file = ReadOnlyFile::open(path, "a .safetensors file");
  const uint64_t size = file.size();
  // A small file is read whole (16 MiB a read): in the page every read is a
  // call to the page's thread that waits for the frame it is drawing, and a
  // small model's tensors would cost one each (kvscope-tiny: 50 calls, about
  // a second). Its bytes are then held beside the weights until the load ends.
  if (size <= read_whole_up_to) {
    std::string bytes(static_cast<size_t>(size), '\0');
    file.read(0, size, bytes.data(), cancel);
    return from_bytes(std::move(bytes), path);
  }
  std::string first8(8, '\0');
  file.read(0, std::min<uint64_t>(8, size), first8.data());
  const uint64_t header_len = check_header_length(first8, size, path);
  std::string header(header_len, '\0');
  file.read(8, header_len, header.data(), cancel);
  SafeTensors st;
  st.origin_ = path;
  st.file_ = std::move(file);
  st.cancel_ = cancel;
  st.tensors_ = parse_safetensors_header(header.data(), header_len, static_cast<uint64_t>(size), path);
  st.data_offset_ = 8 + header_len;
  return st;
}

std::map<std::string, TensorInfo> parse_safetensors_header(const char* text, uint64_t header_len, uint64_t size,
                                                           const std::string& origin) {
  std::map<std::string, TensorInfo> tensors;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + header_len);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw Error(origin + ": safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(origin + ": safetensors header must be a JSON object");
  const uint64_t data_size = size - 8 - header_len;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const auto& e = it.value();
    const std::string where = origin + ": tensor \"" + name + "\"";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2) {
      throw Error(where + ": expected {\"dtype\": str, \"shape\": [..], \"data_offsets\": [begin, end]}");
    }
    TensorInfo info;
    info.dtype = e["dtype"].get<std::string>();
    const size_t esize = dtype_size(info.dtype);
    if (esize == 0) throw Error(where + ": unknown dtype \"" + info.dtype + "\"");
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) throw Error(where + ": shape must hold non-negative integers, got " + json_quote(d));
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 40) || (dim && numel > (1ull << 40) / dim)) throw Error(where + ": shape is too large");
      info.shape.push_back(static_cast<int64_t>(dim));
      numel *= dim;
    }
    for (const auto& o : e["data_offsets"]) {
      if (!o.is_number_unsigned()) throw Error(where + ": data_offsets must be non-negative integers");
    }
    info.begin = e["data_offsets"][0].get<uint64_t>();
    info.end = e["data_offsets"][1].get<uint64_t>();
    if (info.begin > info.end || info.end > data_size) {
      throw Error(where + ": byte range [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
                  ") is outside the data section of " + std::to_string(data_size) + " bytes");
    }
    if (info.end - info.begin != numel * esize) {
      throw Error(where + ": byte range [" + std::to_string(info.begin) + ", " + std::to_string(info.end) + ") holds " +
                  std::to_string(info.end - info.begin) + " bytes, expected " + std::to_string(numel * esize) +
                  " for " + info.dtype + " " + shape_str(info.shape));
    }
    tensors[name] = info;
  }

  // Tensors must not share bytes.
  std::vector<std::pair<const std::string*, const TensorInfo*>> by_begin;
  for (const auto& kv : tensors) by_begin.emplace_back(&kv.first, &kv.second);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  // Sorted by begin, a non-empty range overlaps an earlier one iff it starts
  // before the furthest end seen so far (empty ranges hold no bytes).
  const std::pair<const std::string*, const TensorInfo*>* furthest = nullptr;
  for (const auto& cur_entry : by_begin) {
    const TensorInfo* cur = cur_entry.second;
    if (cur->end == cur->begin) continue;
    if (furthest && cur->begin < furthest->second->end) {
      const TensorInfo* prev = furthest->second;
      throw Error(origin + ": tensors \"" + *furthest->first + "\" [" + std::to_string(prev->begin) + ", " +
                  std::to_string(prev->end) + ") and \"" + *cur_entry.first + "\" [" + std::to_string(cur->begin) +
                  ", " + std::to_string(cur->end) + ") overlap (expected disjoint byte ranges)");
    }
    if (!furthest || cur->end > furthest->second->end) furthest = &cur_entry;
  }
  return tensors;
}

void SafeTensors::read_raw(const std::string& name, void* dst, const std::function<void(uint64_t)>& on_chunk) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(origin_ + ": missing tensor \"" + name + "\"");
  const TensorInfo& t = it->second;
  const uint64_t nbytes = t.end - t.begin;
  if (nbytes == 0) return;
  if (!file_) {
    std::memcpy(dst, bytes_.data() + data_offset_ + t.begin, nbytes);
    if (on_chunk) on_chunk(nbytes);
    return;
  }
  // In chunks, so a cancelled load stops within one chunk of a multi-GB tensor.
  file_->read(data_offset_ + t.begin, nbytes, dst, cancel_, on_chunk, "tensor \"" + name + "\"");
}

std::vector<float> SafeTensors::to_f32(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(origin_ + ": missing tensor \"" + name + "\"");
  const TensorInfo& t = it->second;
  const uint64_t nbytes = t.end - t.begin;
  std::string lazy;
  if (file_) {
    lazy.resize(nbytes);
    read_raw(name, lazy.data());
  }
  const char* p = !file_ ? bytes_.data() + data_offset_ + t.begin : lazy.data();
  std::vector<float> out;
  if (t.dtype == "F32") {
    out.resize(nbytes / 4);
    if (nbytes) std::memcpy(out.data(), p, nbytes);  // an empty vector's data() may be null
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    out.resize(nbytes / 2);
    const bool half = t.dtype == "F16";
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = half ? f16_to_f32(h) : bf16_to_f32(h);
    }
  } else if (t.dtype == "F64") {
    out.resize(nbytes / 8);
    for (size_t i = 0; i < out.size(); ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else {
    throw Error(origin_ + ": tensor \"" + name + "\" has dtype " + t.dtype + ", expected F32, F16 or BF16");
  }
  return out;
}

}  // namespace kvscope
