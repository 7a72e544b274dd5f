#include "model/arch/model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#ifdef __EMSCRIPTEN__
#include <emscripten/heap.h>
#include <malloc.h>
#include <unistd.h>
#endif

#include "model/arch/gpt2_loader.h"
#include "model/arch/hf_cache.h"
#include "model/arch/llama_loader.h"
#include "model/arch/model_context.h"
#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {
namespace {

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
  m.file_bytes = r.file_bytes;
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

std::vector<const WeightMatrix*> Weights::layer_matrices() const {
  std::vector<const WeightMatrix*> out;
  for (const LayerWeights& L : layers)
    for (const WeightMatrix* m : {&L.attn_w_t, &L.attn_proj_w_t, &L.fc_w_t, &L.mlp_proj_w_t}) out.push_back(m);
  return out;
}

uint64_t Weights::vector_bytes() const {
  auto vec = [](const Vector& v) { return static_cast<uint64_t>(v.size()) * 4; };
  uint64_t b = vec(ln_f_g) + vec(ln_f_b);
  for (const LayerWeights& L : layers) {
    b += vec(L.ln_1_g) + vec(L.ln_1_b) + vec(L.attn_b) + vec(L.attn_proj_b) + vec(L.ln_2_g) + vec(L.ln_2_b) +
         vec(L.fc_b) + vec(L.mlp_proj_b);
  }
  return b;
}

uint64_t Weights::resident_bytes() const {
  uint64_t b = wte.resident_bytes() + lm_head.resident_bytes() + static_cast<uint64_t>(wpe.size()) * 4 + vector_bytes();
  for (const WeightMatrix* m : layer_matrices()) b += m->resident_bytes();
  return b;
}

uint64_t available_memory_bytes() {
#ifdef __EMSCRIPTEN__
  // The page's memory is the WebAssembly heap, which grows up to its maximum
  // (4 GB): what is left is that maximum above the heap's top, plus the free
  // chunks below it. (mallinfo's fields are ints: read as 32-bit unsigned,
  // exact below 4 GB.)
  const uint64_t max = emscripten_get_heap_max();
  const uint64_t top = reinterpret_cast<uintptr_t>(sbrk(0));
  const uint64_t free_below = static_cast<uint32_t>(mallinfo().fordblks);
  return max > top ? max - top + free_below : std::max<uint64_t>(free_below, 1);
#else
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
#endif
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

// LoadControl::bf16_products: marks every BF16 matrix the products read
// (the layers' and the head). A model with none was refused by its loader,
// from its plan (require_bf16_products).
void use_bf16_products(Model& m) {
  std::vector<const WeightMatrix*> ms = m.config.is_llama() ? m.llama.layer_matrices() : m.weights.layer_matrices();
  ms.push_back(m.config.is_llama() ? &m.llama.head() : &m.weights.head());
  for (const WeightMatrix* w : ms) {
    // The matrices belong to `m`, which is not const: the lists above only
    // lend them as const.
    if (w->type == StoredType::kBF16) const_cast<WeightMatrix*>(w)->bf16_products = m.bf16_products = true;
  }
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
    if (control.bf16_products) use_bf16_products(*m);
    m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  }
  load_gpt2_weights(dir, *m, control);
  m->tokenizer = Tokenizer::load(dir);
  if (m->tokenizer.vocab_size() > m->config.vocab_size) {
    throw Error(dir + "/vocab.json: " + std::to_string(m->tokenizer.vocab_size()) +
                " tokens, but config.json says vocab_size = " + std::to_string(m->config.vocab_size) +
                " (expected at most that many)");
  }
  if (control.bf16_products) use_bf16_products(*m);
  // Unused tensors (attn.bias buffers) were counted in the total: finish at 1.
  if (control.on_progress) control.on_progress(1.0f);
  m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace kvscope
