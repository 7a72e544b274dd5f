// GPT-2: model.safetensors with the transformer's names (HF's GPT2LMHeadModel
// with or without the "transformer." prefix), Conv1D weights stored (in, out)
// and kept transposed at their stored precision; its layer of the forward.
#include "model/models/gpt2.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "model/arch/config_json.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/arch/tensor_checks.h"
#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
#include "model/engine/engine_detail.h"
#include "model/engine/linear.h"
#include "model/kv/kv_cache.h"

namespace kvscope {
namespace {

// Reads tensors by their GPT-2 name, checking shape; tracks dtypes + counts.
class TensorReader {
 public:
  TensorReader(const SafeTensors& st, std::string prefix, bool wide, const LoadControl* control)
      : st_(st), prefix_(std::move(prefix)), wide_(wide), control_(control) {
    for (const auto& kv : st.tensors()) total_bytes_ += kv.second.end - kv.second.begin;
  }

  // A vector or small matrix as f32 (layer norms, biases, positions).
  std::vector<float> get(const std::string& name, const std::vector<int64_t>& shape, bool use_prefix = true) {
    const std::string full = find(name, shape, use_prefix);
    std::vector<float> v = st_.to_f32(full);
    check_finite(StoredType::kF32, v.data(), v.size(), st_.origin(), full, shape);
    count(full);
    return v;
  }

  Vector vec(const std::string& name, int64_t n) {
    std::vector<float> v = get(name, {n});
    return Eigen::Map<Vector>(v.data(), n);
  }
  // Conv1D weight stored (in, out); kept transposed as (out, in), in its stored dtype.
  WeightMatrix conv1d_t(const std::string& name, int64_t in, int64_t out) {
    WeightMatrix m = stored(name, {in, out}, true).transposed();
    m.keep_for_products(wide_);
    return m;
  }
  // A matrix the products read (as panels where they are built), or one only
  // looked up a row at a time (an untied embedding: row-major, one read a row).
  enum class Use { kProduct, kLookup };
  WeightMatrix mat(const std::string& name, int64_t rows, int64_t cols, Use use, bool use_prefix = true) {
    WeightMatrix m = stored(name, {rows, cols}, use_prefix);
    if (use == Use::kProduct) m.keep_for_products(wide_);
    return m;
  }
  MatrixRM mat_f32(const std::string& name, int64_t rows, int64_t cols) {
    std::vector<float> v = get(name, {rows, cols});
    return Eigen::Map<MatrixRM>(v.data(), rows, cols);
  }

  std::set<std::string> dtypes;
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;  // the parameters' bytes in the file, at their stored dtypes

 private:
  // The tensor's full name, after checking that it exists with `shape` and
  // a weight dtype.
  std::string find(const std::string& name, const std::vector<int64_t>& shape, bool use_prefix) {
    const std::string full = (use_prefix ? prefix_ : "") + name;
    auto it = st_.tensors().find(full);
    if (it == st_.tensors().end()) {
      throw Error(st_.origin() + ": missing tensor \"" + full + "\" (expected shape " + shape_str(shape) + ")");
    }
    if (it->second.shape != shape) {
      throw Error(st_.origin() + ": tensor \"" + full + "\" has shape " + shape_str(it->second.shape) + ", expected " +
                  shape_str(shape));
    }
    const std::string& d = it->second.dtype;
    if (!weight_type(d))
      throw Error(st_.origin() + ": tensor \"" + full + "\" has dtype " + d + ", expected F32, F16 or BF16");
    if (control_ && control_->cancel && control_->cancel->load()) throw Error(st_.origin() + ": loading cancelled");
    return full;
  }

  // Counts the tensor `full` just read and reports progress.
  void count(const std::string& full) {
    const TensorInfo& info = st_.tensors().at(full);
    dtypes.insert(info.dtype);
    uint64_t numel = 1;
    for (int64_t x : info.shape) numel *= static_cast<uint64_t>(x);
    n_params += numel;
    file_bytes += info.end - info.begin;
    done_bytes_ += info.end - info.begin;
    if (control_ && control_->on_progress && total_bytes_) {
      control_->on_progress(static_cast<float>(static_cast<double>(done_bytes_) / static_cast<double>(total_bytes_)));
    }
  }

  // A matrix as its file stores it (its dtype, row-major), checked finite.
  WeightMatrix stored(const std::string& name, const std::vector<int64_t>& shape, bool use_prefix) {
    const std::string full = find(name, shape, use_prefix);
    WeightMatrix m;
    read_matrix(st_, full, st_.tensors().at(full), m);
    count(full);
    return m;
  }

