// Weight matrices held as GGUF quantized blocks: `linear` read straight from
// the blocks against NumPy's float64 dequantize-then-matmul, the AVX2
// kernels against the portable ones, and quantize_row byte for byte against
// llama.cpp's reference quantizers restated in NumPy (tools/numpy_quant_ref.py,
// whose dequantizers are tools/numpy_gguf.py's, written from the format).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/arch/gguf_quantize.h"
#include "model/arch/gguf_types.h"
#include "model/arch/weight_matrix.h"
#include "model/core/error.h"
#include "model/core/thread_pool.h"
#include "model/engine/linear.h"
#include "model/engine/linear_quant.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

const std::string& quant_suite() {
  static const std::string dir =
      testutil::generated_suite(std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_quant_ref.py", "numpy_quant_ref");
  return dir;
}

const json& suite() {
  static const json j = testutil::read_json(quant_suite() + "/suite.json");
  return j;
}

template <typename T>
std::vector<T> read_array(const std::string& name) {
  const std::string bytes = testutil::read_file(quant_suite() + "/" + name);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

StoredType stored_named(const std::string& name) {
  for (const GgmlTypeInfo& t : ggml_readable_types())
    if (name == t.name) return stored_type_of(t.type);
  throw std::runtime_error("no type " + name);
}

// One matmul case of the suite: W as its blocks, X (n, cols), b, and the
// reference y (n, rows) without b and yabs = |X| |W|^T.
struct MatmulCase {
  std::string type;
  WeightMatrix W;
  MatrixRM X;
  std::vector<float> b;
  std::vector<double> y, yabs;
};

MatmulCase load_case(const json& c) {
  MatmulCase m;
  m.type = c["type"].get<std::string>();
  const int64_t rows = c["rows"], cols = c["cols"], n = c["n"];
  const std::vector<uint8_t> blocks = read_array<uint8_t>(c["blocks"]);
  m.W = WeightMatrix::from_blocks(stored_named(m.type), rows, cols, blocks);
  const std::vector<float> x = read_array<float>(c["x"]);
  m.X = Eigen::Map<const MatrixRM>(x.data(), n, cols);
  m.b = read_array<float>(c["b"]);
  m.y = read_array<double>(c["y"]);
  m.yabs = read_array<double>(c["yabs"]);
  return m;
}

// f32 sums of cols terms against the float64 reference: within 1e-5 of the
// terms' magnitude (|x| |w| summed), the bound f32 summation meets.
void expect_matches(const MatmulCase& m, const float* Y, bool bias, const std::string& what) {
  const int64_t n = m.X.rows(), rows = m.W.rows;
  int bad = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const double ref = m.y[i * rows + r] + (bias ? m.b[r] : 0.0);
      const double tol = 1e-5 * (m.yabs[i * rows + r] + std::fabs(m.b[r])) + 1e-30;
      const double got = Y[i * rows + r];
      if (!(std::fabs(got - ref) <= tol) && bad++ < 3)
        ADD_FAILURE() << what << " " << m.type << " n=" << n << " (" << i << ", " << r << "): " << got << " vs " << ref
                      << " (tolerance " << tol << ")";
    }
}

TEST(GgufKernels, LinearFromBlocksEqualsNumpyDequantizeThenMatmul) {
  ThreadPool pool(2);
  ASSERT_EQ(suite()["matmul"].size(), 8u * 4u);
  for (const json& c : suite()["matmul"]) {
    const MatmulCase m = load_case(c);
    for (bool bias : {false, true}) {
      MatrixRM Y;
      uint64_t flops = 0;
      linear(pool, m.X, m.W, bias ? m.b.data() : nullptr, Y, flops);
      ASSERT_EQ(Y.rows(), m.X.rows());
      ASSERT_EQ(Y.cols(), m.W.rows);
      EXPECT_EQ(flops, 2ull * static_cast<uint64_t>(m.X.rows() * m.W.rows * m.W.cols));
      expect_matches(m, Y.data(), bias, bias ? "linear with bias" : "linear");
    }
  }
}

// The vector kernels decode each weight as dequantize_row does, so they
// differ from the portable loop only in the order of the sums; both are
// checked against the reference, on a row range that starts and ends inside
// a row block (a thread's share may).
TEST(GgufKernels, Avx2AndPortableKernelsAgreeWithTheReference) {
  if (!linear_detail::kQuantAvx2) GTEST_SKIP() << "this build has no AVX2+FMA kernels";
  for (const json& c : suite()["matmul"]) {
    const MatmulCase m = load_case(c);
    const QuantView v{ggml_type_of(m.W.type), m.W.blocks.data(), m.W.rows, m.W.cols,
                      static_cast<int64_t>(m.W.row_bytes())};
    const int64_t n = m.X.rows(), rows = m.W.rows;
    std::vector<float> a(static_cast<size_t>(n * rows), 0.0f), p = a;
    linear_detail::quant_rows_avx2(v, m.X.data(), n, m.W.cols, m.b.data(), a.data(), rows, 0, 5);
    linear_detail::quant_rows_avx2(v, m.X.data(), n, m.W.cols, m.b.data(), a.data(), rows, 5, rows);
    linear_detail::quant_rows_portable(v, m.X.data(), n, m.W.cols, m.b.data(), p.data(), rows, 0, rows);
    expect_matches(m, a.data(), true, "avx2");
    expect_matches(m, p.data(), true, "portable");
  }
}

TEST(GgufKernels, QuantizeRowWritesLlamaCppsReferenceBlocks) {
  ASSERT_EQ(suite()["quantize"].size(), 8u);
  for (const json& c : suite()["quantize"]) {
    const std::string type = c["type"];
    const std::vector<float> x = read_array<float>(c["x"]);
    const std::vector<uint8_t> expected = read_array<uint8_t>(c["blocks"]);
    const GgmlTypeInfo& info = ggml_type_info(stored_named(type));
    std::vector<uint8_t> got(expected.size(), 0xAA);
    quantize_row(info.type, x.data(), static_cast<int64_t>(x.size()), got.data());
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == expected[i]) continue;
      ADD_FAILURE() << type << ": byte " << i % static_cast<size_t>(info.block_bytes) << " of block "
                    << i / static_cast<size_t>(info.block_bytes) << " is " << int(got[i]) << ", expected "
                    << int(expected[i]);
      break;
    }
  }
}

