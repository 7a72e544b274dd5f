// The decode kernels (model/engine/kernels.h) and the batched products
// (model/engine/linear_kernels.h, linear.h) against plain double-precision loops,
// on shapes that hit every path: row counts that are not multiples of the
// four-row pass, short rows and long (streamed) ones, widths with and without
// a partial 16-float tail or a partial 64-float block, head widths
// from 1 to beyond the register-resident chunks, and sub-ranges of rows.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/arch/weight_matrix.h"
#include "model/core/error.h"
#include "model/core/numeric.h"
#include "model/core/thread_pool.h"
#include "model/engine/kernels.h"
#include "model/engine/linear.h"
#include "model/engine/linear_kernels.h"
#include "model/kv/kv_quant.h"

namespace kvscope {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(Kernels, MatvecF32AndF16MatchDoubleLoops) {
  std::mt19937 rng(7);
  for (int rows : {1, 3, 4, 5, 9, 17}) {
    for (int cols : {1, 7, 15, 16, 17, 40, 64, 100, 160, 512, 527, 560, 768}) {
      const auto W = randn(static_cast<size_t>(rows) * cols, rng);
      const auto x = randn(static_cast<size_t>(cols), rng);
      const auto b = randn(static_cast<size_t>(rows), rng);
      std::vector<uint16_t> Wh(W.size());
      std::vector<float> Wr(W.size());  // W rounded to half, as the f16 kernel sees it
      for (size_t i = 0; i < W.size(); ++i) {
        Wh[i] = f32_to_f16(W[i]);
        Wr[i] = f16_to_f32(Wh[i]);
      }
      for (bool bias : {false, true}) {
        // A sub-range [r0, r1) leaves the other outputs untouched.
        const int r0 = rows > 2 ? 1 : 0, r1 = rows;
        std::vector<float> y32(static_cast<size_t>(rows), -99.0f), y16 = y32;
        matvec_f32(W.data(), cols, x.data(), bias ? b.data() : nullptr, y32.data(), r0, r1);
        matvec_f16(Wh.data(), cols, x.data(), bias ? b.data() : nullptr, y16.data(), r0, r1);
        for (int r = 0; r < rows; ++r) {
          if (r < r0) {
            EXPECT_EQ(y32[static_cast<size_t>(r)], -99.0f);
            EXPECT_EQ(y16[static_cast<size_t>(r)], -99.0f);
            continue;
          }
          double e32 = bias ? b[static_cast<size_t>(r)] : 0.0, e16 = e32;
          for (int k = 0; k < cols; ++k) {
            const size_t i = static_cast<size_t>(r) * cols + k;
            e32 += static_cast<double>(W[i]) * x[static_cast<size_t>(k)];
            e16 += static_cast<double>(Wr[i]) * x[static_cast<size_t>(k)];
          }
          const double tol = 1e-5 * (1 + std::sqrt(static_cast<double>(cols)));
          EXPECT_NEAR(y32[static_cast<size_t>(r)], e32, tol) << rows << "x" << cols << " row " << r;
          EXPECT_NEAR(y16[static_cast<size_t>(r)], e16, tol) << rows << "x" << cols << " row " << r;
        }
      }
    }
  }
}

// bfloat16 weights (Llama-family checkpoints): the upper 16 bits of each f32.
TEST(Kernels, MatvecBf16MatchesDoubleLoops) {
  std::mt19937 rng(11);
  for (int rows : {1, 4, 5, 17}) {
    for (int cols : {1, 15, 16, 17, 64, 100, 527, 576}) {
      const auto W = randn(static_cast<size_t>(rows) * cols, rng);
      const auto x = randn(static_cast<size_t>(cols), rng);
      const auto b = randn(static_cast<size_t>(rows), rng);
      std::vector<uint16_t> Wb(W.size());
      for (size_t i = 0; i < W.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &W[i], 4);
        Wb[i] = static_cast<uint16_t>(bits >> 16);  // truncated: any bf16 value will do
      }
      std::vector<float> y(static_cast<size_t>(rows), -99.0f);
      const int r0 = rows > 2 ? 1 : 0;
      matvec_bf16(Wb.data(), cols, x.data(), b.data(), y.data(), r0, rows);
      for (int r = 0; r < rows; ++r) {
        if (r < r0) {
          EXPECT_EQ(y[static_cast<size_t>(r)], -99.0f);
          continue;
        }
        double e = b[static_cast<size_t>(r)];
        for (int k = 0; k < cols; ++k) {
          const uint32_t bits = static_cast<uint32_t>(Wb[static_cast<size_t>(r) * cols + k]) << 16;
          float w;
          std::memcpy(&w, &bits, 4);
          e += static_cast<double>(w) * x[static_cast<size_t>(k)];
        }
        EXPECT_NEAR(y[static_cast<size_t>(r)], e, 1e-5 * (1 + std::sqrt(static_cast<double>(cols))))
            << rows << "x" << cols << " row " << r;
      }
    }
  }
}