  const SafeTensors& st_;
  std::string prefix_;
  bool wide_;  // keep f32 copies of 16-bit matrices (KeptWeights::wide)
  const LoadControl* control_;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
};

// Reads every tensor GPT-2 needs from `st` (a file read whole, or its header), keeping f32
// copies of the 16-bit matrices when `wide` (the plan's decision).
Gpt2Weights read_weights(const SafeTensors& st, const Config& c, bool wide, std::set<std::string>* dtypes,
                         uint64_t* n_params, uint64_t* file_bytes, const LoadControl* control) {
  const std::string prefix = st.has("transformer.wte.weight") ? "transformer." : "";
  TensorReader r(st, prefix, wide, control);
  const int64_t d = c.n_embd, V = c.vocab_size;
  Gpt2Weights w;
  const bool untied = st.has("lm_head.weight");
  w.wte = r.mat("wte.weight", V, d, untied ? TensorReader::Use::kLookup : TensorReader::Use::kProduct);
  w.wpe = r.mat_f32("wpe.weight", c.n_positions, d);
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    Gpt2Layer& L = w.layers[static_cast<size_t>(i)];
    L.ln_1_g = r.vec(p + "ln_1.weight", d);
    L.ln_1_b = r.vec(p + "ln_1.bias", d);
    L.attn_w_t = r.conv1d_t(p + "attn.c_attn.weight", d, 3 * d);
    L.attn_b = r.vec(p + "attn.c_attn.bias", 3 * d);
    L.attn_proj_w_t = r.conv1d_t(p + "attn.c_proj.weight", d, d);
    L.attn_proj_b = r.vec(p + "attn.c_proj.bias", d);
    L.ln_2_g = r.vec(p + "ln_2.weight", d);
    L.ln_2_b = r.vec(p + "ln_2.bias", d);
    L.fc_w_t = r.conv1d_t(p + "mlp.c_fc.weight", d, 4 * d);
    L.fc_b = r.vec(p + "mlp.c_fc.bias", 4 * d);
    L.mlp_proj_w_t = r.conv1d_t(p + "mlp.c_proj.weight", 4 * d, d);
    L.mlp_proj_b = r.vec(p + "mlp.c_proj.bias", d);
  }
  w.ln_f_g = r.vec("ln_f.weight", d);
  w.ln_f_b = r.vec("ln_f.bias", d);
  // An untied head is stored without the prefix by HF's GPT2LMHeadModel.
  if (untied) w.lm_head = r.mat("lm_head.weight", V, d, TensorReader::Use::kProduct, false);
  if (dtypes) *dtypes = r.dtypes;
  if (n_params) *n_params = r.n_params;
  if (file_bytes) *file_bytes = r.file_bytes;
  return w;
}

// The weight matrices GPT-2 reads (the embedding, each layer's four Conv1D
// weights, an untied head) with the dtypes `st` stores them in and the
// config's shapes, and the values it keeps in f32 (the position table, norm
// weights, biases); buffers and unknown tensors are not read. A matrix
// missing from the file or of another dtype counts as F32 here (reading it
// then fails, naming it).
KeptWeights plan_kept(const SafeTensors& st, const Config& c, uint64_t wide_max_bytes) {
  const std::string prefix = st.has("transformer.wte.weight") ? "transformer." : "";
  const uint64_t d = static_cast<uint64_t>(c.n_embd), V = static_cast<uint64_t>(c.vocab_size);
  auto stored = [&](const std::string& name, uint64_t numel, bool lookup = false) {
    auto it = st.tensors().find(name);
    const std::optional<StoredType> t = it == st.tensors().end() ? std::nullopt : weight_type(it->second.dtype);
    return StoredMatrix{t.value_or(StoredType::kF32), numel, lookup};
  };
  // An untied wte is only looked up (read_weights: TensorReader::Use::kLookup).
  std::vector<StoredMatrix> matrices = {stored(prefix + "wte.weight", V * d, st.has("lm_head.weight"))};
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = prefix + "h." + std::to_string(i) + ".";
    matrices.push_back(stored(p + "attn.c_attn.weight", 3 * d * d));
    matrices.push_back(stored(p + "attn.c_proj.weight", d * d));
    matrices.push_back(stored(p + "mlp.c_fc.weight", 4 * d * d));
    matrices.push_back(stored(p + "mlp.c_proj.weight", 4 * d * d));
  }
  if (st.has("lm_head.weight")) matrices.push_back(stored("lm_head.weight", V * d));
  const uint64_t f32_values =
      static_cast<uint64_t>(c.n_positions) * d + static_cast<uint64_t>(c.n_layer) * 13 * d + 2 * d;
  return plan_kept_weights(matrices, f32_values, wide_max_bytes);
}

}  // namespace

