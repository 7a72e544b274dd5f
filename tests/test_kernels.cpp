// The decode kernels (model/kernels.h) against plain double-precision loops,
// on shapes that hit every path: row counts that are not multiples of the
// four-row pass, short rows and long (streamed) ones, widths with and without
// a partial 16-float tail or a partial 64-float block, head widths
// from 1 to beyond the register-resident chunks, and sub-ranges of rows.

#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <random>
#include <vector>

#include "kernels.h"
#include "safetensors.h"

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

}  // namespace
}  // namespace kvscope
