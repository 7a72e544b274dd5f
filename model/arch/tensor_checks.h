// Checks both loaders run on every weight they keep (GPT-2 and the Llama
// family): one NaN or infinity in a weight turns every logit into NaN. And
// the one way both read a weight matrix: at its stored dtype, checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/arch/weight_matrix.h"
#include "model/core/numeric.h"

namespace kvscope {

// Index of the first NaN or infinity among the n values at `data` (floats
// for kF32, the 16-bit patterns for kF16 / kBF16, n / block_size blocks for
// a quantized type, whose weights are decoded), or n.
size_t first_non_finite(StoredType type, const void* data, size_t n);

// Throws kvscope::Error naming `origin` (the file), the tensor, its shape,
// the value (NaN, +inf, -inf) and the first bad element (with its row and
// column for a matrix) when any of the n values is not finite.
void check_finite(StoredType type, const void* data, size_t n, const std::string& origin, const std::string& name,
                  const std::vector<int64_t>& shape);

class SafeTensors;
struct TensorInfo;

// Reads the 2-D tensor `name` (found as `info`, whose dtype the caller has
// checked) into `m` as (shape[0], shape[1]) row-major at its stored dtype,
// with no conversion, then checks that every value is finite.
void read_matrix(const SafeTensors& st, const std::string& name, const TensorInfo& info, WeightMatrix& m,
                 const std::function<void(uint64_t)>& on_chunk = {});

}  // namespace kvscope
