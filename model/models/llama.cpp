// Llama-architecture weights from a Hugging Face folder: model.safetensors,
// or shards model-0000N-of-0000M.safetensors listed by
// model.safetensors.index.json. Every tensor's name, dtype and shape is
// checked (file, tensor, expected, actual) before any data is read; then each
// tensor is read from its file straight into the buffer it is kept in. Then
// the family's config fields and its layer of the forward pass.
#include "model/models/llama.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "model/arch/config_json.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/arch/tensor_checks.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/core/units.h"
#include "model/engine/engine_detail.h"
#include "model/engine/linear.h"

namespace kvscope {

std::vector<const WeightMatrix*> LlamaWeights::layer_matrices() const {
  std::vector<const WeightMatrix*> out;
  for (const LlamaLayer& L : layers)
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) out.push_back(m);
  return out;
}

uint64_t LlamaWeights::vector_bytes() const {
  auto vec = [](const std::vector<float>& v) { return v.size() * 4ull; };
  uint64_t b = vec(norm);
  for (const LlamaLayer& L : layers) b += vec(L.attn_norm) + vec(L.mlp_norm) + vec(L.bq) + vec(L.bk) + vec(L.bv);
  return b;
}

uint64_t LlamaWeights::resident_bytes() const {
  uint64_t b = embed.resident_bytes() + lm_head.resident_bytes() + vector_bytes();
  for (const WeightMatrix* m : layer_matrices()) b += m->resident_bytes();
  return b;
}

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One tensor the model needs and where it goes.
struct Wanted {
  std::string name;
  std::vector<int64_t> shape;
  WeightMatrix* matrix = nullptr;     // a matrix kept as stored
  std::vector<float>* vec = nullptr;  // or a vector kept in f32
  bool lookup = false;                // an untied embedding: looked up a row at a time, row-major, no f32 copy
};

std::vector<Wanted> wanted_tensors(const Config& c, LlamaWeights& w, bool read_head) {
  const int64_t d = c.n_embd, V = c.vocab_size, ff = c.n_inner;
  const int64_t q = static_cast<int64_t>(c.n_head) * c.head_dim(),
                kv = static_cast<int64_t>(c.kv_heads()) * c.head_dim();
  std::vector<Wanted> out;
  out.push_back({"model.embed_tokens.weight", {V, d}, &w.embed, nullptr, read_head});
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LlamaLayer& L = w.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {d}, nullptr, &L.attn_norm});
    out.push_back({p + "self_attn.q_proj.weight", {q, d}, &L.wq, nullptr});
    out.push_back({p + "self_attn.k_proj.weight", {kv, d}, &L.wk, nullptr});
    out.push_back({p + "self_attn.v_proj.weight", {kv, d}, &L.wv, nullptr});
    if (c.qkv_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {q}, nullptr, &L.bq});
      out.push_back({p + "self_attn.k_proj.bias", {kv}, nullptr, &L.bk});
      out.push_back({p + "self_attn.v_proj.bias", {kv}, nullptr, &L.bv});
    }
    out.push_back({p + "self_attn.o_proj.weight", {d, q}, &L.wo, nullptr});
    out.push_back({p + "post_attention_layernorm.weight", {d}, nullptr, &L.mlp_norm});
    out.push_back({p + "mlp.gate_proj.weight", {ff, d}, &L.w_gate, nullptr});
    out.push_back({p + "mlp.up_proj.weight", {ff, d}, &L.w_up, nullptr});
    out.push_back({p + "mlp.down_proj.weight", {d, ff}, &L.w_down, nullptr});
  }
  out.push_back({"model.norm.weight", {d}, nullptr, &w.norm});
  if (read_head) out.push_back({"lm_head.weight", {V, d}, &w.lm_head, nullptr});
  return out;
}

// The weight files of `dir` and which file holds each tensor (by the index for shards).
struct WeightFiles {
  std::vector<std::string> files;          // paths
  std::map<std::string, std::string> map;  // tensor -> path; empty for a single file
  std::string index;                       // the index's path, if sharded
};

