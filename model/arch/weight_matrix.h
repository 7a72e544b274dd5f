// One weight matrix of either model family, kept at its checkpoint's
// precision: F32 stays f32, F16 and BF16 stay 16-bit (no f32 copy), so every
// forward reads each weight once at its stored width.
#pragma once

#include <cstdint>
#include <vector>

#include "model/core/numeric.h"

namespace kvscope {

// A (rows, cols) row-major matrix in its stored dtype.
struct WeightMatrix {
  StoredType type = StoredType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<float> f32;      // (rows, cols) when type == kF32
  std::vector<uint16_t> half;  // (rows, cols) IEEE binary16 or bfloat16 otherwise

  bool empty() const { return rows == 0; }
  uint64_t bytes() const { return type == StoredType::kF32 ? f32.size() * 4ull : half.size() * 2ull; }
  const void* data() const {
    return type == StoredType::kF32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(half.data());
  }
  // Element (r, c) as f32.
  float at(int64_t r, int64_t c) const;
  // Row r as f32 (an embedding lookup).
  void row_to_f32(int64_t r, float* out) const;
  // Rows [r0, r1) as f32, (r1 - r0, cols) row-major.
  void rows_to_f32(int64_t r0, int64_t r1, float* out) const;

  // From f32 values (rows, cols) row-major that `type` holds exactly (they
  // were read from a tensor of that dtype); `transpose` stores the
  // (cols, rows) transpose instead (GPT-2's Conv1D weights, stored (in, out)).
  static WeightMatrix from_f32(const float* v, int64_t rows, int64_t cols, StoredType type, bool transpose = false);
};

}  // namespace kvscope
