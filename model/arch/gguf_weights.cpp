#include "model/arch/gguf_weights.h"

#include <cstring>
#include <optional>
#include <set>

#include "model/arch/safetensors.h"
#include "model/arch/tensor_checks.h"
#include "model/core/error.h"

namespace kvscope {
namespace {

// The stored type of a GGUF float type (F32, F16, BF16); none for a quantized one.
std::optional<StoredType> float_type(GgmlType t) {
  const StoredType st = stored_type_of(t);
  return is_quantized(st) ? std::nullopt : std::optional<StoredType>(st);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  return shape_str(dims) + " (ggml order: row length first)";
}

// The file's tensor `w.name`, checked against what `w` expects.
const GgufTensor& checked(const GgufFile& f, const GgufWanted& w) {
  const GgufTensor* t = f.tensor(w.name);
  if (!t) throw Error(f.origin() + ": missing tensor \"" + w.name + "\" (expected dims " + dims_str(w.dims) + ")");
  if (t->dims != w.dims) {
    throw Error(f.origin() + ": tensor \"" + w.name + "\" has dims " + shape_str(t->dims) + ", expected " +
                dims_str(w.dims) + " (from the file's metadata)");
  }
  if (w.use == GgufWanted::Use::kVector && !float_type(t->type)) {
    throw Error(f.origin() + ": tensor \"" + w.name + "\" type: found " + ggml_type_info(t->type).name +
                ", expected F32, F16 or BF16 (a norm weight or bias is never quantized)");
  }
  return *t;
}

// A matrix tensor at its stored type, rows restored where the converter permuted them.
WeightMatrix read_matrix(const GgufFile& f, const GgufTensor& t, int permuted_heads) {
  const int64_t cols = t.dims[0], rows = t.dims[1];
  const size_t row_bytes = static_cast<size_t>(t.n_bytes / static_cast<uint64_t>(rows));
  const std::optional<StoredType> ft = float_type(t.type);
  if (!ft) {
    // A quantized matrix keeps the tensor's blocks: the one place they enter the model.
    std::vector<uint8_t> blocks(static_cast<size_t>(t.n_bytes));
    f.read_raw(t, blocks.data());
    if (permuted_heads > 0) unpermute_head_rows(blocks.data(), rows, row_bytes, permuted_heads);
    const StoredType st = stored_type_of(t.type);
    check_finite(st, blocks.data(), static_cast<size_t>(rows * cols), f.origin(), t.name, {rows, cols});
    return WeightMatrix::from_blocks(st, rows, cols, std::move(blocks));
  }
  WeightMatrix m;
  m.type = *ft;
  m.rows = rows;
  m.cols = cols;
  const size_t n = static_cast<size_t>(rows * cols);
  void* data = nullptr;
  if (*ft == StoredType::kF32) {
    m.f32.resize(n);
    data = m.f32.data();
  } else {
    m.half.resize(n);
    data = m.half.data();
  }
  f.read_raw(t, data);
  if (permuted_heads > 0) unpermute_head_rows(static_cast<uint8_t*>(data), rows, row_bytes, permuted_heads);
  check_finite(*ft, data, n, f.origin(), t.name, {rows, cols});
  return m;
}

}  // namespace

void unpermute_head_rows(uint8_t* data, int64_t rows, size_t row_bytes, int heads) {
  const int64_t hd = rows / heads, half = hd / 2;
  std::vector<uint8_t> head(static_cast<size_t>(hd) * row_bytes);
  for (int h = 0; h < heads; ++h) {
    uint8_t* block = data + static_cast<size_t>(h * hd) * row_bytes;
    std::memcpy(head.data(), block, head.size());
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(block + static_cast<size_t>(j * half + i) * row_bytes,
                    head.data() + static_cast<size_t>(2 * i + j) * row_bytes, row_bytes);
      }
    }
  }
}

GgufTotals check_gguf_tensors(const GgufFile& f, const std::vector<GgufWanted>& wanted, uint64_t wide_max_bytes) {
  GgufTotals t;
  std::vector<StoredMatrix> matrices;
  uint64_t f32_values = 0;
  std::set<std::string> types;
  for (const GgufWanted& w : wanted) {
    const GgufTensor& g = checked(f, w);
    const uint64_t numel = static_cast<uint64_t>(g.n_elements);
    t.n_params += numel;
    t.file_bytes += g.n_bytes;
    t.largest = std::max(t.largest, g.n_bytes);
    if (w.use == GgufWanted::Use::kVector || w.use == GgufWanted::Use::kTable) {
      f32_values += numel;
      continue;
    }
    types.insert(ggml_type_info(g.type).name);
    matrices.push_back({stored_type_of(g.type), numel, w.use == GgufWanted::Use::kLookup});
  }
  t.stored_dtype = types.size() == 1 ? *types.begin() : "mixed";
  t.kept = plan_kept_weights(matrices, f32_values, wide_max_bytes);
  return t;
}

void read_gguf_tensors(const GgufFile& f, const std::vector<GgufWanted>& wanted, const GgufTotals& totals,
                       const LoadControl& control) {
  uint64_t done = 0;
  for (const GgufWanted& w : wanted) {
    if (control.cancel && control.cancel->load()) throw Error(f.origin() + ": loading cancelled");
    const GgufTensor& t = *f.tensor(w.name);
    if (w.matrix) {
      *w.matrix = read_matrix(f, t, w.permuted_heads);
      if (w.use == GgufWanted::Use::kProduct) w.matrix->keep_for_products(totals.kept.wide);
    } else {
      std::vector<float> v = f.to_f32(w.name);
      // (out, in) as a PyTorch shape, so a bad value is named by its row and column.
      check_finite(StoredType::kF32, v.data(), v.size(), f.origin(), w.name, {w.dims.rbegin(), w.dims.rend()});
      w.put(std::move(v));
    }
    done += t.n_bytes;
    if (control.on_progress && totals.file_bytes) {
      control.on_progress(static_cast<float>(static_cast<double>(done) / static_cast<double>(totals.file_bytes)));
    }
  }
}

}  // namespace kvscope
