#include "engine.h"

#include <cmath>
#include <string>

#include "error.h"
#include "kernels.h"
#include "thread_pool.h"

namespace kvscope {

void KVCache::init(const Config& c) {
  n_layer = c.n_layer;
  n_embd = c.n_embd;
  capacity = c.n_positions;
  n_pos = 0;
  const size_t n = static_cast<size_t>(n_layer) * capacity * n_embd;
  k.assign(n, 0.0f);
  v.assign(n, 0.0f);
}

void KVCache::truncate(int n) {
  if (n < 0 || n > n_pos)
    throw Error("KVCache::truncate: " + std::to_string(n) + " is outside [0, " + std::to_string(n_pos) + "]");
  n_pos = n;
}

uint64_t forward_flops(const Config& c, int n_new, int seq_len) {
  const uint64_t d = static_cast<uint64_t>(c.n_embd);
  const uint64_t n = static_cast<uint64_t>(n_new);
  // New position i (0-based among the new ones) sits at seq_len - n + i and
  // attends to itself and everything before: L_i = seq_len - n + i + 1.
  const uint64_t first = static_cast<uint64_t>(seq_len) - n;
  const uint64_t sum_l = n * first + n * (n + 1) / 2;
  const uint64_t per_layer = 24 * n * d * d + 4 * d * sum_l;
  return static_cast<uint64_t>(c.n_layer) * per_layer + 2 * d * static_cast<uint64_t>(c.vocab_size);
}

uint64_t forward_read_bytes(const Model& m, int cached_positions) {
  const Config& c = m.config;
  const Weights& w = m.weights;
  auto mat = [](const MatrixRM& f, const HalfMatrix& h) {
    return h.empty() ? static_cast<uint64_t>(f.size()) * 4 : static_cast<uint64_t>(h.data.size()) * 2;
  };
  auto vec = [](const Vector& v) { return static_cast<uint64_t>(v.size()) * 4; };
  uint64_t bytes = 0;
  for (const LayerWeights& L : w.layers) {
    bytes += mat(L.attn_w_t, L.attn_w_h) + mat(L.attn_proj_w_t, L.attn_proj_w_h) + mat(L.fc_w_t, L.fc_w_h) +
             mat(L.mlp_proj_w_t, L.mlp_proj_w_h);
    bytes += vec(L.ln_1_g) + vec(L.ln_1_b) + vec(L.attn_b) + vec(L.attn_proj_b) + vec(L.ln_2_g) + vec(L.ln_2_b) +
             vec(L.fc_b) + vec(L.mlp_proj_b);
  }
  bytes += mat(w.head(), w.head_h) + vec(w.ln_f_g) + vec(w.ln_f_b);
  bytes += 2ull * static_cast<uint64_t>(c.n_embd) * 4;  // wte and wpe rows
  bytes += 2ull * static_cast<uint64_t>(c.n_layer) * static_cast<uint64_t>(cached_positions) * c.n_embd * 4;
  return bytes;
}

int engine_threads() {
  return ThreadPool::default_threads();
}

struct Workspace {
  MatrixRM x;    // (n, d) residual stream
  MatrixRM h;    // (n, d) layer-normed input
  MatrixRM qkv;  // (n, 3d)
  MatrixRM att;  // (n, d) attention output before c_proj
  MatrixRM tmp;  // (n, d) projection output
  MatrixRM fc;   // (n, 4d)
  ThreadPool pool;
};

namespace {

// Y (n, out) = X (n, in) * Wt^T + b, Wt stored (out, in). The output
// features are split across threads: decode (n = 1) is then a set of
// contiguous dot products (from the half-precision copy when the checkpoint
// stored F16: the same values, half the bytes), prefill a GEMM per share.
void linear(ThreadPool& pool, const MatrixRM& X, const MatrixRM& Wt, const Vector& b, MatrixRM& Y, uint64_t& flops,
            const HalfMatrix* half = nullptr) {
  const Eigen::Index n = X.rows(), out = Wt.rows(), in = Wt.cols();
  Y.resize(n, out);
  if (n == 1) {
    const float* bias = b.size() ? b.data() : nullptr;
    if (half && !half->empty()) {
      pool.parallel_for(
          out, [&](int64_t r0, int64_t r1) { matvec_f16(half->data.data(), in, X.data(), bias, Y.data(), r0, r1); },
          out * in);
    } else {
      pool.parallel_for(
          out, [&](int64_t r0, int64_t r1) { matvec_f32(Wt.data(), in, X.data(), bias, Y.data(), r0, r1); }, out * in);
    }
  } else {
    // Shares of whole 16-column blocks keep the GEMM kernels on aligned panels.
    const int64_t blocks = (out + 15) / 16;
    pool.parallel_for(
        blocks,
        [&](int64_t b0, int64_t b1) {
          const Eigen::Index c0 = b0 * 16, c1 = std::min<Eigen::Index>(b1 * 16, out);
          if (c1 <= c0) return;
          Y.middleCols(c0, c1 - c0).noalias() = X * Wt.middleRows(c0, c1 - c0).transpose();
          if (b.size()) Y.middleCols(c0, c1 - c0).rowwise() += b.segment(c0, c1 - c0).transpose();
        },
        n * out * in);
  }
  flops += 2ull * static_cast<uint64_t>(n) * static_cast<uint64_t>(in) * static_cast<uint64_t>(out);
}

void layer_norm(const MatrixRM& X, const Vector& g, const Vector& b, float eps, MatrixRM& Y) {
  Y.resize(X.rows(), X.cols());
  const float inv_d = 1.0f / static_cast<float>(X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const auto row = X.row(i);
    const float mean = row.sum() * inv_d;
    const float var = (row.array() - mean).square().sum() * inv_d;
    const float rstd = 1.0f / std::sqrt(var + eps);
    Y.row(i) = ((row.array() - mean) * rstd * g.transpose().array() + b.transpose().array()).matrix();
  }
}

// gelu_new: the tanh approximation GPT-2 was trained with. Eigen's packet
// tanh (a rational approximation, float precision), not libm's scalar
// tanhf: that one cost half of a small model's decode step.
void gelu_new(ThreadPool& pool, MatrixRM& X) {
  const float c = std::sqrt(2.0f / static_cast<float>(M_PI));
  float* p = X.data();
  auto run = [&](int64_t i0, int64_t i1) {
    Eigen::Map<Eigen::ArrayXf> a(p + i0, i1 - i0);
    a = 0.5f * a * (1.0f + (c * (a + 0.044715f * a.cube())).tanh());
  };
  if (X.size() > 65536) {
    pool.parallel_for(X.size(), run);
  } else {
    run(0, X.size());
  }
}

}  // namespace

Engine::Engine(const Model& model) : model_(model), ws_(new Workspace) {}
Engine::~Engine() {
  delete ws_;
}

ForwardOutput Engine::forward(const std::vector<int>& tokens, int first, KVCache* cache, bool keep_all_rows,
                              bool all_logits) {
  const Config& c = model_.config;
  const Weights& w = model_.weights;
  const int seq_len = static_cast<int>(tokens.size());
  const int n = seq_len - first;
  const int d = c.n_embd, H = c.n_head, hd = c.head_dim();
  if (n <= 0)
    throw Error("forward: no new positions (first = " + std::to_string(first) + ", sequence of " +
                std::to_string(seq_len) + ")");
  if (seq_len > c.n_positions) {
    throw Error("forward: sequence of " + std::to_string(seq_len) + " tokens exceeds the context of " +
                std::to_string(c.n_positions));
  }
  if (cache) {
    if (cache->capacity != c.n_positions || cache->n_layer != c.n_layer || cache->n_embd != d) cache->init(c);
    if (cache->n_pos != first) {
      throw Error("forward: the cache holds " + std::to_string(cache->n_pos) + " positions, expected " +
                  std::to_string(first));
    }
  } else if (first != 0) {
    throw Error("forward: without a cache the whole sequence must be computed (first must be 0)");
  }
  for (int i = 0; i < seq_len; ++i) {
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= c.vocab_size) {
      throw Error("forward: token id " + std::to_string(tokens[static_cast<size_t>(i)]) + " at position " +
                  std::to_string(i) + " is outside the vocabulary (0.." + std::to_string(c.vocab_size - 1) + ")");
    }
  }

