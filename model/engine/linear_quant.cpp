// quant_rows (linear_quant.h): the portable direct kernel, the decoded-rows
// path for many positions, and the choice between them. The AVX2 kernels
// are in linear_quant_avx2.cpp.
#include "model/engine/linear_quant.h"

#include <algorithm>
#include <vector>

#include "model/engine/linear_kernels.h"

namespace kvscope {
namespace linear_detail {

namespace {
// One row's dot products with np <= kQuantDirectN positions: each block
// decoded once into `w` and multiplied with every position's inputs, in
// kLanes partial sums the compiler keeps in vector registers.
constexpr int kLanes = 8;

void portable_row(const GgmlTypeInfo& info, const uint8_t* row, int64_t cols, const float* X, int64_t np, int64_t ldx,
                  float* sums) {
  float w[256];  // one block (a K-quant's 256 weights at most)
  float acc[kQuantDirectN][kLanes] = {};
  const int bs = info.block_size;
  for (int64_t j = 0; j < cols / bs; ++j) {
    dequantize_row(info.type, row + j * info.block_bytes, bs, w);
    for (int64_t p = 0; p < np; ++p) {
      const float* x = X + p * ldx + j * bs;
      for (int k = 0; k < bs; k += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[p][l] += w[k + l] * x[k + l];
    }
  }
  for (int64_t p = 0; p < np; ++p) {
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[p][l];
    sums[p] = s;
  }
}
}  // namespace

void quant_rows_portable(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y,
                         int64_t ldy, int64_t r0, int64_t r1) {
  const GgmlTypeInfo& info = ggml_type_info(W.type);
  float sums[kQuantDirectN];
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t p0 = 0; p0 < n; p0 += kQuantDirectN) {
      const int64_t np = std::min(kQuantDirectN, n - p0);
      portable_row(info, W.blocks + r * W.row_bytes, W.cols, X + p0 * ldx, np, ldx, sums);
      for (int64_t p = 0; p < np; ++p) Y[(p0 + p) * ldy + r] = sums[p] + (b ? b[r] : 0.0f);
    }
}

#if !(defined(__AVX2__) && defined(__FMA__))
void quant_rows_avx2(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                     int64_t r0, int64_t r1) {
  quant_rows_portable(W, X, n, ldx, b, Y, ldy, r0, r1);
}

void quant_decode_row(GgmlType type, const uint8_t* row, int64_t cols, float* out) {
  dequantize_row(type, row, cols, out);
}
#endif

}  // namespace linear_detail

namespace {
// Many positions: blocks of kLinearRowBlock rows (starting at multiples of
// it, so the split does not change the result) decoded into f32 once and
// handed to the f32 row kernels.
void decoded_rows(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  thread_local std::vector<float> scratch;  // (m, cols) row-major
  for (int64_t r = r0; r < r1;) {
    const int64_t m = std::min(r1, (r / kLinearRowBlock + 1) * kLinearRowBlock) - r;
    scratch.resize(static_cast<size_t>(m * W.cols));
    for (int64_t i = 0; i < m; ++i)
      linear_detail::quant_decode_row(W.type, W.blocks + (r + i) * W.row_bytes, W.cols, scratch.data() + i * W.cols);
    const WeightView view{StoredType::kF32, scratch.data(), m, W.cols, 0, false};
    linear_rows(view, X, n, ldx, b ? b + r : nullptr, Y + r, ldy, 0, m);
    r += m;
  }
}
}  // namespace

void quant_rows(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                int64_t r0, int64_t r1) {
  if (n <= 0 || r1 <= r0) return;
  if (n > kQuantDirectN) return decoded_rows(W, X, n, ldx, b, Y, ldy, r0, r1);
  if (linear_detail::kQuantAvx2) return linear_detail::quant_rows_avx2(W, X, n, ldx, b, Y, ldy, r0, r1);
  linear_detail::quant_rows_portable(W, X, n, ldx, b, Y, ldy, r0, r1);
}

}  // namespace kvscope