Gpt2LoadPlan plan_gpt2_load(const SafeTensors& st, const Config& c, uint64_t wide_max_bytes) {
  Gpt2LoadPlan plan;
  plan.kept = plan_kept(st, c, wide_max_bytes);
  const uint64_t d = static_cast<uint64_t>(c.n_embd), positions = static_cast<uint64_t>(c.n_positions);
  const uint64_t scratch = std::max(4 * 4 * d * d, 3 * 4 * positions * d);
  plan.need_bytes = plan.kept.resident + scratch + kv_bytes_per_position(c) * positions;
  return plan;
}

void load_gpt2(const std::string& dir, Model& m, const LoadControl& control) {
  namespace fs = std::filesystem;
  const std::string st_path = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(st_path)) {
    throw Error(st_path + ": missing (expected the weights as model.safetensors; convert a pytorch_model.bin first)");
  }
  require_regular_file(st_path, "the weights as a model.safetensors file");
  // The header only: each tensor is then read from the file into its place, so a large file is never held
  // whole beside the weights (half the peak memory, which the page's 4 GB heap needs); a file of at most
  // SafeTensors::kReadWholeUpTo bytes is read whole, in fewer reads.
  const SafeTensors st = SafeTensors::open_header(st_path, control.cancel);
  const Gpt2LoadPlan plan = plan_gpt2_load(st, m.config, control.wide_max_bytes);
  if (control.bf16_products) require_bf16_products(plan.kept, dir);
  const uint64_t avail = available_memory_bytes();
  if (avail && plan.need_bytes > avail) {
    throw Error(st_path + ": loading needs about " + format_bytes(static_cast<double>(plan.need_bytes)) +
                " (weights as kept" + (plan.kept.copies() ? ", with f32 copies of the 16-bit matrices," : "") +
                " + KV cache), but only " + format_bytes(static_cast<double>(avail)) + " of memory is available");
  }
  std::set<std::string> dtypes;
  m.weights = read_weights(st, m.config, plan.kept.wide, &dtypes, &m.n_params, &m.file_bytes, &control);
  m.stored_dtype = dtypes.size() == 1 ? *dtypes.begin() : "mixed";
  load_tokenizer(m, dir, dir + "/vocab.json");
  // Unused tensors (attn.bias buffers) were counted in the total: finish at 1.
  if (control.on_progress) control.on_progress(1.0f);
}

std::vector<const WeightMatrix*> Gpt2Weights::layer_matrices() const {
  std::vector<const WeightMatrix*> out;
  for (const Gpt2Layer& L : layers)
    for (const WeightMatrix* m : {&L.attn_w_t, &L.attn_proj_w_t, &L.fc_w_t, &L.mlp_proj_w_t}) out.push_back(m);
  return out;
}

uint64_t Gpt2Weights::vector_bytes() const {
  auto vec = [](const Vector& v) { return static_cast<uint64_t>(v.size()) * 4; };
  uint64_t b = vec(ln_f_g) + vec(ln_f_b);
  for (const Gpt2Layer& L : layers) {
    b += vec(L.ln_1_g) + vec(L.ln_1_b) + vec(L.attn_b) + vec(L.attn_proj_b) + vec(L.ln_2_g) + vec(L.ln_2_b) +
         vec(L.fc_b) + vec(L.mlp_proj_b);
  }
  return b;
}

uint64_t Gpt2Weights::resident_bytes() const {
  uint64_t b = wte.resident_bytes() + lm_head.resident_bytes() + static_cast<uint64_t>(wpe.size()) * 4 + vector_bytes();
  for (const WeightMatrix* m : layer_matrices()) b += m->resident_bytes();
  return b;
}

namespace {

// layer_norm_epsilon and activation_function, checked (the rest of GPT-2's fields: parse_gpt2_config).
void parse_gpt2_norm_and_activation(const nlohmann::json& j, const std::string& origin, Config& c) {
  if (j.contains("layer_norm_epsilon")) {
    // It must survive the conversion to float: 1e-50 would become 0, 1e300 overflow.
    const double eps = j["layer_norm_epsilon"].is_number() ? j["layer_norm_epsilon"].get<double>() : 0.0;
    if (!(eps > 0) || eps > std::numeric_limits<float>::max() || !(static_cast<float>(eps) > 0)) {
      throw Error(origin + ": field \"layer_norm_epsilon\" must be a positive number representable as a float, got " +
                  json_quote(j["layer_norm_epsilon"]));
    }
    c.layer_norm_epsilon = static_cast<float>(eps);
  }
  if (j.contains("activation_function")) {
    if (!j["activation_function"].is_string()) {
      throw Error(origin + ": field \"activation_function\" must be a string");
    }
    c.activation_function = j["activation_function"].get<std::string>();
    // gelu_new, gelu_pytorch_tanh and the tanh form are the same function; exact erf gelu differs.
    if (c.activation_function != "gelu_new" && c.activation_function != "gelu_pytorch_tanh" &&
        c.activation_function != "gelu_fast") {
      throw Error(origin + ": activation_function \"" + c.activation_function +
                  "\" is not supported (expected \"gelu_new\")");
    }
  }
}

}  // namespace

