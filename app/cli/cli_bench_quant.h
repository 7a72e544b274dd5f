// `kvscope bench --kernels`' second table: decode-shaped products from
// memory at F16 and at GGUF's quantized types (cli_bench_quant.cpp).
#pragma once

#include <nlohmann/json.hpp>

namespace kvscope {

// One row per shape and type: rows, cols, type, bytes (what one product
// reads), ms_n1 / gbps_n1 (a decode step's product: bytes / time) and ms_n8
// (8 positions), best of `reps` (at least 3) rounds, on one core.
nlohmann::json quant_product_rows(int reps);
void print_quant_products(const nlohmann::json& rows);

}  // namespace kvscope
