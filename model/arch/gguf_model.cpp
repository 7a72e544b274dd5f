// llama.cpp's tensor names, per family, as the places kvscope keeps them.
// Dims are in ggml order (row length first): a PyTorch (out, in) matrix is
// [in, out]. GPT-2's converter transposes the Conv1D weights (stored (in,
// out) by Hugging Face) to (out, in), so every GGUF matrix is (out, in),
// the layout the engine keeps.
#include "model/arch/gguf_model.h"

#include <algorithm>
#include <filesystem>

#include "model/arch/gguf_config.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/arch/gguf_weights.h"
#include "model/arch/model.h"
#include "model/arch/model_context.h"
#include "model/core/error.h"
#include "model/core/units.h"
#include "model/kv/kv_layout.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using Use = GgufWanted::Use;

std::function<void(std::vector<float>&&)> into(std::vector<float>& dst) {
  return [&dst](std::vector<float>&& v) { dst = std::move(v); };
}
std::function<void(std::vector<float>&&)> into(Vector& dst) {
  return [&dst](std::vector<float>&& v) { dst = Eigen::Map<Vector>(v.data(), static_cast<Eigen::Index>(v.size())); };
}
std::function<void(std::vector<float>&&)> into(MatrixRM& dst, int64_t rows, int64_t cols) {
  return [&dst, rows, cols](std::vector<float>&& v) { dst = Eigen::Map<MatrixRM>(v.data(), rows, cols); };
}

GgufWanted matrix(const std::string& name, int64_t in, int64_t out, WeightMatrix& m, Use use = Use::kProduct,
                  int permuted_heads = 0) {
  return {name, {in, out}, use, &m, {}, permuted_heads};
}
GgufWanted vec(const std::string& name, int64_t n, std::function<void(std::vector<float>&&)> put) {
  return {name, {n}, Use::kVector, nullptr, std::move(put), 0};
}

// Whether two tensors hold the same type, dims and bytes (an older GPT-2
// converter wrote the tied head as a copy of token_embd: kept once).
bool same_tensor(const GgufFile& f, const GgufTensor& a, const GgufTensor& b) {
  if (a.type != b.type || a.dims != b.dims) return false;
  std::vector<uint8_t> x(static_cast<size_t>(a.n_bytes)), y(static_cast<size_t>(b.n_bytes));
  f.read_raw(a, x.data());
  f.read_raw(b, y.data());
  return x == y;
}

std::vector<GgufWanted> gpt2_wanted(const GgufFile& f, const Config& c, Gpt2Weights& w) {
  const int64_t d = c.n_embd, V = c.vocab_size;
  const GgufTensor *emb = f.tensor("token_embd.weight"), *out = f.tensor("output.weight");
  const bool tied = !out || (emb && same_tensor(f, *emb, *out));
  std::vector<GgufWanted> t;
  t.push_back(matrix("token_embd.weight", d, V, w.wte, tied ? Use::kProduct : Use::kLookup));
  t.push_back({"position_embd.weight", {d, c.n_positions}, Use::kTable, nullptr, into(w.wpe, c.n_positions, d), 0});
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Gpt2Layer& L = w.layers[static_cast<size_t>(i)];
    t.push_back(vec(p + "attn_norm.weight", d, into(L.ln_1_g)));
    t.push_back(vec(p + "attn_norm.bias", d, into(L.ln_1_b)));
    t.push_back(matrix(p + "attn_qkv.weight", d, 3 * d, L.attn_w_t));
    t.push_back(vec(p + "attn_qkv.bias", 3 * d, into(L.attn_b)));
    t.push_back(matrix(p + "attn_output.weight", d, d, L.attn_proj_w_t));
    t.push_back(vec(p + "attn_output.bias", d, into(L.attn_proj_b)));
    t.push_back(vec(p + "ffn_norm.weight", d, into(L.ln_2_g)));
    t.push_back(vec(p + "ffn_norm.bias", d, into(L.ln_2_b)));
    t.push_back(matrix(p + "ffn_up.weight", d, 4 * d, L.fc_w_t));
    t.push_back(vec(p + "ffn_up.bias", 4 * d, into(L.fc_b)));
    t.push_back(matrix(p + "ffn_down.weight", 4 * d, d, L.mlp_proj_w_t));
    t.push_back(vec(p + "ffn_down.bias", d, into(L.mlp_proj_b)));
  }
  t.push_back(vec("output_norm.weight", d, into(w.ln_f_g)));
  t.push_back(vec("output_norm.bias", d, into(w.ln_f_b)));
  if (!tied) t.push_back(matrix("output.weight", d, V, w.lm_head));
  return t;
}