Config parse_gpt2_config(const nlohmann::json& j, const std::string& origin) {
  using namespace config_json;
  Config c;
  // HF GPT-2 names; n_ctx is an older alias of n_positions.
  c.n_layer = get_int(j, origin, "n_layer", 1, 1024, true, 0);
  c.n_head = get_int(j, origin, "n_head", 1, 1024, true, 0);
  c.n_embd = get_int(j, origin, "n_embd", 1, 65536, true, 0);
  const int n_ctx = get_int(j, origin, "n_ctx", 1, 1 << 20, false, 0);
  c.n_positions = get_int(j, origin, "n_positions", 1, 1 << 20, n_ctx == 0, n_ctx);
  c.vocab_size = get_int(j, origin, "vocab_size", 1, 1 << 24, true, 0);
  c.bos_token_id = get_int(j, origin, "bos_token_id", -1, 1 << 24, false, -1);
  // A list of ids is accepted as for Llama configs (PretrainedConfig allows it).
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array())
    parse_eos(j, origin, c);
  else
    c.eos_token_id = get_int(j, origin, "eos_token_id", -1, 1 << 24, false, -1);
  if (c.n_embd % c.n_head != 0) {
    throw Error(origin + ": n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                std::to_string(c.n_head) + ")");
  }
  parse_gpt2_norm_and_activation(j, origin, c);
  if (c.eos_token_id >= c.vocab_size || c.bos_token_id >= c.vocab_size) {
    throw Error(origin + ": bos_token_id/eos_token_id must be below vocab_size (" + std::to_string(c.vocab_size) + ")");
  }
  c.n_kv_head = c.n_head;
  c.n_inner = 4 * c.n_embd;
  c.max_position_embeddings = c.n_positions;
  if (c.eos_token_ids.empty() && c.eos_token_id >= 0) c.eos_token_ids = {c.eos_token_id};
  return c;
}

namespace {

const float* bias(const Vector& b) {
  return b.size() ? b.data() : nullptr;
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

void embed(const Gpt2Weights& w, const std::vector<BatchEntry>& batch, MatrixRM& x) {
  x.resize(static_cast<Eigen::Index>(batch.size()), w.wte.cols);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Eigen::Index r = static_cast<Eigen::Index>(i);
    w.wte.row_to_f32(batch[i].token, x.row(r).data());
    x.row(r) += w.wpe.row(batch[i].pos);
  }
}

void run_layer(const Config& c, const Gpt2Weights& w, detail::LayerPass& p, int l) {
  const Gpt2Layer& L = w.layers[static_cast<size_t>(l)];
  Workspace& ws = p.ws;
  const int d = c.n_embd;
  layer_norm(ws.x, L.ln_1_g, L.ln_1_b, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.attn_w_t, bias(L.attn_b), ws.qkv, p.flops);
  const float* qkv = ws.qkv.data();
  p.attend(c, l, {qkv, static_cast<size_t>(3 * d), qkv + d, qkv + 2 * d, static_cast<size_t>(3 * d)});
  linear(ws.pool, ws.att, L.attn_proj_w_t, bias(L.attn_proj_b), ws.tmp, p.flops);
  ws.x += ws.tmp;
  layer_norm(ws.x, L.ln_2_g, L.ln_2_b, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, L.fc_w_t, bias(L.fc_b), ws.fc, p.flops);
  gelu_new(ws.pool, ws.fc);
  linear(ws.pool, ws.fc, L.mlp_proj_w_t, bias(L.mlp_proj_b), ws.tmp, p.flops);
  ws.x += ws.tmp;
}

void head_logits(const Config& c, const Gpt2Weights& w, Workspace& ws, const MatrixRM& sel, float* logits,
                 uint64_t& flops) {
  layer_norm(sel, w.ln_f_g, w.ln_f_b, c.layer_norm_epsilon, ws.h);
  linear(ws.pool, ws.h, w.head(), nullptr, logits, flops);
}

}  // namespace kvscope