TEST(Kernels, AttendMatchesSoftmaxOfScaledDotProducts) {
  std::mt19937 rng(11);
  for (int hd : {1, 8, 16, 17, 32, 40, 48, 63, 64, 65, 80}) {
    for (int len : {1, 2, 3, 4, 5, 7, 33}) {
      const int heads = 3, stride = hd * heads + 5;  // rows wider than one head, as in the cache
      const auto K = randn(static_cast<size_t>(len) * stride, rng);
      const auto V = randn(static_cast<size_t>(len) * stride, rng);
      const auto q = randn(static_cast<size_t>(hd), rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const int h = 1;  // a head slice that starts mid-row
      std::vector<float> p(static_cast<size_t>(len)), o(static_cast<size_t>(hd) + 1, -7.0f);
      attend(q.data(), K.data() + h * hd, V.data() + h * hd, stride, hd, len, scale, p.data(), o.data());

      std::vector<double> s(static_cast<size_t>(len));
      double mx = -1e300, sum = 0;
      for (int j = 0; j < len; ++j) {
        double d = 0;
        for (int e = 0; e < hd; ++e) d += static_cast<double>(K[static_cast<size_t>(j) * stride + h * hd + e]) * q[e];
        s[static_cast<size_t>(j)] = d * scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (int j = 0; j < len; ++j) {
        EXPECT_NEAR(p[static_cast<size_t>(j)], s[static_cast<size_t>(j)] / sum, 1e-5) << "hd " << hd << " len " << len;
      }
      for (int e = 0; e < hd; ++e) {
        double v = 0;
        for (int j = 0; j < len; ++j)
          v += s[static_cast<size_t>(j)] / sum * V[static_cast<size_t>(j) * stride + h * hd + e];
        EXPECT_NEAR(o[static_cast<size_t>(e)], v, 1e-5) << "hd " << hd << " len " << len << " e " << e;
      }
      EXPECT_EQ(o[static_cast<size_t>(hd)], -7.0f) << "wrote past the head slice, hd " << hd;
    }
  }
}

// attend_runs over stored rows of every dtype: K/V rows quantized with the
// cache's quantizers, then dequantized row by row (the scalar path,
// dequantize_row_*) into plain double loops. The kernel dequantizes in
// registers (vector paths) or eight values at a time (portable path); head
// widths with and without whole 8- and 16-float chunks, slices starting
// mid-row and mid-block, keys in runs of odd and even lengths (so runs open
// on odd keys) in separate buffers.
TEST(Kernels, AttendRunsDequantizesEveryDtypeAsTheScalarPath) {
  std::mt19937 rng(23);
  const int width = 192;  // one stored row: every head of a position (6 blocks of 32)
  for (KVDtype dt : {KVDtype::kF32, KVDtype::kF16, KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    const size_t rb = dt == KVDtype::kF32    ? 4 * width
                      : dt == KVDtype::kF16  ? 2 * width
                      : dt == KVDtype::kQ8_0 ? width / 32 * kQ8_0BlockBytes
                                             : width / 32 * kQ4_0BlockBytes;
    const char* name = dt == KVDtype::kF32    ? "f32"
                       : dt == KVDtype::kF16  ? "f16"
                       : dt == KVDtype::kQ8_0 ? "q8_0"
                                              : "q4_0";
    for (int len : {1, 3, 4, 5, 9, 33}) {
      // Rows off 4- and 16-byte boundaries, as in a pool of blocks (f16 rows
      // stay 2-byte aligned there: an f16 row is written as uint16_t), and
      // `stride` bytes apart inside a run.
      const size_t off = dt == KVDtype::kF16 ? 2 : 3, stride = rb + 6;
      std::vector<int> run_len;  // 3, 1, 4, 1, 5, 9, 2, 6, ... up to len keys
      for (int j = 0, r = 0; j < len; j += run_len.back(), ++r)
        run_len.push_back(std::min(len - j, std::vector<int>{3, 1, 4, 1, 5, 9, 2, 6}[static_cast<size_t>(r % 8)]));
      std::vector<std::vector<uint8_t>> kst, vst;  // (run) its rows
      for (int n : run_len) {
        kst.emplace_back(off + static_cast<size_t>(n) * stride + 7);
        vst.emplace_back(off + static_cast<size_t>(n) * stride + 7);
      }
      std::vector<KVRowRun> runs;
      for (size_t r = 0; r < run_len.size(); ++r)
        runs.push_back(KVRowRun{kst[r].data() + off, vst[r].data() + off, run_len[r]});
      std::vector<float> kf(static_cast<size_t>(len) * width), vf(kf.size());  // as the scalar path reads them
      for (int j = 0, r = 0, i = 0; j < len; ++j, ++i) {
        if (i == run_len[static_cast<size_t>(r)]) {
          i = 0;
          ++r;
        }
        for (int kv = 0; kv < 2; ++kv) {
          std::vector<float> x = randn(width, rng);
          if (j == 1) x[5] = 0;  // a zero and a larger value in the same block
          if (j == 2) x[40] = 9.5f;
          uint8_t* row = (kv ? vst : kst)[static_cast<size_t>(r)].data() + off + static_cast<size_t>(i) * stride;
          float* back = (kv ? vf.data() : kf.data()) + static_cast<size_t>(j) * width;
          switch (dt) {
            case KVDtype::kF32:
              std::memcpy(row, x.data(), rb);
              std::memcpy(back, row, rb);
              break;
            case KVDtype::kF16:
              quantize_row_f16(x.data(), width, reinterpret_cast<uint16_t*>(row));
              dequantize_row_f16(reinterpret_cast<const uint16_t*>(row), width, back);
              break;
            case KVDtype::kQ8_0:
              quantize_row_q8_0(x.data(), width, row);
              dequantize_row_q8_0(row, width, back);
              break;
            case KVDtype::kQ4_0:
              quantize_row_q4_0(x.data(), width, row);
              dequantize_row_q4_0(row, width, back);
              break;
          }
        }
      }
      for (int hd : {8, 12, 16, 24, 32, 40, 48, 64, 80, 128}) {
        for (int col : {0, hd, 8, 20, width - hd}) {
          if (col + hd > width) continue;
          const auto q = randn(static_cast<size_t>(hd), rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> p(static_cast<size_t>(len)), o(static_cast<size_t>(hd) + 1, -7.0f);
          const KVRunsView view{dt, runs.data(), static_cast<int>(runs.size()), stride, col};
          attend_runs(q.data(), view, hd, len, scale, p.data(), o.data());
          std::vector<double> s(static_cast<size_t>(len));
          double mx = -1e300, sum = 0;
          for (int j = 0; j < len; ++j) {
            double d = 0;
            for (int e = 0; e < hd; ++e) d += static_cast<double>(kf[static_cast<size_t>(j) * width + col + e]) * q[e];
            s[static_cast<size_t>(j)] = d * scale;
            mx = std::max(mx, s[static_cast<size_t>(j)]);
          }
          for (double& v : s) sum += (v = std::exp(v - mx));
          const std::string where = std::string(name) + " hd " + std::to_string(hd) + " col " + std::to_string(col) +
                                    " len " + std::to_string(len);
          for (int j = 0; j < len; ++j)
            EXPECT_NEAR(p[static_cast<size_t>(j)], s[static_cast<size_t>(j)] / sum, 1e-5) << where;
          for (int e = 0; e < hd; ++e) {
            double v = 0;
            for (int j = 0; j < len; ++j)
              v += s[static_cast<size_t>(j)] / sum * vf[static_cast<size_t>(j) * width + col + e];
            EXPECT_NEAR(o[static_cast<size_t>(e)], v, 2e-5) << where << " e " << e;
          }
          EXPECT_EQ(o[static_cast<size_t>(hd)], -7.0f) << "wrote past the head slice, " << where;
          // f32 rows: bit-identical to attend() over the same values in one array
          // (with the same weights buffer: the softmax's sums follow its alignment).
          if (dt == KVDtype::kF32) {
            std::vector<float> o2(static_cast<size_t>(hd));
            attend(q.data(), kf.data() + col, vf.data() + col, width, hd, len, scale, p.data(), o2.data());
            for (int e = 0; e < hd; ++e) EXPECT_EQ(o[static_cast<size_t>(e)], o2[static_cast<size_t>(e)]) << where;
          }
        }
      }
    }
  }
}

// The batched products Y = X W^T + b (linear_kernels.h): every path, every
// stored dtype, against a double-precision loop over the weights as stored.
using LinearPath = void (*)(const WeightView&, const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t,
                            int64_t);

struct StoredCopy {
  std::vector<float> f32;      // the f32 weights, or the 16-bit ones' exact values
  std::vector<uint16_t> bits;  // F16 / BF16 bits
  WeightView view;
};

StoredCopy store(const std::vector<float>& w, StoredType t, int64_t rows, int64_t cols, int64_t ld) {
  StoredCopy c;
  c.f32 = w;
  if (t != StoredType::kF32) {
    c.bits.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      c.bits[i] = t == StoredType::kF16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
      c.f32[i] = t == StoredType::kF16 ? f16_to_f32(c.bits[i]) : bf16_to_f32(c.bits[i]);
    }
  }
  c.view = {t, t == StoredType::kF32 ? static_cast<const void*>(c.f32.data()) : c.bits.data(), rows, cols, ld};
  return c;
}

// Runs `fn` on rows [r0, r1) and checks them against the double reference
// over W.f32 (row-major, W.view.stride() apart; the view may hold the same
// values as panels), relative to sum |w x|; the rows outside and the padding
// stay untouched.
void check_linear_share(LinearPath fn, const char* name, const StoredCopy& W, int64_t n, bool bias, std::mt19937& rng,
                        int64_t r0, int64_t r1) {
  const int64_t rows = W.view.rows, cols = W.view.cols, ldw = W.view.stride(), ldx = cols + 1, ldy = rows + 3;
  const auto X = randn(static_cast<size_t>(n * ldx), rng), b = randn(static_cast<size_t>(rows), rng);
  std::vector<float> Y(static_cast<size_t>(n * ldy), 12345.0f);
  fn(W.view, X.data(), n, ldx, bias ? b.data() : nullptr, Y.data(), ldy, r0, r1);
  double worst = 0;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t r = 0; r < ldy; ++r) {
      const float y = Y[static_cast<size_t>(p * ldy + r)];
      if (r < r0 || r >= r1) {
        ASSERT_EQ(y, 12345.0f) << name << " wrote row " << r;
        continue;
      }
      double acc = bias ? b[static_cast<size_t>(r)] : 0.0, mag = std::fabs(acc);
      for (int64_t k = 0; k < cols; ++k) {
        const double t =
            static_cast<double>(W.f32[static_cast<size_t>(r * ldw + k)]) * X[static_cast<size_t>(p * ldx + k)];
        acc += t;
        mag += std::fabs(t);
      }
      worst = std::max(worst, std::fabs(y - acc) / (mag + 1e-30));
    }
  }
  EXPECT_LT(worst, 2e-6) << name << " " << to_string(W.view.dtype) << " " << rows << "x" << cols << " n " << n;
}

// The same on rows [3, rows - 2) (all rows when there are 8 or fewer).
void check_linear(LinearPath fn, const char* name, const StoredCopy& W, int64_t n, bool bias, std::mt19937& rng) {
  const int64_t rows = W.view.rows;
  check_linear_share(fn, name, W, n, bias, rng, rows > 8 ? 3 : 0, rows > 8 ? rows - 2 : rows);
}

// A row-major (rows, cols) array reordered as panels (weight_matrix.h).
template <typename T>
std::vector<T> panel_order(const std::vector<T>& v, int64_t rows, int64_t cols) {
  std::vector<T> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[panel_index(r, c, rows, cols)] = v[static_cast<size_t>(r * cols + c)];
  return out;
}

TEST(Kernels, LinearEveryPathMatchesDoubleReference) {
  const struct {
    const char* name;
    LinearPath fn;
  } paths[] = {
      {"linear_rows", linear_rows}, {"packed", linear_detail::rows_packed}, {"generic", linear_detail::rows_generic}};
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 17; ++n) ns.push_back(n);
  ns.push_back(33);
  ns.push_back(130);
  std::mt19937 rng(3);
  // Odd rows (not a multiple of 4 or 32) and columns (16-float tails, > one 512-column panel), padded rows (ld).
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {37, 17}, {33, 100}, {70, 768}, {45, 1037}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const auto w = randn(static_cast<size_t>(rows * (cols + 3)), rng);
    for (StoredType t : {StoredType::kF32, StoredType::kF16, StoredType::kBF16}) {
      const StoredCopy W = store(w, t, rows, cols, cols + 3);
      for (int64_t n : ns) {
        if (n == 130 && rows * cols > 40000) continue;  // keeps the double loops short
        for (const auto& p : paths) check_linear(p.fn, p.name, W, n, n % 2 == 1, rng);
      }
    }
  }
}

