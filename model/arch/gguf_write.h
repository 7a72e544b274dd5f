// GGUF v3 writer: metadata and tensors into the bytes of a file that
// llama.cpp's gguf-py and kvscope's reader (gguf.h) read back. Layout as
// gguf.h describes it: header, metadata, tensor infos, zeros up to
// general.alignment, then each tensor's bytes at an offset that is a
// multiple of the alignment (zeros between tensors).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/arch/gguf.h"

namespace kvscope {

class GgufWriter {
 public:
  // `alignment`: a power of two; written as general.alignment (u32) first.
  explicit GgufWriter(uint32_t alignment = 32);

  // Metadata, in the order added (a key added twice is a std::logic_error).
  void add(const std::string& key, GgufValue value);
  void add_string(const std::string& key, const std::string& v);
  void add_u32(const std::string& key, uint32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_i32s(const std::string& key, const std::vector<int32_t>& v);
  void add_f32s(const std::string& key, const std::vector<float>& v);

  // A tensor: `dims` in ggml order (row length first), `bytes` its blocks
  // (checked against dims and type: std::logic_error on a mismatch).
  void add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type, std::vector<uint8_t> bytes);

  // The whole file.
  std::string build() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    std::vector<uint8_t> bytes;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> meta_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvscope
