#include "model/arch/weight_matrix.h"

#include <algorithm>
#include <stdexcept>

#include <Eigen/Core>

#include "model/arch/gguf_quantize.h"
#include "model/arch/gguf_types.h"
#include "model/core/error.h"

namespace kvscope {

namespace {
// n F16 or BF16 values (`type`) as f32, in the order they lie.
void halves_to_f32(StoredType type, const uint16_t* h, size_t n, float* out) {
  if (type == StoredType::kF16) {
    for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
  }
}
}  // namespace

float WeightMatrix::at(int64_t r, int64_t c) const {
  if (is_quantized(type)) {
    // The block holding (r, c), decoded.
    const GgmlTypeInfo& info = ggml_type_info(type);
    const int64_t per_row = cols / info.block_size, block = c / info.block_size;
    float w[256];  // the largest block: a K-quant's 256 weights
    dequantize_row(info.type, blocks.data() + (r * per_row + block) * info.block_bytes, info.block_size, w);
    return w[c % info.block_size];
  }
  const size_t i = panels ? panel_index(r, c, rows, cols) : static_cast<size_t>(r * cols + c);
  if (type == StoredType::kF32) return f32[i];
  return type == StoredType::kF16 ? f16_to_f32(half[i]) : bf16_to_f32(half[i]);
}

void WeightMatrix::rows_to_f32(int64_t r0, int64_t r1, float* out) const {
  if (is_quantized(type)) {
    const uint64_t stride = row_bytes();
    for (int64_t r = r0; r < r1; ++r)
      dequantize_row(ggml_type_of(type), blocks.data() + static_cast<uint64_t>(r) * stride, cols,
                     out + (r - r0) * cols);
    return;
  }
  if (panels) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) out[(r - r0) * cols + c] = at(r, c);
    return;
  }
  const size_t begin = static_cast<size_t>(r0 * cols), end = static_cast<size_t>(r1 * cols);
  if (type == StoredType::kF32)
    std::copy(f32.begin() + static_cast<std::ptrdiff_t>(begin), f32.begin() + static_cast<std::ptrdiff_t>(end), out);
  else
    halves_to_f32(type, half.data() + begin, end - begin, out);
}

namespace {
// In place, one panel at a time: a panel takes the same index range in both
// layouts ([R p cols, (R p + m) cols)), so a scratch block of kPanelRows rows is
// all the extra memory loading needs, however large the matrix.
template <typename T>
void reorder_to_panels(std::vector<T>& v, int64_t rows, int64_t cols) {
  std::vector<T> block(static_cast<size_t>(std::min(kPanelRows, rows) * cols));  // (m, cols) row-major
  for (int64_t p0 = 0; p0 < rows; p0 += kPanelRows) {
    const int64_t m = std::min(kPanelRows, rows - p0);
    T* base = v.data() + p0 * cols;
    std::copy(base, base + m * cols, block.begin());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < cols; ++c) base[c * m + r] = block[static_cast<size_t>(r * cols + c)];
  }
}
}  // namespace

void WeightMatrix::to_panels() {
  if (!kPanelWeights || panels || is_quantized(type)) return;
  if (type == StoredType::kF32)
    reorder_to_panels(f32, rows, cols);
  else
    reorder_to_panels(half, rows, cols);
  panels = true;
}

void WeightMatrix::row_to_f32(int64_t r, float* out) const {
  rows_to_f32(r, r + 1, out);
}

namespace {
template <typename T>
std::vector<T> transpose_values(const std::vector<T>& v, int64_t rows, int64_t cols) {
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<T> out(v.size());
  Eigen::Map<RowMajor>(out.data(), cols, rows) = Eigen::Map<const RowMajor>(v.data(), rows, cols).transpose();
  return out;
}
}  // namespace

WeightMatrix WeightMatrix::transposed() const {
  if (panels || !wide.empty() || is_quantized(type))
    throw std::logic_error("WeightMatrix::transposed: only a float matrix as read");
  WeightMatrix t;
  t.type = type;
  t.rows = cols;
  t.cols = rows;
  if (type == StoredType::kF32)
    t.f32 = transpose_values(f32, rows, cols);
  else
    t.half = transpose_values(half, rows, cols);
  return t;
}