// Llama (and Mistral, converted as llama) and Qwen2. Only "llama" files have
// their Q and K rows permuted (llama.cpp's rotary kernel pairs dims 2i, 2i+1;
// Qwen2's uses Hugging Face's halves, so its converter leaves them).
std::vector<GgufWanted> llama_wanted(const Config& c, bool permuted, LlamaWeights& w) {
  const int64_t d = c.n_embd, V = c.vocab_size, ff = c.n_inner;
  const int64_t q = static_cast<int64_t>(c.n_head) * c.head_dim(),
                kv = static_cast<int64_t>(c.kv_heads()) * c.head_dim();
  const bool tied = c.tie_word_embeddings;
  std::vector<GgufWanted> t;
  t.push_back(matrix("token_embd.weight", d, V, w.embed, tied ? Use::kProduct : Use::kLookup));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LlamaLayer& L = w.layers[static_cast<size_t>(i)];
    t.push_back(vec(p + "attn_norm.weight", d, into(L.attn_norm)));
    t.push_back(matrix(p + "attn_q.weight", d, q, L.wq, Use::kProduct, permuted ? c.n_head : 0));
    t.push_back(matrix(p + "attn_k.weight", d, kv, L.wk, Use::kProduct, permuted ? c.kv_heads() : 0));
    t.push_back(matrix(p + "attn_v.weight", d, kv, L.wv));
    if (c.qkv_bias) {
      t.push_back(vec(p + "attn_q.bias", q, into(L.bq)));
      t.push_back(vec(p + "attn_k.bias", kv, into(L.bk)));
      t.push_back(vec(p + "attn_v.bias", kv, into(L.bv)));
    }
    t.push_back(matrix(p + "attn_output.weight", q, d, L.wo));
    t.push_back(vec(p + "ffn_norm.weight", d, into(L.mlp_norm)));
    t.push_back(matrix(p + "ffn_gate.weight", d, ff, L.w_gate));
    t.push_back(matrix(p + "ffn_up.weight", d, ff, L.w_up));
    t.push_back(matrix(p + "ffn_down.weight", ff, d, L.w_down));
  }
  t.push_back(vec("output_norm.weight", d, into(w.norm)));
  if (!tied) t.push_back(matrix("output.weight", d, V, w.lm_head));
  return t;
}

// tokenizer.ggml.eot_token_id and eom_token_id end a generation too (llama.cpp
// stops at them: an instruct model's end of turn).
void add_end_tokens(const GgufFile& f, Config& c) {
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!f.find(key)) continue;
    const uint64_t id = f.meta_uint(key);
    if (id >= static_cast<uint64_t>(c.vocab_size)) {
      throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": found " + std::to_string(id) +
                  ", expected a token id below the vocabulary size " + std::to_string(c.vocab_size));
    }
    if (!c.is_eos(static_cast<int>(id))) c.eos_token_ids.push_back(static_cast<int>(id));
  }
}

void check_memory(const std::string& path, const Config& c, const GgufTotals& t) {
  const uint64_t kv = kv_bytes_per_position(c) * static_cast<uint64_t>(c.n_positions);
  const uint64_t need = t.kept.resident + t.largest + kv;
  const uint64_t avail = available_memory_bytes();
  if (avail && need > avail) {
    throw Error(path + ": loading needs about " + format_bytes(static_cast<double>(need)) + " (" +
                format_bytes(static_cast<double>(t.kept.resident)) + " of weights kept as stored" +
                (t.kept.copies() ? " with f32 copies of the 16-bit matrices" : "") + " + " +
                format_bytes(static_cast<double>(kv)) + " of f32 KV cache for " + std::to_string(c.n_positions) +
                " positions), but only " + format_bytes(static_cast<double>(avail)) + " of memory is available");
  }
}

// Checks the wanted tensors, the memory, then reads them into m.
void read_weights(const GgufFile& f, const std::vector<GgufWanted>& wanted, Model& m, const LoadControl& control) {
  const GgufTotals totals = check_gguf_tensors(f, wanted, control.wide_max_bytes);
  if (control.bf16_products) require_bf16_products(totals.kept, f.origin());
  check_memory(f.origin(), m.config, totals);
  read_gguf_tensors(f, wanted, totals, control);
  m.n_params = totals.n_params;
  m.file_bytes = totals.file_bytes;
  m.stored_dtype = totals.stored_dtype;
}

}  // namespace

std::string gguf_model_path(const std::string& model) {
  std::error_code ec;
  const fs::path p(model);
  if (fs::is_regular_file(p, ec)) return looks_like_gguf(model) ? model : "";
  if (!fs::is_directory(p, ec) || fs::exists(p / "config.json", ec)) return "";
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(p, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".gguf") found.push_back(e.path().filename().string());
  }
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    std::string names;
    for (const std::string& n : found) names += (names.empty() ? "" : ", ") + n;
    throw Error(model + ": a folder without config.json holding " + std::to_string(found.size()) + " GGUF files (" +
                names + "); expected one, or name the file");
  }
  return found.empty() ? "" : (p / found[0]).string();
}

void load_gguf_model(const std::string& path, Model& m, const LoadControl& control) {
  const GgufFile f = GgufFile::open(path, control.cancel);
  m.config = config_from_gguf(f);
  if (control.context > 0) apply_context(m.config, control.context, path);
  add_end_tokens(f, m.config);
  m.tokenizer = tokenizer_from_gguf(f);
  if (m.tokenizer.vocab_size() > m.config.vocab_size) {
    throw Error(f.origin() + ": metadata \"tokenizer.ggml.tokens\" holds " + std::to_string(m.tokenizer.vocab_size()) +
                " tokens, but the model's vocabulary size is " + std::to_string(m.config.vocab_size) +
                " (expected at most that many)");
  }
  const std::string arch = f.meta_string("general.architecture");
  if (m.config.arch == Arch::kGpt2) {
    Gpt2Weights w;
    read_weights(f, gpt2_wanted(f, m.config, w), m, control);
    m.weights = std::move(w);
  } else {
    LlamaWeights w;
    read_weights(f, llama_wanted(m.config, arch == "llama", w), m, control);
    w.inv_freq = rope_inv_freq(m.config);
    m.weights = std::move(w);
  }
  if (control.on_progress) control.on_progress(1.0f);
}

}  // namespace kvscope
