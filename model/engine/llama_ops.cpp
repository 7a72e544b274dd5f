#include "model/engine/llama_ops.h"

#include <cmath>

namespace kvscope {

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