  ForwardOutput out;
  out.first = first;
  out.n_new = n;
  out.seq_len = seq_len;
  out.n_rows = keep_all_rows ? n : 1;
  out.attn.assign(static_cast<size_t>(c.n_layer) * H * out.n_rows * seq_len, 0.0f);
  out.q.assign(static_cast<size_t>(c.n_layer) * out.n_rows * d, 0.0f);
  out.k.resize(static_cast<size_t>(c.n_layer) * n * d);
  out.v.resize(static_cast<size_t>(c.n_layer) * n * d);

  Workspace& ws = *ws_;
  ws.x.resize(n, d);
  for (int i = 0; i < n; ++i) {
    const int tok = tokens[static_cast<size_t>(first + i)];
    ws.x.row(i) = w.wte.row(tok) + w.wpe.row(first + i);
  }

  // Keys/values visible to this forward: the cache rows, or this forward's own.
  MatrixRM k_all, v_all;  // (seq_len, d), only used without a cache
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  uint64_t flops = 0;

  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    layer_norm(ws.x, L.ln_1_g, L.ln_1_b, c.layer_norm_epsilon, ws.h);
    linear(ws.pool, ws.h, L.attn_w_t, L.attn_b, ws.qkv, flops, &L.attn_w_h);

    // Record the kept rows' queries (the Q of Q·Kᵀ), and (with a cache) store this forward's K/V rows.
    for (int row = 0; row < out.n_rows; ++row)
      Eigen::Map<Vector>(&out.q[(static_cast<size_t>(l) * out.n_rows + row) * d], d) =
          ws.qkv.row(n - out.n_rows + row).segment(0, d).transpose();
    float* k_out = &out.k[static_cast<size_t>(l) * n * d];
    float* v_out = &out.v[static_cast<size_t>(l) * n * d];
    for (int i = 0; i < n; ++i) {
      Eigen::Map<Vector>(k_out + static_cast<size_t>(i) * d, d) = ws.qkv.row(i).segment(d, d).transpose();
      Eigen::Map<Vector>(v_out + static_cast<size_t>(i) * d, d) = ws.qkv.row(i).segment(2 * d, d).transpose();
    }
    const float* k_base;
    const float* v_base;
    if (cache) {
      for (int i = 0; i < n; ++i) {
        std::copy(k_out + static_cast<size_t>(i) * d, k_out + static_cast<size_t>(i + 1) * d,
                  cache->k_row(l, first + i));
        std::copy(v_out + static_cast<size_t>(i) * d, v_out + static_cast<size_t>(i + 1) * d,
                  cache->v_row(l, first + i));
      }
      k_base = cache->k_row(l, 0);
      v_base = cache->v_row(l, 0);
    } else {
      k_base = k_out;
      v_base = v_out;
    }
    ws.att.resize(n, d);
    // Heads are independent and equally costly: one share of heads per thread.
    // Recorded rows get their weights written straight into out.attn.
    std::vector<uint64_t> head_flops(static_cast<size_t>(H), 0);
    ws.pool.parallel_for(
        H,
        [&](int64_t h0, int64_t h1) {
          std::vector<float> scratch;
          for (int64_t h = h0; h < h1; ++h) {
            for (int i = 0; i < n; ++i) {
              const int len = first + i + 1;  // keys this query may see, itself included
              const int row = i - (n - out.n_rows);
              float* p;
              if (row >= 0) {
                p = &out.attn[((static_cast<size_t>(l) * H + h) * out.n_rows + row) * seq_len];
              } else {
                scratch.resize(static_cast<size_t>(len));
                p = scratch.data();
              }
              attend(ws.qkv.data() + static_cast<size_t>(i) * 3 * d + h * hd, k_base + h * hd, v_base + h * hd, d, hd,
                     len, scale, p, ws.att.data() + static_cast<size_t>(i) * d + h * hd);
              head_flops[static_cast<size_t>(h)] += 4ull * static_cast<uint64_t>(hd) * static_cast<uint64_t>(len);
            }
          }
        },
        2 * static_cast<int64_t>(n) * (first + n) * d);
    uint64_t att_flops = 0;
    for (uint64_t f : head_flops) att_flops += f;
    flops += att_flops;

