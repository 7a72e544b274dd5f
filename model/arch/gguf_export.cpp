// Model -> GGUF. The tensors are the loader's (gguf_model.cpp) in reverse:
// llama.cpp's names, dims in ggml order (row length first), every matrix
// (out, in) as the engine keeps it, llama's Q and K rows permuted back to
// llama.cpp's pairing, a tied head left out.
#include "model/arch/gguf_export.h"

#include <cstring>
#include <filesystem>

#include "model/arch/gguf_quantize.h"
#include "model/arch/gguf_write.h"
#include "model/core/error.h"

namespace kvscope {
namespace {

bool k_quant(GgmlType t) {
  return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

std::string gguf_arch(const Config& c) {
  if (c.arch == Arch::kGpt2) return "gpt2";
  return c.model_type == "qwen2" ? "qwen2" : "llama";  // Mistral converts as llama
}

// GGUF row of Hugging Face row r in a (heads x hd, cols) Q or K matrix:
// within a head, HF row j hd/2 + i goes to 2i + j (LlamaModel.permute).
int64_t permuted_row(int64_t r, int64_t hd) {
  const int64_t head = r / hd, k = r % hd, half = hd / 2;
  return head * hd + (k < half ? 2 * k : 2 * (k - half) + 1);
}

class TensorOut {
 public:
  TensorOut(GgufWriter& w, GgmlType asked, std::vector<ExportedTensor>& list) : w_(w), asked_(asked), list_(list) {}

  // A (rows, cols) matrix; `hd` > 0 permutes its rows by heads of hd rows.
  void matrix(const std::string& name, const WeightMatrix& m, int64_t hd = 0) {
    const GgmlType type = export_type(asked_, m.cols);
    const GgmlTypeInfo& info = ggml_type_info(type);
    const uint64_t row_bytes = static_cast<uint64_t>(m.cols / info.block_size * info.block_bytes);
    std::vector<uint8_t> out(row_bytes * static_cast<uint64_t>(m.rows));
    const bool copy = is_quantized(m.type) && ggml_type_of(m.type) == type;
    std::vector<float> row(static_cast<size_t>(m.cols));
    for (int64_t r = 0; r < m.rows; ++r) {
      uint8_t* dst = out.data() + row_bytes * static_cast<uint64_t>(hd > 0 ? permuted_row(r, hd) : r);
      if (copy) {
        std::memcpy(dst, m.blocks.data() + row_bytes * static_cast<uint64_t>(r), row_bytes);
      } else {
        m.rows_to_f32(r, r + 1, row.data());
        quantize_row(type, row.data(), m.cols, dst);
      }
    }
    add(name, {m.cols, m.rows}, type, std::move(out), type != asked_);
  }

  // f32 values with dims `dims`, written at `type` (F32, F16, BF16).
  void values(const std::string& name, const float* v, std::vector<int64_t> dims, GgmlType type = GgmlType::kF32) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<uint8_t> out(static_cast<size_t>(n) * (type == GgmlType::kF32 ? 4 : 2));
    quantize_row(type, v, n, out.data());
    add(name, std::move(dims), type, std::move(out), false);
  }
  void vec(const std::string& name, const std::vector<float>& v) {
    values(name, v.data(), {static_cast<int64_t>(v.size())});
  }
  void vec(const std::string& name, const Vector& v) { values(name, v.data(), {static_cast<int64_t>(v.size())}); }

 private:
  void add(const std::string& name, std::vector<int64_t> dims, GgmlType type, std::vector<uint8_t> bytes,
           bool fallback) {
    ExportedTensor t{name, dims, type, 1, bytes.size(), fallback};
    for (int64_t d : dims) t.n_elements *= static_cast<uint64_t>(d);
    list_.push_back(t);
    w_.add_tensor(name, std::move(dims), type, std::move(bytes));
  }
  GgufWriter& w_;
  GgmlType asked_;
  std::vector<ExportedTensor>& list_;
};

void gpt2_tensors(const Config& c, const Gpt2Weights& w, GgmlType asked, TensorOut& t) {
  t.matrix("token_embd.weight", w.wte);
  // llama-quantize never quantizes the position table; the converter writes it at a float outtype.
  const bool half = asked == GgmlType::kF16 || asked == GgmlType::kBF16;
  t.values("position_embd.weight", w.wpe.data(), {c.n_embd, w.wpe.rows()}, half ? asked : GgmlType::kF32);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const Gpt2Layer& L = w.layers[i];
    t.vec(p + "attn_norm.weight", L.ln_1_g);
    t.vec(p + "attn_norm.bias", L.ln_1_b);
    t.matrix(p + "attn_qkv.weight", L.attn_w_t);
    t.vec(p + "attn_qkv.bias", L.attn_b);
    t.matrix(p + "attn_output.weight", L.attn_proj_w_t);
    t.vec(p + "attn_output.bias", L.attn_proj_b);
    t.vec(p + "ffn_norm.weight", L.ln_2_g);
    t.vec(p + "ffn_norm.bias", L.ln_2_b);
    t.matrix(p + "ffn_up.weight", L.fc_w_t);
    t.vec(p + "ffn_up.bias", L.fc_b);
    t.matrix(p + "ffn_down.weight", L.mlp_proj_w_t);
    t.vec(p + "ffn_down.bias", L.mlp_proj_b);
  }
  t.vec("output_norm.weight", w.ln_f_g);
  t.vec("output_norm.bias", w.ln_f_b);
  if (!w.lm_head.empty()) t.matrix("output.weight", w.lm_head);
}

void llama_tensors(const Config& c, const LlamaWeights& w, TensorOut& t) {
  const int64_t hd = gguf_arch(c) == "llama" ? c.head_dim() : 0;  // qwen2 keeps Hugging Face's rows
  t.matrix("token_embd.weight", w.embed);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const LlamaLayer& L = w.layers[i];
    t.vec(p + "attn_norm.weight", L.attn_norm);
    t.matrix(p + "attn_q.weight", L.wq, hd);
    t.matrix(p + "attn_k.weight", L.wk, hd);
    t.matrix(p + "attn_v.weight", L.wv);
    if (!L.bq.empty()) {
      t.vec(p + "attn_q.bias", L.bq);
      t.vec(p + "attn_k.bias", L.bk);
      t.vec(p + "attn_v.bias", L.bv);
    }
    t.matrix(p + "attn_output.weight", L.wo);
    t.vec(p + "ffn_norm.weight", L.mlp_norm);
    t.matrix(p + "ffn_gate.weight", L.w_gate);
    t.matrix(p + "ffn_up.weight", L.w_up);
    t.matrix(p + "ffn_down.weight", L.w_down);
  }
  t.vec("output_norm.weight", w.norm);
  if (!w.lm_head.empty()) t.matrix("output.weight", w.lm_head);
}

