// One weight matrix of either model family, kept at its checkpoint's
// precision: F32 stays f32, F16 and BF16 stay 16-bit (no f32 copy), so every
// forward reads each weight once at its stored width. One exception, the
// WebAssembly build's small models (keep_wide below).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/core/numeric.h"

namespace kvscope {

// Where the AVX-512 kernels run (linear_kernels.cpp), the loaders store each
// matrix as panels of kPanelRows rows, interleaved by column: panel p holds
// rows [32 p, 32 p + m), m = min(32, rows - 32 p), as (cols, m), so element
// (r, c) is at 32 p cols + c m + r - 32 p. The same bytes as row-major, in
// another order: one product step loads the 32 rows' weights of one column in
// one read and multiplies them by one broadcast input value for each
// position, so a batch of positions costs few loads per multiply-add and no
// horizontal sums, and the panel is one sequential stream from memory.
constexpr int64_t kPanelRows = 32;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
constexpr bool kPanelWeights = true;
#else
constexpr bool kPanelWeights = false;
#endif

// Index of element (r, c) of a (rows, cols) matrix stored as panels.
inline size_t panel_index(int64_t r, int64_t c, int64_t rows, int64_t cols) {
  const int64_t p0 = r / kPanelRows * kPanelRows, m = std::min(kPanelRows, rows - p0);
  return static_cast<size_t>(p0 * cols + c * m + (r - p0));
}

// A (rows, cols) matrix in its stored dtype, row-major or as panels.
struct WeightMatrix {
  StoredType type = StoredType::kF32;
  int64_t rows = 0, cols = 0;
  bool panels = false;         // the layout of f32 / half: row-major, or panels (above)
  std::vector<float> f32;      // (rows, cols) when type == kF32
  std::vector<uint16_t> half;  // (rows, cols) IEEE binary16 or bfloat16 otherwise
  // (rows, cols) an f32 copy of `half`, kept only where keep_wide() said so:
  // the products read it instead (linear.cpp). bytes() and the counters
  // still count the stored dtype, which the model's file holds.
  std::vector<float> wide;

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

  // Reorders a row-major matrix into panels where kPanelWeights holds (the
  // loaders call it once per matrix; a no-op elsewhere and when done).
  void to_panels();

  // Fills `wide` from `half` (exact) when keep_wide(stored_bytes) holds.
  void widen_if(uint64_t model_stored_bytes);
};

// WebAssembly SIMD128 has no f16 conversion: converting every weight on each
// step (4 integer/float operations per 4 weights) costs more than reading
// f32 from cache for a cache-sized model, so the page keeps f32 copies of a
// 16-bit model whose weights take at most this many bytes in its file (the
// embedded kvscope-tiny: 7.6 MB of copies beside 3.8 MB of f16; at most
// 128 MiB, which the loaders' memory check does not count). Larger models
// (memory-bound) stay 16-bit. Native builds convert in registers (F16C,
// AVX-512) and never keep copies.
constexpr uint64_t kWideMaxStoredBytes = 64ull << 20;
constexpr bool keep_wide(uint64_t model_stored_bytes) {
#ifdef __wasm__
  return model_stored_bytes <= kWideMaxStoredBytes;
#else
  static_cast<void>(model_stored_bytes);
  return false;
#endif
}

}  // namespace kvscope
