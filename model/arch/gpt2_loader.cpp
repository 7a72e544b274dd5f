// GPT-2: model.safetensors with the transformer's names (HF's GPT2LMHeadModel
// with or without the "transformer." prefix), Conv1D weights stored (in, out)
// and kept transposed at their stored precision.
#include "model/arch/gpt2_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
#include "model/kv/kv_cache.h"

namespace kvscope {
namespace {

// Index of the first NaN or infinity in x[0, n), or n. Tests the exponent
// bits (all ones) in blocks with no early exit inside a block, so the loop
// vectorises (AVX2 at -O3): 124M floats (GPT-2-124M) in 0.24 s on a busy
// 2-core machine, small next to reading and converting the file.
size_t first_non_finite(const float* x, size_t n) {
  constexpr size_t kBlock = 4096;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    uint32_t any = 0;
    for (size_t i = b; i < e; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, 4);
      any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (!any) continue;
    for (size_t i = b; i < e; ++i)
      if (!std::isfinite(x[i])) return i;
  }
  return n;
}

// Reads tensors by their GPT-2 name, checking shape; tracks dtypes + counts.
class TensorReader {
 public:
  TensorReader(const SafeTensors& st, std::string prefix, const LoadControl* control)
      : st_(st), prefix_(std::move(prefix)), control_(control) {
    for (const auto& kv : st.tensors()) total_bytes_ += kv.second.end - kv.second.begin;
  }

  std::vector<float> get(const std::string& name, const std::vector<int64_t>& shape, bool use_prefix = true) {
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
    const std::optional<StoredType> type = weight_type(d);
    if (!type) throw Error(st_.origin() + ": tensor \"" + full + "\" has dtype " + d + ", expected F32, F16 or BF16");
    if (control_ && control_->cancel && control_->cancel->load()) throw Error(st_.origin() + ": loading cancelled");
    dtypes.insert(d);
    last_type_ = *type;
    std::vector<float> v = st_.to_f32(full);
    check_finite(v, full, it->second.shape);
    n_params += v.size();
    stored_bytes += it->second.end - it->second.begin;
    done_bytes_ += it->second.end - it->second.begin;
    if (control_ && control_->on_progress && total_bytes_) {
      control_->on_progress(static_cast<float>(static_cast<double>(done_bytes_) / static_cast<double>(total_bytes_)));
    }
    return v;
  }

  Vector vec(const std::string& name, int64_t n) {
    std::vector<float> v = get(name, {n});
    return Eigen::Map<Vector>(v.data(), n);
  }
  // Conv1D weight stored (in, out); kept transposed as (out, in), in its stored dtype.
  WeightMatrix conv1d_t(const std::string& name, int64_t in, int64_t out) {
    std::vector<float> v = get(name, {in, out});
    WeightMatrix m = WeightMatrix::from_f32(v.data(), in, out, last_type_, true);
    m.widen_if(total_bytes_);
    return m;
  }
  WeightMatrix mat(const std::string& name, int64_t rows, int64_t cols, bool use_prefix = true) {
    std::vector<float> v = get(name, {rows, cols}, use_prefix);
    WeightMatrix m = WeightMatrix::from_f32(v.data(), rows, cols, last_type_);
    m.widen_if(total_bytes_);
    return m;
  }
  MatrixRM mat_f32(const std::string& name, int64_t rows, int64_t cols) {
    std::vector<float> v = get(name, {rows, cols});
    return Eigen::Map<MatrixRM>(v.data(), rows, cols);
  }

  std::set<std::string> dtypes;
  uint64_t n_params = 0;
  uint64_t stored_bytes = 0;  // the parameters' bytes in the file, at their stored dtypes

