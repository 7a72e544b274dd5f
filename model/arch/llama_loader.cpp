// Llama-architecture weights from a Hugging Face folder: model.safetensors,
// or shards model-0000N-of-0000M.safetensors listed by
// model.safetensors.index.json. Every tensor's name, dtype and shape is
// checked (file, tensor, expected, actual) before any data is read; then each
// tensor is read from its file straight into the buffer it is kept in.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "model/arch/llama_loader.h"
#include "model/arch/safetensors.h"
#include "model/arch/tensor_checks.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/core/units.h"

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
  return r;
}

}  // namespace kvscope