WeightFiles find_weight_files(const std::string& dir, const std::atomic<bool>* cancel) {
  WeightFiles wf;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    wf.files.push_back(single.string());
    return wf;
  }
  if (!fs::exists(index, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("model-", 0) == 0 && n.find("-of-") != std::string::npos && e.path().extension() == ".safetensors") {
        throw Error(index.string() + ": missing (the folder has the shard " + n +
                    "; sharded weights need their index, model.safetensors.index.json)");
      }
    }
    throw Error(single.string() +
                ": missing (expected model.safetensors, or model.safetensors.index.json and its shards; convert "
                "pytorch_model.bin first)");
  }
  wf.index = index.string();
  json j;
  try {
    j = json::parse(read_regular_file(wf.index, "model.safetensors.index.json", cancel));
  } catch (const json::exception& e) {
    throw Error(wf.index + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw Error(wf.index + ": expected {\"weight_map\": {\"tensor\": \"model-00001-of-0000N.safetensors\", ...}}");
  }
  std::set<std::string> seen;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() ||
        file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "..") {
      throw Error(wf.index + ": weight_map[\"" + tensor + "\"] = " + json_quote(file) +
                  " (expected a file name in the same folder)");
    }
    const std::string path = (fs::path(dir) / file.get<std::string>()).string();
    if (seen.insert(path).second) {
      if (!fs::is_regular_file(path, ec)) {
        throw Error(wf.index + ": weight_map points tensor \"" + tensor + "\" at " + path +
                    ", which is missing (a shard was not downloaded?)");
      }
      wf.files.push_back(path);
    }
    wf.map[tensor] = path;
  }
  return wf;
}

// The weight files' headers, opened once, and which file holds a tensor.
struct OpenedWeights {
  WeightFiles wf;
  std::map<std::string, SafeTensors> headers;  // path -> its header

  const std::string* file_of(const std::string& tensor) const {
    if (wf.map.empty()) return &wf.files[0];
    auto it = wf.map.find(tensor);
    return it == wf.map.end() ? nullptr : &it->second;
  }
};

// What the wanted tensors will take once read.
struct WantedTotals {
  KeptWeights kept;         // the matrices as stored (+ f32 copies where kept), vectors in f32
  uint64_t file_bytes = 0;  // bytes read from the files
  uint64_t n_params = 0;
  std::string stored_dtype;  // the one dtype stored, or "mixed"
};

// Checks every wanted tensor's file, name, dtype and shape before anything
// is read, and plans what they will take (plan_kept_weights).
WantedTotals check_wanted(const OpenedWeights& ow, const std::vector<Wanted>& wanted, uint64_t wide_max_bytes) {
  WantedTotals t;
  std::vector<StoredMatrix> matrices;
  uint64_t f32_values = 0;
  std::set<std::string> dtypes;
  for (const Wanted& w : wanted) {
    const std::string* file = ow.file_of(w.name);
    if (!file) {
      throw Error(ow.wf.index + ": tensor \"" + w.name + "\" (expected shape " + shape_str(w.shape) +
                  ") is not in weight_map");
    }
    const SafeTensors& st = ow.headers.at(*file);
    auto it = st.tensors().find(w.name);
    if (it == st.tensors().end()) {
      throw Error(*file + ": missing tensor \"" + w.name + "\" (expected shape " + shape_str(w.shape) + ")");
    }
    if (it->second.shape != w.shape) {
      throw Error(*file + ": tensor \"" + w.name + "\" has shape " + shape_str(it->second.shape) + ", expected " +
                  shape_str(w.shape) + " (from config.json)");
    }
    const std::string& d = it->second.dtype;
    const std::optional<StoredType> type = weight_type(d);
    if (!type) {
      throw Error(*file + ": tensor \"" + w.name + "\" has dtype " + d + ", expected F32, F16 or BF16");
    }
    dtypes.insert(d);
    uint64_t numel = 1;
    for (int64_t s : w.shape) numel *= static_cast<uint64_t>(s);
    t.n_params += numel;
    if (w.vec) {
      f32_values += numel;
    } else {
      matrices.push_back({*type, numel, w.lookup});
    }
    t.file_bytes += it->second.end - it->second.begin;
  }
  t.stored_dtype = dtypes.size() == 1 ? *dtypes.begin() : "mixed";
  t.kept = plan_kept_weights(matrices, f32_values, wide_max_bytes);
  return t;
}