 private:
  // One NaN or infinity in a weight turns every logit into NaN: refuse the
  // file, naming the tensor and the first bad element.
  void check_finite(const std::vector<float>& v, const std::string& name, const std::vector<int64_t>& shape) const {
    const size_t bad = first_non_finite(v.data(), v.size());
    if (bad == v.size()) return;
    std::string at = std::to_string(bad);
    if (shape.size() == 2 && shape[1] > 0) {
      const uint64_t cols = static_cast<uint64_t>(shape[1]);
      at += " (row " + std::to_string(bad / cols) + ", column " + std::to_string(bad % cols) + ")";
    }
    const float x = v[bad];
    throw Error(st_.origin() + ": tensor \"" + name + "\" " + shape_str(shape) + " holds " +
                (std::isnan(x) ? std::string("NaN")
                 : x > 0       ? std::string("+inf")
                               : std::string("-inf")) +
                " at element " + at +
                " (expected finite weights; the file is damaged or was saved after a "
                "diverged training run)");
  }

  const SafeTensors& st_;
  std::string prefix_;
  const LoadControl* control_;
  StoredType last_type_ = StoredType::kF32;  // the dtype of the tensor get() read last
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
};

Weights read_weights(const SafeTensors& st, const Config& c, std::set<std::string>* dtypes, uint64_t* n_params,
                     uint64_t* stored_bytes, const LoadControl* control) {
  const std::string prefix = st.has("transformer.wte.weight") ? "transformer." : "";
  TensorReader r(st, prefix, control);
  const int64_t d = c.n_embd, V = c.vocab_size;
  Weights w;
  w.wte = r.mat("wte.weight", V, d);
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
  if (st.has("lm_head.weight")) w.lm_head = r.mat("lm_head.weight", V, d, false);
  if (dtypes) *dtypes = r.dtypes;
  if (n_params) *n_params = r.n_params;
  if (stored_bytes) *stored_bytes = r.stored_bytes;
  return w;
}

}  // namespace

Weights load_weights(const std::string& safetensors_path, const Config& config) {
  const SafeTensors st = SafeTensors::open(safetensors_path);
  return read_weights(st, config, nullptr, nullptr, nullptr, nullptr);
}

void load_gpt2_weights(const std::string& dir, Model& m, const LoadControl& control) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string st_path = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(st_path)) {
    throw Error(st_path + ": missing (expected the weights as model.safetensors; convert a pytorch_model.bin first)");
  }
  require_regular_file(st_path, "the weights as a model.safetensors file");
  // The file is read whole and the weights kept at its precision, both at
  // once, with one tensor's f32 conversion (at most the embedding) and a KV
  // cache at full context. The config gives the weights' count; a file
  // well under 4 bytes a weight keeps them at 2.
  const uint64_t file_bytes = fs::file_size(st_path, ec);
  const Config& c = m.config;
  const uint64_t d = static_cast<uint64_t>(c.n_embd), vd = static_cast<uint64_t>(c.vocab_size) * d;
  const uint64_t f32_bytes =
      4 * (vd + static_cast<uint64_t>(c.n_positions) * d + static_cast<uint64_t>(c.n_layer) * (12 * d * d + 13 * d));
  const uint64_t kept = file_bytes >= f32_bytes / 4 * 3 ? f32_bytes : f32_bytes / 2;
  const uint64_t need = file_bytes + kept + 4 * vd + kv_bytes_per_position(c) * static_cast<uint64_t>(c.n_positions);
  const uint64_t avail = available_memory_bytes();
  if (avail && need > avail) {
    throw Error(st_path + ": loading needs about " + format_bytes(static_cast<double>(need)) +
                " (file + weights + KV cache), but only " + format_bytes(static_cast<double>(avail)) +
                " of memory is available");
  }
  const SafeTensors st = SafeTensors::open(st_path, control.cancel);
  if (control.cancel && control.cancel->load()) throw Error(st_path + ": loading cancelled");
  std::set<std::string> dtypes;
  m.weights = read_weights(st, m.config, &dtypes, &m.n_params, &m.stored_bytes, &control);
  m.stored_dtype = dtypes.size() == 1 ? *dtypes.begin() : "mixed";
}

}  // namespace kvscope
