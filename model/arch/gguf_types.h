// The tensor types of GGUF files (ggml's type ids): which kvscope reads, how
// each stores its weights in blocks, and the decoding of a row of blocks to
// f32. Every quantized type cuts a row into blocks of `block_size` weights
// and stores each block as `block_bytes` bytes: one or two f16 scales (and,
// for the K-quants, a table of small per-sub-block scales) followed by the
// weights as 4-, 5-, 6- or 8-bit integers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/numeric.h"

namespace kvscope {

// ggml's ids of the types kvscope reads (a GGUF tensor info stores the id as
// a uint32). Other ids are refused by name (ggml_type_name).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// How one readable type stores a row: `block_size` consecutive weights in
// `block_bytes` bytes (1 weight in 4 or 2 bytes for F32/F16/BF16).
struct GgmlTypeInfo {
  GgmlType type = GgmlType::kF32;
  const char* name = "";  // llama.cpp's name: "Q4_K"
  int block_size = 1;     // weights per block: 1, 32, or 256 (a K-quant super-block)
  int block_bytes = 4;    // bytes per block
  double bits_per_weight() const { return 8.0 * block_bytes / block_size; }
};

// The readable types, in id order (the table docs/gguf.md and `inspect` show).
const std::vector<GgmlTypeInfo>& ggml_readable_types();
// The readable type with id `id`, or nullptr.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
// A name for any id ggml has given a type ("Q3_K", "IQ2_XXS", "TQ1_0"), or
// "unknown" for an id it never used.
std::string ggml_type_name(uint32_t id);
// "256 weights in 144 bytes = 4.5 bits each"; "1 weight in 2 bytes = 16 bits".
std::string ggml_block_layout(const GgmlTypeInfo& t);

// The two enums of one set of types: every StoredType is a GGUF type, and
// every readable GgmlType a StoredType (a WeightMatrix's `type`).
GgmlType ggml_type_of(StoredType t);
StoredType stored_type_of(GgmlType t);
// The block layout of a StoredType (block_size 1 for F32, F16, BF16).
const GgmlTypeInfo& ggml_type_info(StoredType t);

// Decodes `n` weights stored as n / block_size blocks at `blocks` into
// out[0, n), as llama.cpp's dequantize_row_* does. Throws kvscope::Error when
// n is negative or not a multiple of the type's block size.
void dequantize_row(GgmlType type, const uint8_t* blocks, int64_t n, float* out);

}  // namespace kvscope