// general.name: the model's name, or for a Hugging Face cache snapshot
// (.../models--ORG--NAME/snapshots/HASH, whose folder name is the hash) NAME.
std::string general_name(const Model& m) {
  std::filesystem::path p = std::filesystem::path(m.dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string repo = p.parent_path().parent_path().filename().string();
  if (p.parent_path().filename() != "snapshots" || repo.rfind("models--", 0) != 0) return m.name;
  const size_t sep = repo.rfind("--");
  return sep >= 8 ? repo.substr(sep + 2) : m.name;
}

// The inverse of gguf_config.cpp's tables.
void hparams(const Model& m, const std::string& arch, GgufWriter& w) {
  const Config& c = m.config;
  auto u32 = [&](const char* key, int v) { w.add_u32(arch + "." + key, static_cast<uint32_t>(v)); };
  u32("block_count", c.n_layer);
  u32("embedding_length", c.n_embd);
  u32("attention.head_count", c.n_head);
  if (c.arch == Arch::kGpt2) {
    u32("context_length", c.n_positions);
    u32("feed_forward_length", 4 * c.n_embd);
    w.add_f32(arch + ".attention.layer_norm_epsilon", c.layer_norm_epsilon);
    return;
  }
  u32("context_length", c.max_position_embeddings);
  u32("feed_forward_length", c.n_inner);
  u32("attention.head_count_kv", c.kv_heads());
  if (c.head_size > 0) {
    u32("attention.key_length", c.head_dim());
    u32("attention.value_length", c.head_dim());
  }
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", c.layer_norm_epsilon);
  w.add_f32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  if (c.rope_scaling.type == "linear") {
    w.add_string(arch + ".rope.scaling.type", "linear");
    w.add_f32(arch + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  } else if (!c.rope_scaling.type.empty()) {
    throw Error(m.dir + ": rope_scaling type \"" + c.rope_scaling.type +
                "\" is stored in GGUF as a tensor (rope_freqs.weight), which kvscope does not write yet "
                "(expected no rope scaling or \"linear\")");
  }
}

}  // namespace

GgmlType export_type(GgmlType asked, int64_t row_length) {
  GgmlType t = asked;
  if (k_quant(t) && row_length % 256 != 0) t = t == GgmlType::kQ6_K ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
  if (row_length % ggml_type_info(t).block_size != 0) t = GgmlType::kF16;
  return t;
}

uint32_t gguf_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ4_0:
      return 2;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kQ4_K:
      return 14;
    case GgmlType::kQ6_K:
      return 18;
    case GgmlType::kBF16:
      return 32;
    default:
      throw Error(std::string("no llama.cpp file type for ") + ggml_type_info(type).name);
  }
}

GgufExport export_gguf(const Model& m, GgmlType type) {
  GgufExport out;
  GgufWriter w(32);
  const std::string arch = gguf_arch(m.config);
  w.add_string("general.architecture", arch);
  w.add_string("general.name", general_name(m));
  w.add_u32("general.file_type", gguf_file_type(type));
  w.add_u32("general.quantization_version", 2);
  hparams(m, arch, w);
  tokenizer_export(m, w);
  TensorOut t(w, type, out.tensors);
  if (const auto* g = std::get_if<Gpt2Weights>(&m.weights)) {
    gpt2_tensors(m.config, *g, type, t);
  } else {
    llama_tensors(m.config, std::get<LlamaWeights>(m.weights), t);
  }
  out.bytes = w.build();
  return out;
}

}  // namespace kvscope
