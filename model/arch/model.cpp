#include "model/arch/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "model/arch/hf_cache.h"
#include "model/arch/llama_loader.h"
#include "model/arch/model_context.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
#include "model/kv/kv_cache.h"

namespace kvscope {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

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
    if (d != "F32" && d != "F16" && d != "BF16") {
      throw Error(st_.origin() + ": tensor \"" + full + "\" has dtype " + d + ", expected F32, F16 or BF16");
    }
    if (control_ && control_->cancel && control_->cancel->load()) throw Error(st_.origin() + ": loading cancelled");
    dtypes.insert(d);
    last_type_ = d == "F16" ? StoredType::kF16 : d == "BF16" ? StoredType::kBF16 : StoredType::kF32;
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

// Llama, Mistral, Qwen2: weights as stored (llama_loader.cpp), tokenizer.json.
void load_llama(const std::string& dir, Model& m, const LoadControl& control) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string tok_path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(tok_path, ec)) {
    throw Error(tok_path + ": missing (a " + m.config.model_type + " folder needs its tokenizer.json)");
  }
  LlamaLoadResult r = load_llama_weights(dir, m.config, control);  // checks `control.cancel` first
  m.llama = std::move(r.weights);
  m.n_params = r.n_params;
  m.stored_bytes = r.stored_bytes;
  m.stored_dtype = r.stored_dtype;
  if (control.cancel && control.cancel->load()) throw Error(dir + ": loading cancelled");
  m.tokenizer = Tokenizer::load(dir);
  if (m.tokenizer.vocab_size() > m.config.vocab_size) {
    throw Error(tok_path + ": " + std::to_string(m.tokenizer.vocab_size()) +
                " tokens, but config.json says vocab_size = " + std::to_string(m.config.vocab_size) +
                " (expected at most that many)");
  }
  if (control.on_progress) control.on_progress(1.0f);
}

}  // namespace

uint64_t Weights::bytes() const {
  auto vec = [](const Vector& v) { return static_cast<uint64_t>(v.size()) * 4; };
  uint64_t b = wte.bytes() + lm_head.bytes() + static_cast<uint64_t>(wpe.size()) * 4 + vec(ln_f_g) + vec(ln_f_b);
  for (const LayerWeights& L : layers) {
    b += L.attn_w_t.bytes() + L.attn_proj_w_t.bytes() + L.fc_w_t.bytes() + L.mlp_proj_w_t.bytes();
    b += vec(L.ln_1_g) + vec(L.ln_1_b) + vec(L.attn_b) + vec(L.attn_proj_b) + vec(L.ln_2_g) + vec(L.ln_2_b) +
         vec(L.fc_b) + vec(L.mlp_proj_b);
  }
  return b;
}

Weights load_weights(const std::string& safetensors_path, const Config& config) {
  const SafeTensors st = SafeTensors::open(safetensors_path);
  return read_weights(st, config, nullptr, nullptr, nullptr, nullptr);
}

uint64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void apply_context(Config& c, int context, const std::string& dir) {
  if (!c.is_llama()) {
    throw UsageError("--ctx: " + dir + " is a GPT-2 model, whose context is fixed by its learned position table (" +
                     std::to_string(c.n_positions) + " positions); --ctx applies to Llama-family models");
  }
  if (context > c.max_position_embeddings) {
    throw UsageError("--ctx " + std::to_string(context) + " exceeds " + dir + "'s max_position_embeddings (" +
                     std::to_string(c.max_position_embeddings) + ")");
  }
  c.n_positions = context;
}

namespace {

// Why `dir` is no model folder: missing, a dangling or looping symbolic
// link, or something other than a directory.
std::string why_not_a_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec, lec;
  const fs::file_status st = fs::status(dir, ec);
  const bool link = fs::is_symlink(fs::symlink_status(dir, lec));
  if (link && ec) {
    std::error_code rec;
    const fs::path target = fs::read_symlink(dir, rec);
    const std::string to = rec ? "" : " to " + target.string();
    if (ec == std::errc::too_many_symbolic_link_levels) return "a symbolic link" + to + " that loops";
    return "a symbolic link" + to + ", which does not exist (a dangling link)";
  }
  if (ec || st.type() == fs::file_type::not_found) return "does not exist";
  return "not a directory";
}

}  // namespace

std::shared_ptr<const Model> load_model(const std::string& dir_or_id, const LoadControl& control) {
  namespace fs = std::filesystem;
  const std::string dir = resolve_model_dir(dir_or_id);
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(dir + ": " + why_not_a_folder(dir) +
                " (expected a model folder: config.json, model.safetensors and vocab.json + "
                "merges.txt or tokenizer.json)");
  }
  auto m = std::make_shared<Model>();
  m->dir = dir;
  m->name = fs::path(dir).lexically_normal().filename().string();
  if (m->name.empty()) m->name = fs::path(dir).lexically_normal().parent_path().filename().string();
  if (dir != dir_or_id) m->name = dir_or_id.substr(dir_or_id.find('/') + 1);  // a hub id: NAME, not the commit
  m->config = load_config((fs::path(dir) / "config.json").string());
  if (control.context > 0) apply_context(m->config, control.context, dir);
  if (m->config.is_llama()) {
    load_llama(dir, *m, control);
    m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }
  const std::string st_path = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(st_path)) {
    throw Error(st_path + ": missing (expected the weights as model.safetensors; convert a pytorch_model.bin first)");
  }
  require_regular_file(st_path, "the weights as a model.safetensors file");
  {
    // The file is read whole and the weights kept at its precision, both at
    // once, with one tensor's f32 conversion (at most the embedding) and a KV
    // cache at full context. The config gives the weights' count; a file
    // well under 4 bytes a weight keeps them at 2.
    const uint64_t file_bytes = fs::file_size(st_path, ec);
    const Config& c = m->config;
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
    m->weights = read_weights(st, m->config, &dtypes, &m->n_params, &m->stored_bytes, &control);
    m->stored_dtype = dtypes.size() == 1 ? *dtypes.begin() : "mixed";
  }
  m->tokenizer = Tokenizer::load(dir);
  if (m->tokenizer.vocab_size() > m->config.vocab_size) {
    throw Error(dir + "/vocab.json: " + std::to_string(m->tokenizer.vocab_size()) +
                " tokens, but config.json says vocab_size = " + std::to_string(m->config.vocab_size) +
                " (expected at most that many)");
  }
  // Unused tensors (attn.bias buffers) were counted in the total: finish at 1.
  if (control.on_progress) control.on_progress(1.0f);
  m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace kvscope
