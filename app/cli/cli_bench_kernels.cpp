// `kvscope bench --kernels`: one core's multiply-add rates, the linear
// kernels' (weights in the CPU's cache) against the instructions' peaks.
// A forward over n positions multiplies every weight n times; once those
// products take longer than reading the weights from memory, it costs more
// than a decode step. These rates say at which n that happens on this machine
// (docs/batching.md). Then decode-shaped products read from memory at F16
// and at GGUF's quantized types (cli_bench_quant.cpp).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "app/cli/cli_bench_quant.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_out.h"
#include "model/core/numeric.h"
#include "model/engine/kernel_peaks.h"
#include "model/engine/linear_kernels.h"

namespace kvscope {
namespace {

using nlohmann::json;

// A (256, 768) matrix: 384 KiB at 16 bits, 768 KiB at f32, in a core's L2 on
// this project's Zen 4 (1 MiB), so the rate is the arithmetic's, not the read's.
constexpr int64_t kRows = 256, kCols = 768;
constexpr int kPositions[] = {1, 2, 4, 8, 16};

// Best of `reps` (at least 3) timed runs of `calls` calls (each run ~1 ms or more), in multiply-adds a second.
template <class Call>
double rate(int reps, int n, const Call& call) {
  const int calls = std::max(1, static_cast<int>(200000 / (kRows * n)));
  return best_rate(std::max(3, reps), static_cast<double>(kRows * kCols) * n * calls, [&] {
    for (int c = 0; c < calls; ++c) call();
  });
}

struct Inputs {
  std::vector<float> f32, x;  // (kRows, kCols) weights; (16, kCols) positions
  std::vector<uint16_t> f16, bf16, x_bf16;
};

Inputs random_inputs() {
  Inputs in;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  in.f32.resize(static_cast<size_t>(kRows * kCols));
  for (float& v : in.f32) v = u(rng);
  for (float v : in.f32) in.f16.push_back(f32_to_f16(v)), in.bf16.push_back(f32_to_bf16(v));
  in.x.resize(static_cast<size_t>(16 * kCols));
  for (float& v : in.x) v = u(rng);
  for (float v : in.x) in.x_bf16.push_back(f32_to_bf16(v));
  return in;
}

// Each kernel's rates at every n (GMAC/s): the stored-precision panels the
// engine multiplies with, and (AVX512_BF16) the bf16 dot products of --bf16-products.
json kernel_rows(int reps) {
  const Inputs in = random_inputs();
  std::vector<float> y(static_cast<size_t>(16 * kRows));
  json rows = json::array();
  const std::pair<const char*, WeightView> views[] = {
      {"f32 weights", {StoredType::kF32, in.f32.data(), kRows, kCols, 0, kPanelWeights}},
      {"f16 weights", {StoredType::kF16, in.f16.data(), kRows, kCols, 0, kPanelWeights}},
      {"bf16 weights", {StoredType::kBF16, in.bf16.data(), kRows, kCols, 0, kPanelWeights}}};
  for (const auto& named : views) {
    const WeightView& view = named.second;  // (a structured binding cannot be captured in C++17)
    for (int n : kPositions) {
      const double r =
          rate(reps, n, [&] { linear_rows(view, in.x.data(), n, kCols, nullptr, y.data(), kRows, 0, kRows); });
      rows.push_back({{"kernel", named.first}, {"n", n}, {"gmacs", r / 1e9}});
    }
  }
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if (linear_detail::kBf16DotKernel) {
    for (int n : kPositions) {
      const double r = rate(reps, n, [&] {
        linear_detail::rows_panels_bf16(in.bf16.data(), kRows, kCols, in.x_bf16.data(), n, kCols, nullptr, y.data(),
                                        kRows, 0, kRows);
      });
      rows.push_back({{"kernel", "bf16 dot products"}, {"n", n}, {"gmacs", r / 1e9}});
    }
  }
#endif
  return rows;
}

void print_table(double fma, double dot, const json& rows) {
  out_printf("one core, weights in its cache (%lld x %lld), multiply-adds a second (GMAC/s):\n",
             static_cast<long long>(kRows), static_cast<long long>(kCols));
  out_printf("%-20s", "kernel");
  for (int n : kPositions) out_printf(" %8s", ("n=" + std::to_string(n)).c_str());
  out_printf("\n");
  std::string last;
  for (const json& r : rows) {
    const std::string k = r.at("kernel").get<std::string>();
    if (k != last) out_printf("%s%-20s", last.empty() ? "" : "\n", k.c_str());
    out_printf(" %8.1f", r.at("gmacs").get<double>());
    last = k;
  }
  const auto peak = [](double macs, const char* per) {
    char buf[96];
    if (macs > 0)
      std::snprintf(buf, sizeof(buf), "%.1f GMAC/s (%s an instruction)", macs / 1e9, per);
    else
      std::snprintf(buf, sizeof(buf), "not in this build");
    return std::string(buf);
  };
  out_printf("\nf32 FMA peak: %s; bf16 dot product peak: %s\n", peak(fma, "16 lanes").c_str(),
             peak(dot, "32 products").c_str());
}

}  // namespace

int bench_kernels(int reps, bool as_json) {
  const double fma = fma_peak_macs_per_s(std::max(3, reps)), dot = bf16_dot_peak_macs_per_s(std::max(3, reps));
  const json rows = kernel_rows(reps);
  const json products = quant_product_rows(reps);
  if (as_json) {
    out_line(json{{"threads", 1},
                  {"fma_peak_gmacs", fma / 1e9},
                  {"bf16_dot_peak_gmacs", dot / 1e9},
                  {"rows", rows},
                  {"decode_products", products}}
                 .dump(2));
  } else {
    print_table(fma, dot, rows);
    print_quant_products(products);
  }
  return 0;
}

}  // namespace kvscope