WeightMatrix WeightMatrix::from_f32(const float* v, int64_t rows, int64_t cols, StoredType type) {
  WeightMatrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  const size_t n = static_cast<size_t>(rows * cols);
  if (is_quantized(type)) {
    const GgmlTypeInfo& info = ggml_type_info(type);
    if (cols % info.block_size != 0)
      throw Error(std::string("cannot quantize rows of ") + std::to_string(cols) + " weights to " + info.name +
                  ": expected a multiple of its block of " + std::to_string(info.block_size));
    const uint64_t stride = stored_values_bytes(type, static_cast<uint64_t>(cols));
    m.blocks.resize(static_cast<size_t>(stride * static_cast<uint64_t>(rows)));
    for (int64_t r = 0; r < rows; ++r) quantize_row(info.type, v + r * cols, cols, m.blocks.data() + r * stride);
  } else if (type == StoredType::kF32) {
    m.f32.assign(v, v + n);
  } else {
    m.half.resize(n);
    const bool f16 = type == StoredType::kF16;
    for (size_t i = 0; i < n; ++i) m.half[i] = f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  }
  return m;
}

WeightMatrix WeightMatrix::from_blocks(StoredType type, int64_t rows, int64_t cols, std::vector<uint8_t> blocks) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  const std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
  if (!is_quantized(type))
    throw Error(std::string("a ") + info.name + " matrix " + shape +
                " is not stored in blocks (expected a quantized type: Q4_0 ... Q6_K)");
  if (rows < 0 || cols < 0 || cols % info.block_size != 0)
    throw Error(std::string("a ") + info.name + " matrix " + shape + ": expected rows of a multiple of " +
                std::to_string(info.block_size) + " weights (its block)");
  const uint64_t expected = stored_values_bytes(type, static_cast<uint64_t>(cols)) * static_cast<uint64_t>(rows);
  if (blocks.size() != expected)
    throw Error(std::string("a ") + info.name + " matrix " + shape + " takes " + std::to_string(expected) +
                " bytes of blocks, given " + std::to_string(blocks.size()));
  WeightMatrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.blocks = std::move(blocks);
  return m;
}

uint64_t WeightMatrix::row_bytes() const {
  return stored_values_bytes(type, static_cast<uint64_t>(cols));
}

uint64_t stored_values_bytes(StoredType type, uint64_t numel) {
  if (!is_quantized(type)) return numel * static_cast<uint64_t>(stored_bytes(type));
  const GgmlTypeInfo& info = ggml_type_info(type);
  return numel / static_cast<uint64_t>(info.block_size) * static_cast<uint64_t>(info.block_bytes);
}

uint64_t WeightMatrix::resident_bytes() const {
  return matrix_resident_bytes(type, static_cast<uint64_t>(rows * cols), !wide.empty());
}

void WeightMatrix::keep_for_products(bool wide_copy) {
  to_panels();
  if (wide_copy) widen();
}

void WeightMatrix::widen() {
  if (type != StoredType::kF16 && type != StoredType::kBF16) return;
  wide.resize(half.size());
  halves_to_f32(type, half.data(), half.size(), wide.data());
}

KeptWeights plan_kept_weights(const std::vector<StoredMatrix>& matrices, uint64_t f32_values, uint64_t wide_max_bytes) {
  KeptWeights k;
  for (const StoredMatrix& m : matrices) k.matrix_bytes += stored_values_bytes(m.type, m.numel);
  k.wide = k.matrix_bytes > 0 && k.matrix_bytes <= wide_max_bytes;
  k.resident = 4 * f32_values;
  for (const StoredMatrix& m : matrices) {
    const uint64_t kept = matrix_resident_bytes(m.type, m.numel, k.wide && !m.lookup);
    k.resident += kept;
    k.resident_copies += kept - matrix_resident_bytes(m.type, m.numel, false);
    if (m.lookup) continue;
    k.bf16_products = k.bf16_products || m.type == StoredType::kBF16;
    const std::string name = to_string(m.type);
    k.products_dtype = k.products_dtype.empty() || k.products_dtype == name ? name : "mixed";
  }
  return k;
}

void require_bf16_products(const KeptWeights& kept, const std::string& dir) {
  if (!kept.bf16_products)
    throw UsageError("--bf16-products: " + dir + " stores its weight matrices as " + kept.products_dtype +
                     " (expected BF16: the flag rounds the inputs of BF16 matrices only)");
}

}  // namespace kvscope
