// Weights of a Llama-architecture checkpoint (Llama, Mistral, Qwen2), kept
// as stored: F16 and BF16 matrices stay at half precision (a 1B model is
// never copied to f32), F32 stays f32. Norm weights and biases are small and
// kept as f32 vectors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

enum class StoredType { kF32, kF16, kBF16 };

const char* to_string(StoredType t);  // "F32" / "F16" / "BF16"

// A (rows, cols) row-major matrix in its checkpoint's dtype.
struct StoredMatrix {
  StoredType type = StoredType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<float> f32;      // (rows, cols) when type == kF32
  std::vector<uint16_t> half;  // (rows, cols) IEEE binary16 or bfloat16 otherwise

  bool empty() const { return rows == 0; }
  uint64_t bytes() const { return type == StoredType::kF32 ? f32.size() * 4ull : half.size() * 2ull; }
  // Row r as f32 (embedding lookup, and the reference-width tile of a GEMM).
  void row_to_f32(int64_t r, float* out) const;
  // Rows [r0, r1) as f32, (r1 - r0, cols) row-major.
  void rows_to_f32(int64_t r0, int64_t r1, float* out) const;
};

struct LlamaLayer {
  std::vector<float> attn_norm;       // (d)          input_layernorm.weight
  StoredMatrix wq, wk, wv, wo;        // (H*hd, d), (Hkv*hd, d), (Hkv*hd, d), (d, H*hd)
  std::vector<float> bq, bk, bv;      // (H*hd), (Hkv*hd), (Hkv*hd): Qwen2 only, else empty
  std::vector<float> mlp_norm;        // (d)          post_attention_layernorm.weight
  StoredMatrix w_gate, w_up, w_down;  // (ff, d), (ff, d), (d, ff)
};

struct LlamaWeights {
  StoredMatrix embed;  // (vocab, d) model.embed_tokens.weight
  std::vector<LlamaLayer> layers;
  std::vector<float> norm;  // (d) model.norm.weight
  StoredMatrix lm_head;     // (vocab, d); empty when tied to embed
  const StoredMatrix& head() const { return lm_head.empty() ? embed : lm_head; }
  uint64_t bytes() const;  // resident bytes of everything above
};

}  // namespace kvscope
