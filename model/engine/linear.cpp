#include "model/engine/linear.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model/core/error.h"
#include "model/engine/kernels.h"
#include "model/engine/linear_kernels.h"
#include "model/engine/linear_quant.h"

namespace kvscope {

namespace {
// WebAssembly (the page) has no AVX kernels: decode's portable matvec there
// converts each f16 weight through a function call in a scalar loop (~500x
// slower than native, docs/web.md); its weights are panels, which linear_rows
// multiplies with SIMD128 (linear_simd128.cpp).
#ifdef __wasm_simd128__
constexpr bool kMatvecForDecode = false;
#else
constexpr bool kMatvecForDecode = true;
#endif

// Quantized blocks (linear_quant.h): shares of whole kLinearRowBlock-row
// blocks, every block read once for all n positions.
void quant_products(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, float* Y) {
  const int64_t n = X.rows(), out = W.rows, in = W.cols;
  const QuantView view{ggml_type_of(W.type), W.blocks.data(), W.rows, W.cols, static_cast<int64_t>(W.row_bytes())};
  const int64_t blocks = (out + kLinearRowBlock - 1) / kLinearRowBlock;
  pool.parallel_for(
      blocks,
      [&](int64_t b0, int64_t b1) {
        quant_rows(view, X.data(), n, in, b, Y, out, b0 * kLinearRowBlock, std::min(out, b1 * kLinearRowBlock));
      },
      n * out * in);
}

// Y = X W^T + b at the weights' stored dtype (linear's checks done).
void stored_products(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, float* Y) {
  const int64_t n = X.rows(), out = W.rows, in = W.cols;
  if (is_quantized(W.type)) {
    if (n > 0) quant_products(pool, X, W, b, Y);
  } else if (n == 1 && kMatvecForDecode && !W.panels) {
    // Decode on row-major weights: the matrix-vector kernels (kernels.h),
    // split on rows; the f32 copy where one is kept (WeightMatrix::product_bytes
    // counts what is read).
    pool.parallel_for(
        out,
        [&](int64_t r0, int64_t r1) {
          if (!W.wide.empty()) return matvec_f32(W.wide.data(), in, X.data(), b, Y, r0, r1);
          switch (W.type) {
            case StoredType::kF32:
              return matvec_f32(W.f32.data(), in, X.data(), b, Y, r0, r1);
            case StoredType::kF16:
              return matvec_f16(W.half.data(), in, X.data(), b, Y, r0, r1);
            case StoredType::kBF16:
              return matvec_bf16(W.half.data(), in, X.data(), b, Y, r0, r1);
            default:
              return;  // quantized: quant_products
          }
        },
        out * in);
  } else if (n > 0) {
    // Several positions, decode on panels, and decode on WebAssembly: shares
    // of whole row blocks (whole panels), each weight read once for all n;
    // the f32 copy (in the stored layout) where one is kept.
    const WeightView view = W.wide.empty() ? WeightView{W.type, W.data(), W.rows, W.cols, 0, W.panels}
                                           : WeightView{StoredType::kF32, W.wide.data(), W.rows, W.cols, 0, W.panels};
    const int64_t blocks = (out + kLinearRowBlock - 1) / kLinearRowBlock;
    pool.parallel_for(
        blocks,
        [&](int64_t b0, int64_t b1) {
          linear_rows(view, X.data(), n, in, b, Y, out, b0 * kLinearRowBlock, std::min(out, b1 * kLinearRowBlock));
        },
        n * out * in);
  }
}

// BF16 products: the inputs rounded to bf16 once per call, then AVX512_BF16's
// dot products where the build has them (panels, no f32 copy, an even
// number of columns: the instruction takes pairs), else the rounded inputs
// through the stored products (the same products, summed in another order;
// the instruction also flushes subnormal inputs and sums to zero).
void bf16_products(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, float* Y) {
  const int64_t n = X.rows(), in = W.cols;
  if (n == 0) return;
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if (linear_detail::kBf16DotKernel && W.panels && W.wide.empty() && in % 2 == 0) {
    thread_local std::vector<uint16_t> xb;  // (n, in) the rounded inputs
    xb.resize(static_cast<size_t>(n * in));
    linear_detail::round_rows_to_bf16(X.data(), n, in, in, xb.data());
    const int64_t out = W.rows;
    const uint16_t* xp = xb.data();  // the pool's threads have their own `xb`
    const int64_t blocks = (out + kLinearRowBlock - 1) / kLinearRowBlock;
    pool.parallel_for(
        blocks,
        [&](int64_t b0, int64_t b1) {
          linear_detail::rows_panels_bf16(W.half.data(), out, in, xp, n, in, b, Y, out, b0 * kLinearRowBlock,
                                          std::min(out, b1 * kLinearRowBlock));
        },
        n * out * in);
    return;
  }
#endif
  thread_local MatrixRM rounded;  // (n, in)
  rounded.resize(n, in);
  for (int64_t i = 0; i < n * in; ++i) rounded.data()[i] = bf16_to_f32(f32_to_bf16(X.data()[i]));
  stored_products(pool, rounded, W, b, Y);
}

// The kernels read W.cols values from every row of X: a narrower X would be read past its end.
void check_input(const MatrixRM& X, const WeightMatrix& W) {
  if (X.cols() != W.cols)
    throw Error("linear: input of shape (" + std::to_string(X.rows()) + ", " + std::to_string(X.cols()) +
                ") does not match weight of shape (" + std::to_string(W.rows) + ", " + std::to_string(W.cols) +
                "): expected " + std::to_string(W.cols) + " input columns");
}

}  // namespace

void linear(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, MatrixRM& Y, uint64_t& flops) {
  check_input(X, W);  // before Y is resized: a refused call leaves it as it was
  Y.resize(X.rows(), W.rows);
  linear(pool, X, W, b, Y.data(), flops);
}

void linear(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, float* Y, uint64_t& flops) {
  const int64_t n = X.rows(), out = W.rows, in = W.cols;
  check_input(X, W);
  if (W.bf16_products && W.type == StoredType::kBF16)
    bf16_products(pool, X, W, b, Y);
  else
    stored_products(pool, X, W, b, Y);
  flops += 2ull * static_cast<uint64_t>(n) * static_cast<uint64_t>(in) * static_cast<uint64_t>(out);
}

}  // namespace kvscope
