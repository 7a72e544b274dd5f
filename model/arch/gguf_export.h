// A loaded model written as a GGUF file at one tensor type, as llama.cpp's
// convert_hf_to_gguf.py and llama-quantize (--pure) would write it: what
// `kvscope quantize` does. docs/gguf.md ("Writing GGUF files") has the rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/gguf_types.h"
#include "model/arch/model.h"

namespace kvscope {

class GgufWriter;

// One tensor as written.
struct ExportedTensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order
  GgmlType type = GgmlType::kF32;
  uint64_t n_elements = 0, n_bytes = 0;
  bool fallback = false;  // its rows do not fit the asked type's blocks: written at the fallback type
};

struct GgufExport {
  std::string bytes;  // the whole file
  std::vector<ExportedTensor> tensors;
};

// The type a 2-D tensor with rows of `row_length` weights gets when `asked`
// is the file's type (llama-quantize's rule): Q4_K -> Q5_0 and Q6_K -> Q8_0
// when the row is not a multiple of 256; then F16 when the row is not a
// multiple of the fallback's block either (Q8_0 and Q4_0 rows not a multiple
// of 32 go to F16 directly, as the converter does).
GgmlType export_type(GgmlType asked, int64_t row_length);

// llama.cpp's general.file_type (enum llama_ftype) for the file's type:
// F16 1, Q4_0 2, Q8_0 7, Q4_K 14 (Q4_K_S: llama-quantize's plain Q4_K), Q6_K 18, BF16 32.
uint32_t gguf_file_type(GgmlType type);

// `m` at `type` (F16, BF16, Q8_0, Q4_0, Q4_K or Q6_K): general.* metadata,
// the hyperparameters under llama.cpp's keys, the tokenizer (tokenizer_export
// below), the chat template when the model has one, the tensors under
// llama.cpp's names with llama's Q/K rows permuted, a tied head left out,
// 1-D tensors (norms, biases) in F32. A matrix already stored at `type` is
// copied block for block; any other is decoded to f32 and quantized
// (quantize_row). Throws kvscope::Error for what GGUF cannot hold
// (Llama-3's rope scaling) or a tokenizer it cannot describe.
GgufExport export_gguf(const Model& m, GgmlType type);

// The tokenizer.* metadata (and tokenizer.chat_template) of `m`, from the
// files it was loaded from: a GGUF's tokenizer.* keys copied; a folder's
// vocab.json + merges.txt (GPT-2) or tokenizer.json converted as llama.cpp's
// converter does (byte-level BPE: tokenizer.ggml.model "gpt2" with tokens,
// token_type, merges and pre; SentencePiece-style BPE: "llama" with tokens,
// scores and token_type). Throws kvscope::Error naming the file and the field
// for a tokenizer GGUF has no name for.
void tokenizer_export(const Model& m, GgufWriter& w);

}  // namespace kvscope
