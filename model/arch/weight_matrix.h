// One weight matrix of either model family, kept at its checkpoint's
// precision: F32 stays f32, F16 and BF16 stay 16-bit (no f32 copy), and a
// GGUF file's quantized matrices (Q4_0 ... Q6_K) stay in ggml's blocks, so
// every forward reads each weight once at its stored width. One exception,
// the WebAssembly build's small models (kWideMaxMatrixBytes below).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/core/numeric.h"

namespace kvscope {

// The engine's f32 matrices. Row-major so that a weight stored transposed,
// (out, in), gives contiguous dot products for decode (matrix-vector) and
// plain GEMM for prefill.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// Where the AVX-512 kernels run (linear_kernels.cpp) and in WebAssembly
// (linear_simd128.cpp), the loaders store each matrix as panels of kPanelRows
// rows, interleaved by column: panel p holds rows [R p, R p + m), m = min(R,
// rows - R p), as (cols, m), so element (r, c) is at R p cols + c m + r - R p
// (R = kPanelRows). The same bytes as row-major, in another order: one product
// step loads the R rows' weights of one column in one read and multiplies
// them by one broadcast input value for each position, so a batch of
// positions costs few loads per multiply-add and no horizontal sums, and the
// panel is one sequential stream from memory. R is two AVX-512 registers of
// f32 natively; in WebAssembly four SIMD128 registers (16 rows: 32 spilled
// under V8, docs/web.md).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
constexpr int64_t kPanelRows = 32;
constexpr bool kPanelWeights = true;
#elif defined(__wasm_simd128__)
constexpr int64_t kPanelRows = 16;
constexpr bool kPanelWeights = true;
#else
constexpr int64_t kPanelRows = 32;
constexpr bool kPanelWeights = false;
#endif

// Index of element (r, c) of a (rows, cols) matrix stored as panels.
inline size_t panel_index(int64_t r, int64_t c, int64_t rows, int64_t cols) {
  const int64_t p0 = r / kPanelRows * kPanelRows, m = std::min(kPanelRows, rows - p0);
  return static_cast<size_t>(p0 * cols + c * m + (r - p0));
}

// A (rows, cols) matrix in its stored dtype, row-major or as panels.
//
// Quantized types (is_quantized(type): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K) are held as the GGUF tensor's bytes, unchanged: each row is
// cols / block_size blocks of block_bytes bytes (gguf_types.h), rows back to
// back (ggml dims [cols, rows]). Always row-major (never panels), never an
// f32 copy; `at`, `row_to_f32` and `rows_to_f32` decode the blocks they
// touch (an embedding lookup decodes one row), and `linear` (linear.h)
// multiplies straight from the blocks (linear_quant.h).
struct WeightMatrix {
  StoredType type = StoredType::kF32;
  int64_t rows = 0, cols = 0;
  bool panels = false;         // the layout of f32 / half: row-major, or panels (above)
  std::vector<float> f32;      // (rows, cols) when type == kF32
  std::vector<uint16_t> half;  // (rows, cols) IEEE binary16 or bfloat16 when type is kF16 / kBF16
  // (rows, cols / block_size) blocks when is_quantized(type), as above.
  std::vector<uint8_t> blocks;
  // An f32 copy of `half` in its layout (row-major or panels), kept only
  // where the loader's plan said so (KeptWeights::wide): the products read it
  // instead (linear.cpp).
  std::vector<float> wide;
  // BF16 matrices only: products round their inputs to bf16 (as PyTorch's
  // bf16 path does) and run AVX512_BF16 dot products where the CPU has them
  // (linear.cpp). LoadControl::bf16_products sets it; off, inputs stay f32.
  bool bf16_products = false;

  bool empty() const { return rows == 0; }
  // Bytes of the values at the stored dtype (what the model's file holds).
  uint64_t bytes() const {
    return type == StoredType::kF32 ? f32.size() * 4ull : is_quantized(type) ? blocks.size() : half.size() * 2ull;
  }
  // Bytes held in memory: the stored values and the f32 copy, if kept.
  uint64_t resident_bytes() const;
  // Bytes one product with every row reads (linear): the f32 copy where one
  // is kept, else the stored values.
  uint64_t product_bytes() const { return wide.empty() ? bytes() : wide.size() * 4ull; }
  // Bytes one row lookup reads (row_to_f32, an embedding): a stored row.
  uint64_t row_bytes() const;
  const void* data() const {
    if (is_quantized(type)) return blocks.data();
    return type == StoredType::kF32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(half.data());
  }
  // Element (r, c) as f32.
  float at(int64_t r, int64_t c) const;
  // Row r as f32 (an embedding lookup).
  void row_to_f32(int64_t r, float* out) const;
  // Rows [r0, r1) as f32, (r1 - r0, cols) row-major.
  void rows_to_f32(int64_t r0, int64_t r1, float* out) const;

  // From f32 values (rows, cols) row-major that `type` holds exactly (the
  // tests build matrices so; the loaders read them at their stored dtype).
  // A quantized `type` quantizes each row (quantize_row, gguf_quantize.h:
  // llama.cpp's reference rules), so the matrix holds the values rounded,
  // not exactly; cols must then be a multiple of the type's block size
  // (kvscope::Error otherwise).
  static WeightMatrix from_f32(const float* v, int64_t rows, int64_t cols, StoredType type);

