// The KV cache flags (cli_kv.h): what each accepts, and the settings they make,
// checked without a model (the model's own limits are checked when it loads).
#include <string>

#include "app/cli/cli_flags.h"
#include "app/cli/cli_kv.h"
#include "model/core/error.h"

namespace kvscope {

namespace {

void add_kv_evict_flags(CLI::App* cmd, KVFlags& f) {
  f.evict_opt = cmd->add_option("--kv-evict", f.evict,
                                "Evict by attention score, each layer down to --kv-budget after every forward: "
                                "tova|h2o, or snapkv: once after the prefill, per K/V head (default none)")
                    ->check(CLI::IsMember({"none", "tova", "h2o", "snapkv"}));
  f.budget_opt = cmd->add_option("--kv-budget", f.budget, "With --kv-evict: positions each layer keeps (N >= 1)")
                     ->check(int_in(1, 1 << 20));
  // Ranges are checked with the budget (kv_snap_from_flags): their messages name what was expected.
  f.snap_window_opt = cmd->add_option("--kv-snap-window", f.snap_window,
                                      "With --kv-evict snapkv: the observation window W, 1 <= W < N (default 32; "
                                      "max(1, N/4) when N <= 32)");
  f.snap_pool_opt =
      cmd->add_option("--kv-snap-pool", f.snap_pool, "With --kv-evict snapkv: the pooling kernel K, odd (default 7)");
  f.snap_pooling_opt = cmd->add_option("--kv-snap-pooling", f.snap_pooling,
                                       "With --kv-evict snapkv: max|avg pooling of the scores (default max)");
}

// SnapKV's window, kernel and pooling: only with --kv-evict snapkv, and in range.
bool kv_snap_from_flags(const KVFlags& f, KVSettings* s, std::string* problem) {
  const bool given = f.snap_window_opt && (*f.snap_window_opt || *f.snap_pool_opt || *f.snap_pooling_opt);
  if (s->evict != KVEvict::kSnapKV) {
    if (!given) return true;
    *problem = std::string(*f.snap_window_opt ? "--kv-snap-window"
                           : *f.snap_pool_opt ? "--kv-snap-pool"
                                              : "--kv-snap-pooling") +
               ": needs --kv-evict snapkv";
    return false;
  }
  if (!parse_kv_pooling(f.snap_pooling, &s->snap_pooling)) {
    *problem = "--kv-snap-pooling: \"" + f.snap_pooling + "\" is not one of max, avg";
    return false;
  }
  const bool window_given = f.snap_window_opt && *f.snap_window_opt;
  const int W = window_given ? f.snap_window : snap_default_window(f.budget);
  if (W < 1 || W >= f.budget) {
    *problem = window_given ? "--kv-snap-window: expected 1 <= W < N = " + std::to_string(f.budget) +
                                  " (--kv-budget), got " + std::to_string(W)
                            : "--kv-budget: SnapKV needs N >= 2 (its observation window W is at least 1 and below N), "
                              "got " +
                                  std::to_string(f.budget);
    return false;
  }
  if (f.snap_pool_opt && *f.snap_pool_opt && (f.snap_pool < 1 || f.snap_pool % 2 == 0)) {
    *problem = "--kv-snap-pool: expected an odd kernel K >= 1, got " + std::to_string(f.snap_pool);
    return false;
  }
  s->snap_window = W;
  s->snap_pool = f.snap_pool_opt && *f.snap_pool_opt ? f.snap_pool : kSnapPoolDefault;
  return true;
}

// --kv-evict and --kv-budget come together, and not with a window (one eviction rule at a time).
bool kv_evict_from_flags(const KVFlags& f, KVSettings* s, std::string* problem) {
  if (!parse_kv_evict(f.evict, &s->evict)) {
    *problem = "--kv-evict: \"" + f.evict + "\" is not one of none, tova, h2o, snapkv";
    return false;
  }
  s->budget = s->evict == KVEvict::kNone ? 0 : f.budget;
  if (s->evict != KVEvict::kNone && f.budget < 1) {
    *problem = "--kv-evict " + f.evict + ": needs --kv-budget N (positions each layer keeps, N >= 1)";
    return false;
  }
  if (s->evict == KVEvict::kNone && f.budget > 0) {
    *problem = "--kv-budget: needs --kv-evict tova|h2o|snapkv (the rule that decides which positions each layer keeps)";
    return false;
  }
  if (s->evict != KVEvict::kNone && (f.window > 0 || f.sinks > 0)) {
    *problem = std::string("--kv-evict and ") + (f.window > 0 ? "--kv-window" : "--kv-sinks") +
               ": one eviction rule at a time (drop the window, or the eviction by score)";
    return false;
  }
  return true;
}

}  // namespace

void add_kv_flags(CLI::App* cmd, KVFlags& f) {
  f.window_opt =
      cmd->add_option("--kv-window", f.window, "Sliding window: each query sees its last W positions (W >= 1)")
          ->check(int_in(1, 1 << 20));
  f.sinks_opt = cmd->add_option("--kv-sinks", f.sinks, "With --kv-window: keep the first S positions too (0 <= S < W)")
                    ->check(int_in(0, 1 << 20));
  add_kv_storage_flags(cmd, f);
  add_kv_evict_flags(cmd, f);
}

void add_kv_storage_flags(CLI::App* cmd, KVFlags& f) {
  cmd->add_option("--kv-dtype", f.dtype, "K/V row format: f32|f16|q8_0|q4_0 (default f32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
  f.block_opt = cmd->add_option("--kv-block", f.block, "Paged cache with B positions per block")
                    ->check(int_in(1, kv_block_max(nullptr), kKvBlockRangeText));
}

bool kv_settings_from_flags(const KVFlags& f, KVSettings* out, std::string* problem) {
  KVSettings s;
  if (!parse_kv_dtype(f.dtype, &s.dtype)) {
    *problem = "--kv-dtype: \"" + f.dtype + "\" is not one of f32, f16, q8_0, q4_0";
    return false;
  }
  s.window = f.window;
  s.sinks = f.sinks;
  s.block = f.block;
  if (!kv_evict_from_flags(f, &s, problem) || !kv_snap_from_flags(f, &s, problem)) return false;
  if (f.sinks > 0 && f.window == 0) {
    *problem = "--kv-sinks: needs --kv-window W (sinks are kept besides a window; expected 0 <= S < W)";
    return false;
  }
  if (f.window > 0 && f.sinks >= f.window) {
    *problem = "--kv-sinks: " + std::to_string(f.sinks) + " is outside 0.." + std::to_string(f.window - 1) +
               " (expected 0 <= S < W = " + std::to_string(f.window) + ")";
    return false;
  }
  *out = s;
  return true;
}

KVSettings kv_settings_or_throw(const KVFlags& f) {
  KVSettings k;
  std::string problem;
  if (!kv_settings_from_flags(f, &k, &problem)) throw UsageError(problem);
  return k;
}

}  // namespace kvscope