// The panel layout (weight_matrix.h): the same products from the same values
// reordered, for every dtype, tails of a panel (rows % 32) and of a column
// chunk, and shares that start at a panel boundary; rows outside untouched.
TEST(Kernels, LinearOnPanelsMatchesDoubleReference) {
  std::mt19937 rng(11);
  // Last panels of 1, 3, 5, 1, 6, 13, 16, 18, 31 and 32 rows (16 and more fill
  // the first 16-lane half and part of the second).
  const int64_t shapes[][2] = {{1, 1},     {3, 5},   {37, 17}, {33, 100}, {70, 768},
                               {45, 1037}, {48, 40}, {50, 33}, {127, 70}, {96, 300}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const auto w = randn(static_cast<size_t>(rows * cols), rng);
    for (StoredType t : {StoredType::kF32, StoredType::kF16, StoredType::kBF16}) {
      StoredCopy W = store(w, t, rows, cols, cols);  // W.f32: the reference, row-major
      const std::vector<float> pf = panel_order(W.f32, rows, cols);
      const std::vector<uint16_t> pb = t == StoredType::kF32 ? W.bits : panel_order(W.bits, rows, cols);
      W.view = {t, t == StoredType::kF32 ? static_cast<const void*>(pf.data()) : pb.data(), rows, cols, 0, true};
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 33, 130}) {
        if (n == 130 && rows * cols > 40000) continue;
        // A share from the second panel to the end, or (even n, 96 rows and
        // more) one panel in the middle, whose neighbours must stay untouched.
        const int64_t r0 = rows > kPanelRows ? kPanelRows : 0;
        const int64_t r1 = rows >= 3 * kPanelRows && n % 2 == 0 ? 2 * kPanelRows : rows;
        check_linear_share(linear_rows, "panels", W, n, n % 2 == 1, rng, r0, r1);
      }
    }
  }
}