    linear(ws.pool, ws.att, L.attn_proj_w_t, L.attn_proj_b, ws.tmp, flops, &L.attn_proj_w_h);
    ws.x += ws.tmp;
    layer_norm(ws.x, L.ln_2_g, L.ln_2_b, c.layer_norm_epsilon, ws.h);
    linear(ws.pool, ws.h, L.fc_w_t, L.fc_b, ws.fc, flops, &L.fc_w_h);
    gelu_new(ws.pool, ws.fc);
    linear(ws.pool, ws.fc, L.mlp_proj_w_t, L.mlp_proj_b, ws.tmp, flops, &L.mlp_proj_w_h);
    ws.x += ws.tmp;
  }
  if (cache) cache->n_pos = seq_len;

  // LM head for the last position only: that is all generation needs.
  MatrixRM last = all_logits ? ws.x : MatrixRM(ws.x.bottomRows(1));
  layer_norm(last, w.ln_f_g, w.ln_f_b, c.layer_norm_epsilon, ws.h);
  const MatrixRM& head = w.head();
  MatrixRM logits_row;
  linear(ws.pool, ws.h, head, Vector(), logits_row, flops, &w.head_h);
  out.logits.assign(logits_row.data(), logits_row.data() + logits_row.size());
  out.flops = flops;
  return out;
}

}  // namespace kvscope
