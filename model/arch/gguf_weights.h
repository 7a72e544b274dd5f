// The tensors of a GGUF file as a family's weights: each one wanted is
// checked (present, dims in ggml order, a type its use allows) before any is
// read, then read into the place the family keeps it: a matrix at its stored
// type (F32, F16, BF16, or its quantized blocks), a vector (norm weight,
// bias) or a table (GPT-2's positions) in f32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/arch/gguf.h"
#include "model/arch/load_control.h"
#include "model/arch/weight_matrix.h"

namespace kvscope {

struct GgufWanted {
  enum class Use {
    kProduct,  // a matrix the products read: any readable type, kept as stored
    kLookup,   // an untied embedding, looked up a row at a time: any readable type, kept as stored
    kVector,   // a norm weight or bias: F32, F16 or BF16, kept in f32
    kTable,    // a matrix kept in f32 (GPT-2's position table): any readable type, decoded
  };
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] the row length (a PyTorch (out, in) matrix is [in, out])
  Use use = Use::kProduct;
  WeightMatrix* matrix = nullptr;                 // kProduct, kLookup
  std::function<void(std::vector<float>&&)> put;  // kVector, kTable: the values, row-major
  // > 0: llama.cpp's converter reordered the rows of each of this many heads
  // (LlamaModel.permute, Llama-architecture Q and K); the reader puts them back.
  int permuted_heads = 0;
};

// What the wanted tensors take, known from the header.
struct GgufTotals {
  KeptWeights kept;          // the matrices as stored (plan_kept_weights), vectors and tables in f32
  uint64_t n_params = 0;     // elements of the wanted tensors
  uint64_t file_bytes = 0;   // their bytes in the file
  uint64_t largest = 0;      // the largest tensor's bytes (a temporary of reading it)
  std::string stored_dtype;  // the matrices' one type ("Q4_K", "F16"), or "mixed"
};

// Checks every wanted tensor against the file (missing, other dims, a type
// its use does not allow: an Error naming the file, the tensor, expected and
// found) and totals them.
GgufTotals check_gguf_tensors(const GgufFile& f, const std::vector<GgufWanted>& wanted, uint64_t wide_max_bytes);

// Reads the checked tensors into their places (f32 copies of 16-bit
// matrices where `wide`), each checked finite. control: progress, cancel.
void read_gguf_tensors(const GgufFile& f, const std::vector<GgufWanted>& wanted, const GgufTotals& totals,
                       const LoadControl& control);

// Rows of `data` (rows x row_bytes) back in Hugging Face's order from
// llama.cpp's: within each of `heads` heads of hd rows, row 2i + j came from
// row j hd/2 + i (j = 0, 1). Whole rows move, so it works on quantized rows.
void unpermute_head_rows(uint8_t* data, int64_t rows, size_t row_bytes, int heads);

}  // namespace kvscope