// A loaded matrix reads back its values wherever it is stored (panels here
// when the AVX-512 kernels are built, row-major elsewhere).
TEST(Kernels, WeightMatrixReadsBackAsStored) {
  std::mt19937 rng(12);
  const int64_t rows = 77, cols = 9;
  const auto w = randn(static_cast<size_t>(rows * cols), rng);
  WeightMatrix W = WeightMatrix::from_f32(w.data(), rows, cols, StoredType::kF32);
  EXPECT_FALSE(W.panels);
  W.to_panels();
  EXPECT_EQ(W.panels, kPanelWeights);
  std::vector<float> row(static_cast<size_t>(cols)), all(w.size());
  W.rows_to_f32(0, rows, all.data());
  for (int64_t r = 0; r < rows; ++r) {
    W.row_to_f32(r, row.data());
    for (int64_t c = 0; c < cols; ++c) {
      const float want = w[static_cast<size_t>(r * cols + c)];
      ASSERT_EQ(W.at(r, c), want) << r << "," << c;
      ASSERT_EQ(row[static_cast<size_t>(c)], want) << r << "," << c;
      ASSERT_EQ(all[static_cast<size_t>(r * cols + c)], want) << r << "," << c;
    }
  }
}

// IEEE binary16, decoded from its fields alone: (-1)^s * m * 2^(e - 25) with
// the implicit bit (e > 0), m * 2^-24 when subnormal (e = 0); e = 31 is Inf/NaN.
bool f16_reference(uint16_t h, float* out) {
  const int sign = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0x1F) return false;
  const double mag =
      e == 0 ? std::ldexp(static_cast<double>(m), -24) : std::ldexp(static_cast<double>(m | 0x400), e - 25);
  *out = static_cast<float>(sign ? -mag : mag);  // exact: every binary16 value is a float
  return true;
}