// from_f32 on a quantized type quantizes each row; the matrix then reads
// back (at, row_to_f32, rows_to_f32) as its blocks decode.
TEST(GgufKernels, QuantizedMatrixReadsBackItsBlocks) {
  const int64_t rows = 3, cols = 512;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  for (StoredType t : {StoredType::kQ8_0, StoredType::kQ4_0, StoredType::kQ4_K, StoredType::kQ6_K}) {
    const WeightMatrix W = WeightMatrix::from_f32(v.data(), rows, cols, t);
    const GgmlTypeInfo& info = ggml_type_info(t);
    const uint64_t row_bytes = static_cast<uint64_t>(cols / info.block_size * info.block_bytes);
    EXPECT_EQ(W.row_bytes(), row_bytes) << info.name;
    EXPECT_EQ(W.bytes(), row_bytes * rows) << info.name;
    EXPECT_EQ(W.product_bytes(), W.bytes()) << info.name;
    EXPECT_EQ(W.resident_bytes(), W.bytes()) << info.name;
    std::vector<float> decoded(static_cast<size_t>(rows * cols)), row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(info.type, W.blocks.data() + r * row_bytes, cols, decoded.data() + r * cols);
    std::vector<float> all(decoded.size());
    W.rows_to_f32(0, rows, all.data());
    EXPECT_EQ(all, decoded) << info.name;
    W.row_to_f32(2, row.data());
    EXPECT_EQ(row, std::vector<float>(decoded.begin() + 2 * cols, decoded.end())) << info.name;
    EXPECT_EQ(W.at(1, 300), decoded[static_cast<size_t>(cols + 300)]) << info.name;
    // The quantization error, bounded per type (a coarse check that the rows
    // are the values: 4-bit ~ 1/8 of the block's range).
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(decoded[i] - v[i])));
    EXPECT_LT(worst, t == StoredType::kQ8_0 ? 0.02 : t == StoredType::kQ6_K ? 0.06 : 0.3) << info.name;
  }
}

TEST(GgufKernels, FromBlocksRefusesSizesThatDisagree) {
  EXPECT_THROW(WeightMatrix::from_blocks(StoredType::kQ4_K, 2, 100, std::vector<uint8_t>(288)), Error);  // cols
  EXPECT_THROW(WeightMatrix::from_blocks(StoredType::kQ4_K, 2, 256, std::vector<uint8_t>(287)), Error);  // bytes
  EXPECT_THROW(WeightMatrix::from_blocks(StoredType::kF16, 2, 256, std::vector<uint8_t>(1024)), Error);  // type
  EXPECT_THROW(WeightMatrix::from_blocks(StoredType::kQ8_0, -1, 32, {}), Error);
  const WeightMatrix ok = WeightMatrix::from_blocks(StoredType::kQ4_K, 2, 256, std::vector<uint8_t>(288));
  EXPECT_EQ(ok.bytes(), 288u);
  std::vector<float> x(100);
  std::vector<uint8_t> out(200);
  EXPECT_THROW(quantize_row(GgmlType::kQ8_0, x.data(), 100, out.data()), Error);
  EXPECT_THROW(ok.transposed(), std::logic_error);
}

// The loaders' plan counts quantized matrices at their block bytes, never
// with f32 copies, and names their type.
TEST(GgufKernels, PlanCountsBlockBytes) {
  const KeptWeights k =
      plan_kept_weights({{StoredType::kQ4_K, 256 * 4, false}, {StoredType::kQ4_K, 512, true}}, 10, uint64_t{1} << 40);
  EXPECT_EQ(k.matrix_bytes, 144u * 6u);
  EXPECT_EQ(k.resident_copies, 0u);
  EXPECT_EQ(k.resident, 144u * 6u + 40u);
  EXPECT_EQ(k.products_dtype, "Q4_K");
  EXPECT_STREQ(to_string(StoredType::kQ6_K), "Q6_K");
}

}  // namespace
}  // namespace kvscope
