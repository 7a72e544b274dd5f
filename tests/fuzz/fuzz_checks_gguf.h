// The GGUF fuzz target's check (fuzz_gguf.cpp, tests/test_fuzz_regressions.cpp):
// GgufFile::from_bytes on arbitrary bytes, then every tensor decoded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_checks.h"
#include "model/arch/gguf.h"
#include "model/core/error.h"

namespace kvscope::fuzz {

// What must hold of an accepted file, re-derived from the file's bytes and the
// format's rules rather than from the reader's own checks.
inline std::string check_gguf_layout(const GgufFile& f, const std::string& bytes) {
  if (bytes.size() < 24 || bytes.compare(0, 4, "GGUF") != 0) return "accepted a file without the GGUF header";
  const uint64_t a = f.alignment();
  if (a == 0 || (a & (a - 1)) != 0) return "accepted alignment " + std::to_string(a);
  if (f.data_offset() % a != 0) return "data section not aligned";
  std::set<std::string> keys, names;
  for (const auto& [k, v] : f.metadata()) {
    if (!keys.insert(k).second) return "accepted duplicate key " + k;
    (void)v.summary();  // every value lists without throwing
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const uint64_t data_size = bytes.size() > f.data_offset() ? bytes.size() - f.data_offset() : 0;
  for (const GgufTensor& t : f.tensors()) {
    if (!names.insert(t.name).second) return "accepted duplicate tensor " + t.name;
    if (t.name.size() > 64 || t.dims.empty() || t.dims.size() > 4) return "tensor " + t.name + ": name or dims";
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    unsigned __int128 n = 1;
    for (int64_t d : t.dims) {
      if (d < 0) return "tensor " + t.name + ": negative dim";
      n *= static_cast<uint64_t>(d);
    }
    if (n != static_cast<unsigned __int128>(t.n_elements)) return "tensor " + t.name + ": element count";
    if (t.dims[0] % info.block_size != 0) return "tensor " + t.name + ": partial block";
    if (t.n_bytes != static_cast<uint64_t>(t.n_elements / info.block_size) * info.block_bytes)
      return "tensor " + t.name + ": byte count";
    if (t.offset % a != 0 || t.offset > data_size || t.n_bytes > data_size - t.offset)
      return "tensor " + t.name + ": bytes outside the data section";
    if (t.n_bytes > 0) ranges.emplace_back(t.offset, t.offset + t.n_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return "accepted tensors that share bytes";
  return "";
}

inline std::string check_gguf(const std::string& bytes) {
  std::unique_ptr<GgufFile> f;
  try {
    f = std::make_unique<GgufFile>(GgufFile::from_bytes(bytes, "fuzz.gguf"));
  } catch (const Error& e) {
    if (std::string(e.what()).find("fuzz.gguf") == std::string::npos)
      return std::string("error message does not name the file: ") + e.what();
    return "";
  } catch (const std::exception& e) {
    return std::string("from_bytes threw a non-kvscope exception: ") + e.what();
  }
  if (std::string err = check_gguf_layout(*f, bytes); !err.empty()) return err;
  // Every tensor decodes to its element count; F32/F16/BF16 values equal the
  // stored ones (F16 through the independent decoder above).
  for (const GgufTensor& t : f->tensors()) {
    const std::vector<float> v = f->to_f32(t.name);
    if (v.size() != static_cast<size_t>(t.n_elements)) return "tensor " + t.name + ": decoded size";
    const char* p = bytes.data() + f->data_offset() + t.offset;
    for (size_t i = 0; i < v.size() && ggml_type_info(t.type).block_size == 1; ++i) {
      uint16_t h = 0;
      float want = 0;
      if (t.type == GgmlType::kF32) {
        std::memcpy(&want, p + 4 * i, 4);
      } else {
        std::memcpy(&h, p + 2 * i, 2);
        want = t.type == GgmlType::kF16 ? ref_f16(h) : bf16_to_f32(h);
      }
      if (!same_float(v[i], want)) return "tensor " + t.name + ": value " + std::to_string(i) + " differs";
    }
  }
  return "";
}

}  // namespace kvscope::fuzz
