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

#include "model/arch/gguf.h"
#include "model/arch/gguf_config.h"
#include "model/arch/gguf_model.h"
#include "model/arch/hf_cache.h"
#include "model/arch/model_context.h"
#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {

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

void load_tokenizer(Model& m, const std::string& dir, const std::string& vocab_path) {
  m.tokenizer = Tokenizer::load(dir);
  if (m.tokenizer.vocab_size() > m.config.vocab_size) {
    throw Error(vocab_path + ": " + std::to_string(m.tokenizer.vocab_size()) +
                " tokens, but config.json says vocab_size = " + std::to_string(m.config.vocab_size) +
                " (expected at most that many)");
  }
}

void apply_context(Config& c, int context, const std::string& dir) {
  if (c.learned_positions) {
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
  std::vector<const WeightMatrix*> ms = std::visit([](const auto& w) { return w.layer_matrices(); }, m.weights);
  ms.push_back(std::visit([](const auto& w) { return &w.head(); }, m.weights));
  for (const WeightMatrix* w : ms) {
    // The matrices belong to `m`, which is not const: the lists above only
    // lend them as const.
    if (w->type == StoredType::kBF16) const_cast<WeightMatrix*>(w)->bf16_products = m.bf16_products = true;
  }
}

// What every load ends with: the bf16 marks, the time it took.
std::shared_ptr<const Model> finish_load(const std::shared_ptr<Model>& m, const LoadControl& control,
                                         std::chrono::steady_clock::time_point t0) {
  if (control.bf16_products) use_bf16_products(*m);
  m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace

Config load_model_config(const std::string& dir_or_id) {
  const std::string dir = resolve_model_dir(dir_or_id);
  if (const std::string gguf = gguf_model_path(dir); !gguf.empty()) return config_from_gguf(GgufFile::open(gguf));
  return load_config((std::filesystem::path(dir) / "config.json").string());
}

std::shared_ptr<const Model> load_model(const std::string& dir_or_id, const LoadControl& control) {
  namespace fs = std::filesystem;
  const std::string dir = resolve_model_dir(dir_or_id);
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_shared<Model>();
  if (const std::string gguf = gguf_model_path(dir); !gguf.empty()) {
    // One file: the model's name is the file's, less .gguf (an Ollama blob keeps its sha256 name).
    m->dir = gguf;
    m->name = fs::path(gguf).filename().string();
    if (fs::path(gguf).extension() == ".gguf") m->name = fs::path(gguf).stem().string();
    load_gguf_model(gguf, *m, control);
    return finish_load(m, control, t0);
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(dir + ": " + why_not_a_folder(dir) +
                " (expected a model folder: config.json, model.safetensors and vocab.json + "
                "merges.txt or tokenizer.json; or a GGUF file)");
  }
  m->dir = dir;
  m->name = fs::path(dir).lexically_normal().filename().string();
  if (m->name.empty()) m->name = fs::path(dir).lexically_normal().parent_path().filename().string();
  if (dir != dir_or_id) m->name = dir_or_id.substr(dir_or_id.find('/') + 1);  // a hub id: NAME, not the commit
  m->config = load_config((fs::path(dir) / "config.json").string());
  if (control.context > 0) apply_context(m->config, control.context, dir);
  // One line per family (model/models/): its loader fills m->weights and m->tokenizer.
  switch (m->config.arch) {
    case Arch::kGpt2:
      load_gpt2(dir, *m, control);
      break;
    case Arch::kLlama:
      load_llama(dir, *m, control);
      break;
  }
  return finish_load(m, control, t0);
}

}  // namespace kvscope