// bfloat16: the top half of an IEEE binary32; exponent 0xFF is Inf/NaN.
bool bf16_reference(uint16_t h, float* out) {
  if (((h >> 7) & 0xFF) == 0xFF) return false;
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  std::memcpy(out, &bits, sizeof bits);
  return true;
}

// Every finite F16 and BF16 pattern goes through each path's conversion
// exactly: X = the identity picks each weight out unchanged. The expected
// values are decoded from the bit fields above, not by the code under test;
// non-finite patterns are stored as zero (Inf * 0 would be NaN).
TEST(Kernels, LinearConvertsEveryHalfPatternExactly) {
  constexpr int64_t kCols = 16, kRows = 65536 / kCols;
  std::vector<float> X(kCols * kCols, 0.0f);
  for (int64_t i = 0; i < kCols; ++i) X[static_cast<size_t>(i * kCols + i)] = 1.0f;
  for (StoredType t : {StoredType::kF16, StoredType::kBF16}) {
    const auto reference = t == StoredType::kF16 ? f16_reference : bf16_reference;
    std::vector<uint16_t> bits(65536);
    std::vector<float> want(65536, 0.0f);
    int finite = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      const bool ok = reference(static_cast<uint16_t>(h), &want[h]);
      bits[h] = ok ? static_cast<uint16_t>(h) : 0;
      finite += ok;
    }
    // 2 * 31 * 1024 finite binary16 patterns, 2 * 255 * 128 finite bfloat16 ones.
    ASSERT_EQ(finite, t == StoredType::kF16 ? 63488 : 65280);
    const WeightView W{t, bits.data(), kRows, kCols};
    for (LinearPath fn : {linear_rows, linear_detail::rows_packed, linear_detail::rows_generic}) {
      std::vector<float> Y(static_cast<size_t>(kCols * kRows));
      fn(W, X.data(), kCols, kCols, nullptr, Y.data(), kRows, 0, kRows);
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t p = 0; p < kCols; ++p) {
          const size_t i = static_cast<size_t>(r * kCols + p);
          ASSERT_EQ(Y[static_cast<size_t>(p * kRows + r)], want[i]) << to_string(t) << " pattern 0x" << std::hex << i;
        }
    }
    // The same patterns stored as panels.
    const std::vector<uint16_t> panel_bits = panel_order(bits, kRows, kCols);
    std::vector<float> Y(static_cast<size_t>(kCols * kRows));
    linear_rows(WeightView{t, panel_bits.data(), kRows, kCols, 0, true}, X.data(), kCols, kCols, nullptr, Y.data(),
                kRows, 0, kRows);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t p = 0; p < kCols; ++p) {
        const size_t i = static_cast<size_t>(r * kCols + p);
        ASSERT_EQ(Y[static_cast<size_t>(p * kRows + r)], want[i])
            << to_string(t) << " panels, pattern 0x" << std::hex << i;
      }
  }
}

