// The Llama-architecture layer (Llama, Mistral, Qwen2): RMSNorm, Q/K/V
// projections (Qwen2 with biases), RoPE on Q and K, grouped-query attention
// over the cache (engine.cpp), output projection, SwiGLU MLP.
#include <cmath>

#include "model/engine/engine_detail.h"
#include "model/engine/linear.h"
#include "model/engine/llama_ops.h"

namespace kvscope::detail {
namespace {

// Qwen2's biases; empty (none) elsewhere.
const float* bias(const std::vector<float>& b) {
  return b.empty() ? nullptr : b.data();
}

}  // namespace

void llama_embed(const LlamaWeights& w, const std::vector<BatchEntry>& batch, MatrixRM& x) {
  x.resize(static_cast<Eigen::Index>(batch.size()), w.embed.cols);
  for (size_t i = 0; i < batch.size(); ++i)
    w.embed.row_to_f32(batch[i].token, x.row(static_cast<Eigen::Index>(i)).data());
}

void llama_layer(const Model& m, Workspace& ws, KVCache& cache, BatchPlan& plan, const std::vector<BatchEntry>& batch,
                 int l, const ForwardTaps& taps, ForwardOutput& out, uint64_t& flops) {
  const Config& c = m.config;
  const LlamaLayer& L = m.llama.layers[static_cast<size_t>(l)];
  const int hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads();
  rms_norm(ws.x, L.attn_norm, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.wq, bias(L.bq), ws.q, flops);
  linear(ws.pool, ws.h, L.wk, bias(L.bk), ws.k, flops);
  linear(ws.pool, ws.h, L.wv, bias(L.bv), ws.v, flops);
  // Rotary embeddings: Q and K rows rotated by their own position (the cache keeps K rotated).
  for (size_t i = 0; i < batch.size(); ++i) {
    const Eigen::Index r = static_cast<Eigen::Index>(i);
    apply_rope(ws.q.row(r).data(), H, hd, batch[i].pos, ws.inv_freq);
    apply_rope(ws.k.row(r).data(), Hkv, hd, batch[i].pos, ws.inv_freq);
  }
  store_and_attend(c, ws, cache, plan, l,
                   {ws.q.data(), static_cast<size_t>(H * hd), ws.k.data(), ws.v.data(), static_cast<size_t>(Hkv * hd)},
                   taps, out, flops);
  linear(ws.pool, ws.att, L.wo, nullptr, ws.tmp, flops);
  ws.x += ws.tmp;
  rms_norm(ws.x, L.mlp_norm, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.w_gate, nullptr, ws.fc, flops);
  linear(ws.pool, ws.h, L.w_up, nullptr, ws.up, flops);
  swiglu(ws.pool, ws.fc, ws.up);
  linear(ws.pool, ws.fc, L.w_down, nullptr, ws.tmp, flops);
  ws.x += ws.tmp;
}

void llama_logits(const Model& m, Workspace& ws, const MatrixRM& sel, float* logits, uint64_t& flops) {
  rms_norm(sel, m.llama.norm, m.config.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, m.llama.head(), nullptr, logits, flops);
}

}  // namespace kvscope::detail