  // A quantized (rows, cols) matrix from a GGUF tensor's bytes (ggml dims
  // [cols, rows]; see above), taken as they are. Throws kvscope::Error when
  // `type` is not quantized, rows or cols is negative, cols is not a
  // multiple of the block size, or blocks.size() is not rows * cols /
  // block_size * block_bytes. F32/F16/BF16 tensors go in `f32` / `half`.
  static WeightMatrix from_blocks(StoredType type, int64_t rows, int64_t cols, std::vector<uint8_t> blocks);

  // The (cols, rows) transpose at the same dtype, of a row-major matrix with
  // no f32 copy (as read from its file: GPT-2's Conv1D weights, stored (in,
  // out), are kept (out, in)). Float types only (std::logic_error for a
  // quantized one: its blocks run along rows).
  WeightMatrix transposed() const;

  // Reorders a row-major matrix into panels where kPanelWeights holds (the
  // loaders, through keep_for_products, once for each matrix the products
  // read; a no-op elsewhere, when done, and for quantized blocks). from_f32
  // and the readers give row-major.
  void to_panels();

  // Fills `wide` from `half` (exact, element by element: the same layout);
  // an F32 or quantized matrix keeps no copy.
  void widen();

  // Keeps a matrix the products read as they read it: panels, then the f32
  // copy where the loader's plan keeps copies (`wide_copy`: KeptWeights::wide).
  // A matrix only looked up a row at a time (an untied embedding) needs neither.
  void keep_for_products(bool wide_copy);
};

// WebAssembly SIMD128 has no f16 conversion: converting every weight on each
// step (4 integer/float operations per 4 weights) costs more than reading
// f32 from cache for a cache-sized model, so the page keeps f32 copies of
// the 16-bit matrices of a model whose weight matrices (those it reads, at
// their stored dtypes) take at most this many bytes (the embedded
// kvscope-tiny: 7.6 MB of copies beside 3.8 MB of f16; at most 128 MiB of
// copies, which the resident size, the bytes read per step and the memory
// check count). Larger models (memory-bound) stay 16-bit. Native builds
// convert in registers (F16C, AVX-512) and keep no copies (0: none).
#ifdef __wasm__
constexpr uint64_t kWideMaxMatrixBytes = 64ull << 20;
#else
constexpr uint64_t kWideMaxMatrixBytes = 0;
#endif

// Bytes `numel` values of `type` take as stored: numel times the element's
// bytes, or for a quantized type numel / block_size blocks (numel is then a
// multiple of block_size, as every row of a quantized matrix is).
uint64_t stored_values_bytes(StoredType type, uint64_t numel);

// Bytes a (type, numel) matrix holds in memory, with or without an f32 copy
// of its 16-bit values (an F32 or quantized matrix never has one).
inline uint64_t matrix_resident_bytes(StoredType type, uint64_t numel, bool wide) {
  const bool half = type == StoredType::kF16 || type == StoredType::kBF16;
  return stored_values_bytes(type, numel) + (wide && half ? 4ull * numel : 0ull);
}

// A weight matrix the model will read, as its file stores it: known from
// the files' headers before anything is read.
struct StoredMatrix {
  StoredType type = StoredType::kF32;
  uint64_t numel = 0;
  bool lookup = false;  // only looked up a row at a time (an untied embedding): never copied
};

// What a loader keeps of a model, decided before it reads the weights.
struct KeptWeights {
  uint64_t matrix_bytes = 0;     // the matrices the model reads, at their stored dtypes
  bool wide = false;             // keep f32 copies of the 16-bit ones: 0 < matrix_bytes <= the limit
  uint64_t resident = 0;         // bytes held: the matrices (+ copies) and the tensors kept in f32
  uint64_t resident_copies = 0;  // of which the f32 copies (0 for an all-F32 model, even where `wide`)
  std::string products_dtype;    // of the matrices the products read: to_string(type) ("F32", "Q4_K") or "mixed"
  bool bf16_products = false;    // one of those is BF16 (what LoadControl::bf16_products needs)
  bool copies() const { return resident_copies > 0; }
};

// The one rule both loaders follow: f32 copies when the model's weight
// matrices (`matrices`, every one the model reads, nothing else in the
// files) take at most `wide_max_bytes` (kWideMaxMatrixBytes unless a test
// says otherwise); `f32_values` counts the values kept in f32 besides
// (norm weights, biases, GPT-2's position table).
KeptWeights plan_kept_weights(const std::vector<StoredMatrix>& matrices, uint64_t f32_values, uint64_t wide_max_bytes);

// LoadControl::bf16_products on a model whose products read no BF16 matrix:
// a UsageError naming the flag, `dir` and the dtype it stores, thrown by the
// loaders from their plan, before the weights are read into the model (a
// file of at most SafeTensors::kReadWholeUpTo bytes has been read whole).
void require_bf16_products(const KeptWeights& kept, const std::string& dir);

}  // namespace kvscope
