// Minimal safetensors reader: header JSON + raw little-endian tensor bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/core/file_io.h"
#include "model/core/numeric.h"

namespace kvscope {

// "[768, 2304]": a tensor's shape as every loader's messages print it.
std::string shape_str(const std::vector<int64_t>& s);
// The precision a weight is kept at for its stored dtype ("F32", "F16",
// "BF16"); none for any other dtype (integers, F64, FP8).
std::optional<StoredType> weight_type(const std::string& dtype);

struct TensorInfo {
  std::string dtype;  // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

// Reads a whole .safetensors file; validates the header length, JSON,
// dtypes, shapes vs byte ranges, bounds and overlaps. Throws kvscope::Error
// naming the file and tensor.
class SafeTensors {
 public:
  // `cancel`: see read_regular_file.
  static SafeTensors open(const std::string& path, const std::atomic<bool>* cancel = nullptr);
  static SafeTensors from_bytes(std::string bytes, const std::string& origin);
  // Reads only the header (validated as above against the file's size);
  // tensors are then read from the file one at a time (read_raw), so a
  // multi-GB checkpoint never sits in memory twice. Once `cancel` is set,
  // reads stop at the next 16 MiB chunk with "loading cancelled". A file of
  // at most `read_whole_up_to` bytes is read whole instead (as open does): a
  // small model then sits in memory twice while it loads.
  static constexpr uint64_t kReadWholeUpTo = uint64_t{64} << 20;
  static SafeTensors open_header(const std::string& path, const std::atomic<bool>* cancel = nullptr,
                                 uint64_t read_whole_up_to = kReadWholeUpTo);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Converts tensor `name` (F32/F16/BF16) to f32, row-major as stored.
  std::vector<float> to_f32(const std::string& name) const;
  // The tensor's bytes as stored (little-endian), into dst (end - begin
  // bytes); `on_chunk` is told the bytes of each chunk read (progress).
  void read_raw(const std::string& name, void* dst, const std::function<void(uint64_t)>& on_chunk = {}) const;
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::string bytes_;                          // whole file (empty after open_header: read from file_)
  std::optional<ReadOnlyFile> file_;           // set by open_header
  const std::atomic<bool>* cancel_ = nullptr;  // open_header's
  uint64_t data_offset_ = 0;                   // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
};

// Parses and validates a header (the JSON text) for a file of `file_size` bytes.
std::map<std::string, TensorInfo> parse_safetensors_header(const char* header, uint64_t header_len, uint64_t file_size,
                                                           const std::string& origin);

}  // namespace kvscope
