// quant_product_rows (cli_bench_quant.h): the time of one product of a
// decode-shaped weight matrix (GPT-2-124M's MLP (3072, 768) and (768, 3072),
// its tied output layer (50257, 768)) with 1 and 8 positions, at F16 (as the
// engine keeps it: panels where AVX-512 is built) and at Q8_0, Q4_K, Q6_K
// (GGUF blocks, multiplied straight from the blocks). Each round multiplies
// enough copies of the matrix (64 MiB or more in all, twice an L3 of 32 MiB)
// that every product reads its weights from memory, as a forward does.
// Random block bytes (finite scales): the time does not depend on the values.
// Timed in the thread's CPU time, best of the rounds (thread_seconds).
#include "app/cli/cli_bench_quant.h"

#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/cli/cli_out.h"
#include "model/arch/gguf_types.h"
#include "model/arch/weight_matrix.h"
#include "model/core/numeric.h"
#include "model/core/thread_pool.h"
#include "model/engine/linear.h"

namespace kvscope {
namespace {

using nlohmann::json;

constexpr uint64_t kCopiesBytes = 64ull << 20;

struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
};

// A (rows, cols) matrix of `type` with random contents.
WeightMatrix random_matrix(StoredType type, int64_t rows, int64_t cols, Rng& rng) {
  const size_t n = static_cast<size_t>(rows * cols);
  if (type == StoredType::kF16) {
    WeightMatrix m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.half.resize(n);
    for (uint16_t& h : m.half)
      h = f32_to_f16(static_cast<float>(static_cast<int64_t>(rng.next() % 2001) - 1000) * 1e-4f);
    m.keep_for_products(false);  // as the loaders keep it: panels where AVX-512 is built
    return m;
  }
  const GgmlTypeInfo& info = ggml_type_info(type);
  std::vector<uint8_t> blocks(static_cast<size_t>(stored_values_bytes(type, n)));
  for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng.next() >> 56);
  const uint16_t d = f32_to_f16(0.01f);
  for (size_t at = 0; at < blocks.size(); at += static_cast<size_t>(info.block_bytes)) {
    // The f16 scale fields: d (and dmin) first, Q6_K's d last.
    const size_t fields[2] = {type == StoredType::kQ6_K ? size_t{208} : 0, type == StoredType::kQ4_K ? 2 : ~size_t{0}};
    for (size_t f : fields)
      if (f != ~size_t{0})
        blocks[at + f] = static_cast<uint8_t>(d & 0xFF), blocks[at + f + 1] = static_cast<uint8_t>(d >> 8);
  }
  return WeightMatrix::from_blocks(type, rows, cols, std::move(blocks));
}

// This thread's CPU seconds: on a shared machine wall time also counts the
// slices other processes run in; the thread's own time (waiting on memory
// included) does not. ThreadPool(1) runs every product on this thread.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds one product of `copies` at n positions takes (best round / copies).
double product_seconds(ThreadPool& pool, const std::vector<WeightMatrix>& copies, const MatrixRM& X, int reps) {
  MatrixRM Y;
  uint64_t flops = 0;
  double best = 1e30;
  for (int r = 0; r < std::max(3, reps); ++r) {
    const double t0 = thread_seconds();
    for (const WeightMatrix& w : copies) linear(pool, X, w, nullptr, Y, flops);
    best = std::min(best, thread_seconds() - t0);
  }
  return best / static_cast<double>(copies.size());
}

}  // namespace

json quant_product_rows(int reps) {
  ThreadPool pool(1);
  Rng rng;
  json rows = json::array();
  const std::pair<int64_t, int64_t> shapes[] = {{3072, 768}, {768, 3072}, {50257, 768}};
  for (const auto& shape : shapes) {
    const int64_t r = shape.first, c = shape.second;
    MatrixRM X1(1, c), X8(8, c);
    for (int64_t i = 0; i < c; ++i) X1(0, i) = static_cast<float>(rng.next() % 1000) * 1e-3f - 0.5f;
    for (int64_t i = 0; i < 8 * c; ++i) X8.data()[i] = static_cast<float>(rng.next() % 1000) * 1e-3f - 0.5f;
    for (StoredType t : {StoredType::kF16, StoredType::kQ8_0, StoredType::kQ6_K, StoredType::kQ4_K}) {
      std::vector<WeightMatrix> copies{random_matrix(t, r, c, rng)};
      const uint64_t bytes = copies[0].product_bytes();
      while (copies.size() * bytes < kCopiesBytes) copies.push_back(copies[0]);
      const double s1 = product_seconds(pool, copies, X1, reps), s8 = product_seconds(pool, copies, X8, reps);
      rows.push_back({{"rows", r},
                      {"cols", c},
                      {"type", to_string(t)},
                      {"bytes", bytes},
                      {"ms_n1", s1 * 1e3},
                      {"gbps_n1", static_cast<double>(bytes) / s1 / 1e9},
                      {"ms_n8", s8 * 1e3}});
    }
  }
  return rows;
}

void print_quant_products(const json& rows) {
  out_printf("\none core, decode-shaped products with the weights read from memory (thread CPU time):\n");
  out_printf("%-12s %-5s %9s %9s %9s %9s\n", "shape", "type", "MB", "n=1 ms", "n=1 GB/s", "n=8 ms");
  for (const json& r : rows) {
    const std::string shape =
        std::to_string(r.at("rows").get<int64_t>()) + "x" + std::to_string(r.at("cols").get<int64_t>());
    out_printf("%-12s %-5s %9.2f %9.3f %9.1f %9.3f\n", shape.c_str(), r.at("type").get<std::string>().c_str(),
               r.at("bytes").get<double>() / 1e6, r.at("ms_n1").get<double>(), r.at("gbps_n1").get<double>(),
               r.at("ms_n8").get<double>());
  }
}

}  // namespace kvscope
