#include "model/engine/llama_ops.h"

#include <cmath>

#include "model/engine/kernels.h"

namespace kvscope {

void stored_linear(ThreadPool& pool, const MatrixRM& X, const StoredMatrix& W, const std::vector<float>& b, MatrixRM& Y,
                   uint64_t& flops) {
  const Eigen::Index n = X.rows(), out = W.rows, in = W.cols;
  Y.resize(n, out);
  const float* bias = b.empty() ? nullptr : b.data();
  if (n == 1) {
    pool.parallel_for(
        out,
        [&](int64_t r0, int64_t r1) {
          switch (W.type) {
            case StoredType::kF32:
              return matvec_f32(W.f32.data(), in, X.data(), bias, Y.data(), r0, r1);
            case StoredType::kF16:
              return matvec_f16(W.half.data(), in, X.data(), bias, Y.data(), r0, r1);
            case StoredType::kBF16:
              return matvec_bf16(W.half.data(), in, X.data(), bias, Y.data(), r0, r1);
          }
        },
        out * in);
  } else {
    // Shares of whole 16-row blocks of W; half weights become an f32 tile per share.
    const int64_t blocks = (out + 15) / 16;
    pool.parallel_for(
        blocks,
        [&](int64_t b0, int64_t b1) {
          const Eigen::Index c0 = b0 * 16, c1 = std::min<Eigen::Index>(b1 * 16, out);
          if (c1 <= c0) return;
          if (W.type == StoredType::kF32) {
            const Eigen::Map<const MatrixRM> Wm(W.f32.data() + c0 * in, c1 - c0, in);
            Y.middleCols(c0, c1 - c0).noalias() = X * Wm.transpose();
          } else {
            MatrixRM tile(c1 - c0, in);
            W.rows_to_f32(c0, c1, tile.data());
            Y.middleCols(c0, c1 - c0).noalias() = X * tile.transpose();
          }
          if (bias) {
            Y.middleCols(c0, c1 - c0).rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias + c0, c1 - c0);
          }
        },
        n * out * in);
  }
  flops += 2ull * static_cast<uint64_t>(n) * static_cast<uint64_t>(in) * static_cast<uint64_t>(out);
}

void rms_norm(const MatrixRM& X, const std::vector<float>& g, float eps, MatrixRM& Y) {
  Y.resize(X.rows(), X.cols());
  const Eigen::Map<const Eigen::RowVectorXf> gm(g.data(), static_cast<Eigen::Index>(g.size()));
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const float ms = X.row(i).squaredNorm() / static_cast<float>(X.cols());
    Y.row(i) = X.row(i).cwiseProduct(gm) * (1.0f / std::sqrt(ms + eps));
  }
}

void swiglu(ThreadPool& pool, MatrixRM& gate, const MatrixRM& up) {
  float* g = gate.data();
  const float* u = up.data();
  auto run = [&](int64_t i0, int64_t i1) {
    Eigen::Map<Eigen::ArrayXf> a(g + i0, i1 - i0);
    const Eigen::Map<const Eigen::ArrayXf> b(u + i0, i1 - i0);
    a = a / (1.0f + (-a).exp()) * b;
  };
  if (gate.size() > 65536) {
    pool.parallel_for(gate.size(), run);
  } else {
    run(0, gate.size());
  }
}

std::vector<double> rope_inv_freq(const Config& c) {
  const int hd = c.head_dim();
  std::vector<double> inv(static_cast<size_t>(hd / 2));
  const RopeScaling& rs = c.rope_scaling;
  for (int i = 0; i < hd / 2; ++i) {
    double f = 1.0 / std::pow(c.rope_theta, 2.0 * i / hd);
    if (rs.type == "linear") {
      f /= rs.factor;
    } else if (rs.type == "llama3") {
      // Wavelengths beyond old/low are slowed by factor, those under old/high kept, a blend between.
      const double old = rs.original_max_position_embeddings;
      const double wavelen = 2 * M_PI / f;
      if (wavelen > old / rs.low_freq_factor) {
        f /= rs.factor;
      } else if (wavelen >= old / rs.high_freq_factor) {
        const double smooth = (old / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = (1 - smooth) * f / rs.factor + smooth * f;
      }
    }
    inv[static_cast<size_t>(i)] = f;
  }
  return inv;
}

void apply_rope(float* x, int n_heads, int hd, int pos, const std::vector<double>& inv_freq) {
  const int half = hd / 2;
  float cs[512], sn[512];  // head widths up to 1024
  for (int i = 0; i < half; ++i) {
    const double a = pos * inv_freq[static_cast<size_t>(i)];
    cs[i] = static_cast<float>(std::cos(a));
    sn[i] = static_cast<float>(std::sin(a));
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * hd;
    for (int i = 0; i < half; ++i) {
      const float x1 = v[i], x2 = v[i + half];
      v[i] = x1 * cs[i] - x2 * sn[i];
      v[i + half] = x2 * cs[i] + x1 * sn[i];
    }
  }
}

}  // namespace kvscope
