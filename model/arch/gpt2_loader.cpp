// GPT-2: model.safetensors with the transformer's names (HF's GPT2LMHeadModel
// with or without the "transformer." prefix), Conv1D weights stored (in, out)
// and kept transposed at their stored precision.
#include "model/arch/gpt2_loader.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "model/arch/safetensors.h"
#include "model/arch/tensor_checks.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
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
Weights read_weights(const SafeTensors& st, const Config& c, bool wide, std::set<std::string>* dtypes,
                     uint64_t* n_params, uint64_t* file_bytes, const LoadControl* control) {
  const std::string prefix = st.has("transformer.wte.weight") ? "transformer." : "";
  TensorReader r(st, prefix, wide, control);
  const int64_t d = c.n_embd, V = c.vocab_size;
  Weights w;
  const bool untied = st.has("lm_head.weight");
  w.wte = r.mat("wte.weight", V, d, untied ? TensorReader::Use::kLookup : TensorReader::Use::kProduct);
  w.wpe = r.mat_f32("wpe.weight", c.n_positions, d);
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    LayerWeights& L = w.layers[static_cast<size_t>(i)];
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

Weights load_weights(const std::string& safetensors_path, const Config& config) {
  const SafeTensors st = SafeTensors::open(safetensors_path);
  return read_weights(st, config, plan_kept(st, config, kWideMaxMatrixBytes).wide, nullptr, nullptr, nullptr, nullptr);
}

void load_gpt2_weights(const std::string& dir, Model& m, const LoadControl& control) {
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
}

}  // namespace kvscope
