// One definition per user setting that more than one front end takes: the
// flag that names it and the values it accepts. The CLI's flags (their
// --help and usage errors), `render`, and the window (restored settings,
// the worker's checks) all read this table, so a range cannot differ
// between them. Page size (--kv-block) depends on the model: check_kv_block
// in model/kv/kv_cache.h.
#pragma once

#include <cstdint>

namespace kvscope {

struct IntSetting {
  const char* flag;
  int64_t lo, hi;  // [lo, hi]
};

struct RealSetting {
  const char* flag;
  double lo, hi;  // [lo, hi], or (lo, hi] when lo_open
  bool lo_open;
  // Settings are held as float: with an open bound, the float must be above
  // it too (top_p 1e-300 is above 0 as a double, 0 as a float, and would pass
  // here only for the sampler to refuse it). The cast comes last: x is in
  // float range by then.
  constexpr bool contains(double x) const {
    return lo_open ? x > lo && x <= hi && static_cast<float>(x) > lo : x >= lo && x <= hi;
  }
  // In the range as a double but on its open bound as a float: what an error
  // explains ("it rounds to 0"), since the value looks inside the range.
  constexpr bool rounds_to_bound(double x) const { return lo_open && x > lo && x <= hi && !contains(x); }
};

namespace setting {
inline constexpr RealSetting kTemperature{"--temperature", 0.001, 1000, false};
inline constexpr RealSetting kTopP{"--top-p", 0, 1, true};
inline constexpr IntSetting kTopK{"--top-k", 0, 1 << 24};  // 0 = off
inline constexpr RealSetting kRepetitionPenalty{"--repetition-penalty", 0.01, 100, false};
inline constexpr IntSetting kBeams{"--beams", 1, 8};
inline constexpr RealSetting kLengthPenalty{"--length-penalty", -100, 100, false};
inline constexpr IntSetting kSpeculate{"--speculate", 1, 16};
// New tokens of one generation or served request (the window: also at most its model's context).
inline constexpr IntSetting kMaxNew{"--max-new", 1, 1 << 20};
// Llama family: positions reserved for the KV cache (also at most max_position_embeddings, checked on load).
inline constexpr IntSetting kCtx{"--ctx", 2, 1 << 24};
}  // namespace setting

}  // namespace kvscope