// transposed() moves element (r, c) to (c, r) at the stored dtype, bit for
// bit, for every dtype and for shapes that are not multiples of anything.
TEST(Kernels, TransposedKeepsEveryValueAtItsStoredDtype) {
  std::mt19937 rng(9);
  const int64_t rows = 37, cols = 70;
  const auto w = randn(static_cast<size_t>(rows * cols), rng);
  for (StoredType t : {StoredType::kF32, StoredType::kF16, StoredType::kBF16}) {
    const WeightMatrix W = WeightMatrix::from_f32(store(w, t, rows, cols, cols).f32.data(), rows, cols, t);
    const WeightMatrix T = W.transposed();
    ASSERT_EQ(T.type, t);
    ASSERT_EQ(T.rows, cols);
    ASSERT_EQ(T.cols, rows);
    ASSERT_EQ(T.bytes(), W.bytes());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t from = static_cast<size_t>(r * cols + c), to = static_cast<size_t>(c * rows + r);
        if (t == StoredType::kF32) {
          ASSERT_EQ(std::memcmp(&T.f32[to], &W.f32[from], 4), 0) << r << "," << c;
        } else {
          ASSERT_EQ(T.half[to], W.half[from]) << to_string(t) << " " << r << "," << c;
        }
      }
  }
}