// What loading will hold (the weights as kept + an f32 cache over the
// whole context), refused when the machine does not have it available.
uint64_t check_memory(const std::string& dir, const Config& c, const KeptWeights& kept) {
  const uint64_t kv = 2ull * static_cast<uint64_t>(c.n_layer) * static_cast<uint64_t>(c.kv_heads()) *
                      static_cast<uint64_t>(c.head_dim()) * 4ull * static_cast<uint64_t>(c.n_positions);
  const uint64_t need = kept.resident + kv;
  const uint64_t avail = available_memory_bytes();
  if (avail && need > avail) {
    throw Error(dir + ": loading needs about " + format_bytes(static_cast<double>(need)) + " (" +
                format_bytes(static_cast<double>(kept.resident)) + " of weights kept as stored" +
                (kept.copies() ? " with f32 copies of the 16-bit matrices" : "") + " + " +
                format_bytes(static_cast<double>(kv)) + " of f32 KV cache for " + std::to_string(c.n_positions) +
                " positions), but only " + format_bytes(static_cast<double>(avail)) + " of memory is available");
  }
  return need;
}

}  // namespace

LlamaLoadResult load_llama_weights(const std::string& dir, const Config& c, const LoadControl& control) {
  LlamaLoadResult r;
  // The cancel flag reaches every read (the index, each shard's header, each
  // 16 MiB chunk of a tensor): closing the window never waits for a shard.
  auto check_cancel = [&] {
    if (control.cancel && control.cancel->load()) throw Error(dir + ": loading cancelled");
  };
  check_cancel();
  OpenedWeights ow;
  ow.wf = find_weight_files(dir, control.cancel);
  // A single small file is read whole (one read instead of one per tensor);
  // shards always a tensor at a time, so the headers held here never hold
  // several shards' bytes at once beside the weights.
  const uint64_t read_whole_up_to = ow.wf.files.size() == 1 ? SafeTensors::kReadWholeUpTo : 0;
  for (const std::string& f : ow.wf.files) {
    check_cancel();
    ow.headers.emplace(f, SafeTensors::open_header(f, control.cancel, read_whole_up_to));
  }
  // An untied head must be there; a tied one is ignored when stored anyway.
  const bool read_head = !c.tie_word_embeddings;
  std::vector<Wanted> wanted = wanted_tensors(c, r.weights, read_head);

  // Check everything before reading the weights into the model.
  const WantedTotals totals = check_wanted(ow, wanted, control.wide_max_bytes);
  if (control.bf16_products) require_bf16_products(totals.kept, dir);
  r.n_params = totals.n_params;
  r.file_bytes = totals.file_bytes;
  r.stored_dtype = totals.stored_dtype;
  r.kept = totals.kept;
  r.need_bytes = check_memory(dir, c, totals.kept);

  uint64_t done = 0;
  auto progress = [&](uint64_t bytes) {
    done += bytes;
    if (control.on_progress && totals.file_bytes) {
      control.on_progress(static_cast<float>(static_cast<double>(done) / static_cast<double>(totals.file_bytes)));
    }
  };
  for (const Wanted& t : wanted) {
    check_cancel();
    const SafeTensors& st = ow.headers.at(*ow.file_of(t.name));
    const TensorInfo& info = st.tensors().at(t.name);
    if (t.matrix) {
      read_matrix(st, t.name, info, *t.matrix, progress);  // progress per chunk
      // An untied embedding is only ever looked up a row at a time, which
      // row-major keeps in one read.
      if (!t.lookup) t.matrix->keep_for_products(totals.kept.wide);
    } else {
      *t.vec = st.to_f32(t.name);  // a vector: one small read
      check_finite(StoredType::kF32, t.vec->data(), t.vec->size(), st.origin(), t.name, info.shape);
      progress(info.end - info.begin);
    }
  }
  check_cancel();
  r.weights.inv_freq = rope_inv_freq(c);
  return r;
}

