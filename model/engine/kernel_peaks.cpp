#include "model/engine/kernel_peaks.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kvscope {

#if defined(__AVX512F__)
namespace {

// 16 chains: more than the FMA's latency times its rate, so the loop runs at
// the instruction's throughput, not its latency.
constexpr int kChains = 16;
constexpr long kIterations = 1L << 20;  // 16 M instructions: ~5 ms a run at 3.5 G a second

// The accumulators' sum leaves the loop (a lane of it, to a volatile), so
// the loop is not optimised away; summed first, they stay in registers.
void keep(__m512 sum) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float sink = lanes[0];
  (void)sink;
}

}  // namespace

double fma_peak_macs_per_s(int reps) {
  return best_rate(reps, 16.0 * kChains * kIterations, [] {
    __m512 acc[kChains];
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
    for (long i = 0; i < kIterations; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    __m512 sum = acc[0];
    for (int j = 1; j < kChains; ++j) sum = _mm512_add_ps(sum, acc[j]);
    keep(sum);
  });
}
#else
double fma_peak_macs_per_s(int) {
  return 0;
}
#endif

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
double bf16_dot_peak_macs_per_s(int reps) {
  return best_rate(reps, 32.0 * kChains * kIterations, [] {
    const __m512i w = _mm512_set1_epi16(0x3c00), x = _mm512_set1_epi16(0x3a00);  // bf16 0.0078, 0.00049
    long left = kIterations;
    // The loop as one asm block on 16 registers (AT&T | Intel operand order):
    // around the instruction (as builtin or asm) GCC 12 kept an array of
    // chains in memory here.
    asm volatile(
        "vpxord {%%zmm16, %%zmm16, %%zmm16|zmm16, zmm16, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm17|zmm17, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm18|zmm18, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm19|zmm19, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm20|zmm20, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm21|zmm21, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm22|zmm22, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm23|zmm23, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm24|zmm24, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm25|zmm25, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm26|zmm26, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm27|zmm27, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm28|zmm28, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm29|zmm29, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm30|zmm30, zmm16}\n\t"
        "vmovaps {%%zmm16, %%zmm31|zmm31, zmm16}\n\t"
        "1:\n\t"
        "vdpbf16ps {%2, %1, %%zmm16|zmm16, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm17|zmm17, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm18|zmm18, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm19|zmm19, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm20|zmm20, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm21|zmm21, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm22|zmm22, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm23|zmm23, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm24|zmm24, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm25|zmm25, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm26|zmm26, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm27|zmm27, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm28|zmm28, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm29|zmm29, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm30|zmm30, %1, %2}\n\t"
        "vdpbf16ps {%2, %1, %%zmm31|zmm31, %1, %2}\n\t"
        "dec {%0|%0}\n\tjnz 1b"
        : "+r"(left)
        : "v"(w), "v"(x)
        : "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23", "zmm24", "zmm25", "zmm26", "zmm27",
          "zmm28", "zmm29", "zmm30", "zmm31", "cc");
  });
}
#else
double bf16_dot_peak_macs_per_s(int) {
  return 0;
}
#endif

}  // namespace kvscope