// linear() refuses an input whose width is not the weight's, naming both shapes
// (the kernels would read each input row past its end).
TEST(Kernels, LinearRefusesAnInputOfTheWrongWidth) {
  ThreadPool pool(2);
  const std::vector<float> w(static_cast<size_t>(6 * 4), 0.5f);
  const WeightMatrix W = WeightMatrix::from_f32(w.data(), 6, 4, StoredType::kF32);
  for (int64_t n : {1, 3}) {
    MatrixRM X = MatrixRM::Zero(n, 5), Y;
    uint64_t flops = 0;
    try {
      linear(pool, X, W, nullptr, Y, flops);
      ADD_FAILURE() << "expected an error for n " << n;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("(" + std::to_string(n) + ", 5)"), std::string::npos) << what;
      EXPECT_NE(what.find("(6, 4)"), std::string::npos) << what;
    }
  }
}

// The engine's linear() over a thread pool: the same values however the rows
// are shared, for decode (n = 1) and batches, on WeightMatrix as loaded.
TEST(Kernels, LinearOverThePoolMatchesDoubleReference) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t rows = 300, cols = 200;
  const auto w = randn(static_cast<size_t>(rows * cols), rng), b = randn(static_cast<size_t>(rows), rng);
  for (StoredType t : {StoredType::kF32, StoredType::kF16, StoredType::kBF16}) {
    WeightMatrix W = WeightMatrix::from_f32(store(w, t, rows, cols, cols).f32.data(), rows, cols, t);
    W.to_panels();  // as the loaders keep it
    ASSERT_EQ(W.bytes(), static_cast<uint64_t>(rows * cols * stored_bytes(t)));
    for (int64_t n : {1, 3, 8, 40}) {
      MatrixRM X(n, cols), Y;
      for (int64_t i = 0; i < X.size(); ++i) X.data()[i] = randn(1, rng)[0];
      uint64_t flops = 0;
      linear(pool, X, W, b.data(), Y, flops);
      EXPECT_EQ(flops, static_cast<uint64_t>(2 * n * rows * cols));
      ASSERT_EQ(Y.rows(), n);
      ASSERT_EQ(Y.cols(), rows);
      for (int64_t p = 0; p < n; ++p)
        for (int64_t r = 0; r < rows; ++r) {
          double acc = b[static_cast<size_t>(r)], mag = std::fabs(acc);
          for (int64_t k = 0; k < cols; ++k) {
            const double v = static_cast<double>(W.at(r, k)) * X(p, k);
            acc += v;
            mag += std::fabs(v);
          }
          ASSERT_NEAR(Y(p, r), acc, 2e-6 * mag) << to_string(t) << " n " << n << " row " << r;
        }
    }
  }
}