void load_llama(const std::string& dir, Model& m, const LoadControl& control) {
  const std::string tok_path = (fs::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (!fs::exists(tok_path, ec)) {
    throw Error(tok_path + ": missing (a " + m.config.model_type + " folder needs its tokenizer.json)");
  }
  LlamaLoadResult r = load_llama_weights(dir, m.config, control);  // checks `control.cancel` first
  m.weights = std::move(r.weights);
  m.n_params = r.n_params;
  m.file_bytes = r.file_bytes;
  m.stored_dtype = r.stored_dtype;
  if (control.cancel && control.cancel->load()) throw Error(dir + ": loading cancelled");
  load_tokenizer(m, dir, tok_path);
  if (control.on_progress) control.on_progress(1.0f);
}

namespace {

void parse_rope_scaling(const json& j, const std::string& origin, Config& c) {
  using namespace config_json;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return;
  const json& r = j["rope_scaling"];
  const std::string where = origin + ": rope_scaling";
  if (!r.is_object()) throw Error(where + " must be an object or null, got " + json_quote(r));
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (type.empty()) type = get_string(r, where, key, "");
  }
  if (type.empty()) throw Error(where + ": missing \"rope_type\" (expected default, linear or llama3)");
  if (type == "default") return;
  if (type != "llama3" && type != "linear") {
    throw Error(where + ": rope_type \"" + type + "\" is not supported (supported: default, linear, llama3)");
  }
  c.rope_scaling.type = type;
  c.rope_scaling.factor = get_positive(r, where, "factor", 1.0, true);
  if (type == "llama3") {
    c.rope_scaling.low_freq_factor = get_positive(r, where, "low_freq_factor", 1.0, true);
    c.rope_scaling.high_freq_factor = get_positive(r, where, "high_freq_factor", 4.0, true);
    c.rope_scaling.original_max_position_embeddings =
        get_int(r, where, "original_max_position_embeddings", 1, 1 << 24, true, 0);
    if (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor)) {
      throw Error(where + ": high_freq_factor (" + std::to_string(c.rope_scaling.high_freq_factor) +
                  ") must be greater than low_freq_factor (" + std::to_string(c.rope_scaling.low_freq_factor) + ")");
    }
  }
}

}  // namespace

Config parse_llama_config(const json& j, const std::string& origin, const std::string& type) {
  using namespace config_json;
  Config c;
  c.arch = Arch::kLlama;
  c.model_type = type;
  c.display_name = type;
  c.mlp_matrices = 3;
  c.learned_positions = false;
  c.activation_function = "silu";
  c.n_layer = get_int(j, origin, "num_hidden_layers", 1, 1024, true, 0);
  c.n_embd = get_int(j, origin, "hidden_size", 1, 65536, true, 0);
  c.n_head = get_int(j, origin, "num_attention_heads", 1, 1024, true, 0);
  c.n_kv_head = get_int(j, origin, "num_key_value_heads", 1, 1024, false, c.n_head);
  c.head_size = get_int(j, origin, "head_dim", 1, 4096, false, 0);
  c.n_inner = get_int(j, origin, "intermediate_size", 1, 1 << 20, true, 0);
  c.vocab_size = get_int(j, origin, "vocab_size", 1, 1 << 24, true, 0);
  c.max_position_embeddings = get_int(j, origin, "max_position_embeddings", 1, 1 << 24, true, 0);
  c.n_positions = std::min(c.max_position_embeddings, kLlamaContextCap);
  c.bos_token_id = get_int(j, origin, "bos_token_id", -1, c.vocab_size - 1, false, -1);
  parse_eos(j, origin, c);
  c.layer_norm_epsilon = static_cast<float>(get_positive(j, origin, "rms_norm_eps", 1e-6));
  c.rope_theta = get_positive(j, origin, "rope_theta", 10000.0);
  c.tie_word_embeddings = get_bool(j, origin, "tie_word_embeddings", false);
  if (c.head_size == 0 && c.n_embd % c.n_head != 0) {
    throw Error(origin + ": hidden_size (" + std::to_string(c.n_embd) + ") must be divisible by num_attention_heads (" +
                std::to_string(c.n_head) + ") when head_dim is not given");
  }
  if (c.n_head % c.n_kv_head != 0) {
    throw Error(origin + ": num_attention_heads (" + std::to_string(c.n_head) +
                ") must be a multiple of num_key_value_heads (" + std::to_string(c.n_kv_head) +
                "): each K/V head serves the same number of query heads");
  }
  if (c.head_dim() % 2 != 0) {
    throw Error(origin + ": the head width " + std::to_string(c.head_dim()) + " must be even (RoPE rotates pairs)");
  }
  const std::string act = get_string(j, origin, "hidden_act", "silu");
  if (act != "silu") throw Error(origin + ": hidden_act \"" + act + "\" is not supported (expected \"silu\")");
  if (get_bool(j, origin, "mlp_bias", false)) throw Error(origin + ": mlp_bias: true is not supported");
  c.qkv_bias = type == "qwen2" || get_bool(j, origin, "attention_bias", false);
  if (type == "llama" && get_bool(j, origin, "attention_bias", false)) {
    throw Error(origin + ": attention_bias: true is not supported for llama (o_proj bias); qwen2's q/k/v biases are");
  }
  parse_rope_scaling(j, origin, c);
  if (type == "mistral") {
    c.sliding_window = get_int(j, origin, "sliding_window", 1, 1 << 24, false, 0);
  } else if (type == "qwen2" && get_bool(j, origin, "use_sliding_window", false)) {
    // Qwen2 windows only layers from max_window_layers on: one window for all is what kvscope runs.
    const int from = get_int(j, origin, "max_window_layers", 0, 1 << 20, false, 0);
    if (from != 0) {
      throw Error(origin + ": use_sliding_window with max_window_layers = " + std::to_string(from) +
                  " (a window on some layers only) is not supported");
    }
    c.sliding_window = get_int(j, origin, "sliding_window", 1, 1 << 24, true, 0);
  }
  if (c.sliding_window >= c.n_positions) c.sliding_window = 0;  // never binds
  return c;
}