// BF16 products (WeightMatrix::bf16_products): the inputs rounded to bf16,
// then exact products summed in f32, against double loops over the rounded
// inputs, on panels (AVX512_BF16's dot products where built) and row-major
// (the rounded inputs through the f32 path), odd and even widths, partial
// panels, decode and batches; an F16 matrix ignores the flag.
TEST(Kernels, Bf16ProductsRoundTheInputsOnly) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t shapes[][2] = {{48, 40}, {50, 33}, {127, 70}, {96, 300}, {70, 768}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const auto w = randn(static_cast<size_t>(rows * cols), rng), b = randn(static_cast<size_t>(rows), rng);
    for (StoredType t : {StoredType::kBF16, StoredType::kF16})
      for (bool panels : {true, false}) {
        WeightMatrix W = WeightMatrix::from_f32(store(w, t, rows, cols, cols).f32.data(), rows, cols, t);
        if (panels) W.to_panels();
        W.bf16_products = true;
        for (int64_t n : {1, 2, 5, 8, 9, 17, 33}) {
          MatrixRM X(n, cols), Y;
          for (int64_t i = 0; i < X.size(); ++i) X.data()[i] = randn(1, rng)[0];
          uint64_t flops = 0;
          linear(pool, X, W, b.data(), Y, flops);
          double worst = 0, moved = 0;  // vs the rounded inputs' sums; how far those are from the exact ones
          for (int64_t p = 0; p < n; ++p)
            for (int64_t r = 0; r < rows; ++r) {
              double acc = b[static_cast<size_t>(r)], exact = acc, mag = std::fabs(acc);
              for (int64_t k = 0; k < cols; ++k) {
                const float x = t == StoredType::kBF16 ? bf16_to_f32(f32_to_bf16(X(p, k))) : X(p, k);
                acc += static_cast<double>(W.at(r, k)) * x;
                exact += static_cast<double>(W.at(r, k)) * X(p, k);
                mag += std::fabs(static_cast<double>(W.at(r, k)) * x);
              }
              worst = std::max(worst, std::fabs(Y(p, r) - acc) / mag);
              moved = std::max(moved, std::fabs(acc - exact) / mag);
            }
          const std::string what = std::string(to_string(t)) + (panels ? " panels " : " row-major ") +
                                   std::to_string(rows) + "x" + std::to_string(cols) + " n " + std::to_string(n);
          EXPECT_LT(worst, 2e-6) << what;
          if (t == StoredType::kBF16) {
            EXPECT_GT(moved, 1e-4) << what << ": the inputs were not rounded";
          }
        }
        MatrixRM none(0, cols), Y;  // no positions: nothing to compute
        uint64_t flops = 0;
        linear(pool, none, W, b.data(), Y, flops);
        EXPECT_EQ(Y.rows(), 0);
      }
  }
}

}  // namespace
}  // namespace kvscope