namespace {

// Qwen2's biases; empty (none) elsewhere.
const float* bias(const std::vector<float>& b) {
  return b.empty() ? nullptr : b.data();
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

}  // namespace

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

namespace {

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

}  // namespace

void embed(const LlamaWeights& w, const std::vector<BatchEntry>& batch, MatrixRM& x) {
  x.resize(static_cast<Eigen::Index>(batch.size()), w.embed.cols);
  for (size_t i = 0; i < batch.size(); ++i)
    w.embed.row_to_f32(batch[i].token, x.row(static_cast<Eigen::Index>(i)).data());
}

void run_layer(const Config& c, const LlamaWeights& w, detail::LayerPass& p, int l) {
  const LlamaLayer& L = w.layers[static_cast<size_t>(l)];
  Workspace& ws = p.ws;
  const int hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads();
  rms_norm(ws.x, L.attn_norm, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.wq, bias(L.bq), ws.q, p.flops);
  linear(ws.pool, ws.h, L.wk, bias(L.bk), ws.k, p.flops);
  linear(ws.pool, ws.h, L.wv, bias(L.bv), ws.v, p.flops);
  // Rotary embeddings: Q and K rows rotated by their own position (the cache keeps K rotated).
  for (size_t i = 0; i < p.batch.size(); ++i) {
    const Eigen::Index r = static_cast<Eigen::Index>(i);
    apply_rope(ws.q.row(r).data(), H, hd, p.batch[i].pos, w.inv_freq);
    apply_rope(ws.k.row(r).data(), Hkv, hd, p.batch[i].pos, w.inv_freq);
  }
  p.attend(c, l, {ws.q.data(), static_cast<size_t>(H * hd), ws.k.data(), ws.v.data(), static_cast<size_t>(Hkv * hd)});
  linear(ws.pool, ws.att, L.wo, nullptr, ws.tmp, p.flops);
  ws.x += ws.tmp;
  rms_norm(ws.x, L.mlp_norm, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.w_gate, nullptr, ws.fc, p.flops);
  linear(ws.pool, ws.h, L.w_up, nullptr, ws.up, p.flops);
  swiglu(ws.pool, ws.fc, ws.up);
  linear(ws.pool, ws.fc, L.w_down, nullptr, ws.tmp, p.flops);
  ws.x += ws.tmp;
}

void head_logits(const Config& c, const LlamaWeights& w, Workspace& ws, const MatrixRM& sel, float* logits,
                 uint64_t& flops) {
  rms_norm(sel, w.norm, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, w.head(), nullptr, logits, flops);
}

}  // namespace kvscope
