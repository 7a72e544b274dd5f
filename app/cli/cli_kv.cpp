// The KV cache flags (cli_kv.h): what each accepts, bound to a KVLayout's
// choices, and their checks together without a model (the model's own limits
// are checked when it loads, by KVLayout::on_model).
#include <string>

#include "app/cli/cli_flags.h"
#include "app/cli/cli_kv.h"
#include "model/core/error.h"

namespace kvscope {

namespace {

// A name flag (--kv-dtype, --kv-evict, --kv-snap-pooling) parsed by `parse` into `*out`.
template <class E>
CLI::Option* add_name_flag(CLI::App* cmd, const std::string& flag, E* out, bool (*parse)(const std::string&, E*),
                           const std::string& help) {
  return cmd->add_option_function<std::string>(
      flag, [out, parse](const std::string& v) { parse(v, out); }, help);
}

// Whether `cmd` has `flag` and it was given (serve has no eviction flags).
bool given(const CLI::App& cmd, const char* flag) {
  const CLI::Option* o = cmd.get_option_no_throw(flag);
  return o && o->count() > 0;
}

void add_kv_evict_flags(CLI::App* cmd, KVLayout& kv) {
  add_name_flag(cmd, "--kv-evict", &kv.evict, parse_kv_evict,
                "Evict by attention score, each layer down to --kv-budget after every forward: "
                "tova|h2o, or snapkv: once after the prefill, per K/V head (default none)")
      ->check(CLI::IsMember({"none", "tova", "h2o", "snapkv"}));
  cmd->add_option("--kv-budget", kv.budget, "With --kv-evict: positions each layer keeps (N >= 1)")
      ->check(int_in(1, kKvWindowMaxNoModel));
  // Ranges are checked with the budget (check_snap): their messages name what was expected.
  cmd->add_option("--kv-snap-window", kv.snap_window,
                  "With --kv-evict snapkv: the observation window W, 1 <= W < N (default 32; "
                  "max(1, N/4) when N <= 32)");
  cmd->add_option("--kv-snap-pool", kv.snap_pool, "With --kv-evict snapkv: the pooling kernel K, odd (default 7)");
  const CLI::Validator pooling(
      [](std::string& v) {
        KVPooling p = KVPooling::kMax;
        return parse_kv_pooling(v, &p) ? std::string() : "\"" + v + "\" is not one of max, avg";
      },
      "max|avg");
  add_name_flag(cmd, "--kv-snap-pooling", &kv.snap_pooling, parse_kv_pooling,
                "With --kv-evict snapkv: max|avg pooling of the scores (default max)")
      ->check(pooling);
}

// SnapKV's window, kernel and pooling: only with --kv-evict snapkv, and in range.
void check_snap(const CLI::App& cmd, KVLayout& kv) {
  const bool window_given = given(cmd, "--kv-snap-window"), pool_given = given(cmd, "--kv-snap-pool");
  if (kv.evict != KVEvict::kSnapKV) {
    const char* flag = window_given                      ? "--kv-snap-window"
                       : pool_given                      ? "--kv-snap-pool"
                       : given(cmd, "--kv-snap-pooling") ? "--kv-snap-pooling"
                                                         : nullptr;
    if (flag) throw UsageError(std::string(flag) + ": needs --kv-evict snapkv");
    return;
  }
  const int W = window_given ? kv.snap_window : snap_default_window(kv.budget);
  if (W < 1 || W >= kv.budget) {
    throw UsageError(window_given ? "--kv-snap-window: expected 1 <= W < N = " + std::to_string(kv.budget) +
                                        " (--kv-budget), got " + std::to_string(W)
                                  : "--kv-budget: SnapKV needs N >= 2 (its observation window W is at least 1 and "
                                    "below N), got " +
                                        std::to_string(kv.budget));
  }
  if (pool_given && (kv.snap_pool < 1 || kv.snap_pool % 2 == 0))
    throw UsageError("--kv-snap-pool: expected an odd kernel K >= 1, got " + std::to_string(kv.snap_pool));
  kv.snap_window = W;
  if (!pool_given) kv.snap_pool = kSnapPoolDefault;
}

// --kv-evict and --kv-budget come together, and not with a window (one eviction rule at a time).
void check_evict(const KVLayout& kv) {
  if (kv.evicting() && kv.budget < 1) {
    throw UsageError(std::string("--kv-evict ") + to_string(kv.evict) +
                     ": needs --kv-budget N (positions each layer keeps, N >= 1)");
  }
  if (!kv.evicting() && kv.budget > 0) {
    throw UsageError(
        "--kv-budget: needs --kv-evict tova|h2o|snapkv (the rule that decides which positions each layer keeps)");
  }
  if (kv.evicting() && (kv.window > 0 || kv.sinks > 0)) {
    throw UsageError(std::string("--kv-evict and ") + (kv.window > 0 ? "--kv-window" : "--kv-sinks") +
                     ": one eviction rule at a time (drop the window, or the eviction by score)");
  }
}

}  // namespace

void add_kv_flags(CLI::App* cmd, KVLayout& kv) {
  cmd->add_option("--kv-window", kv.window, "Sliding window: each query sees its last W positions (W >= 1)")
      ->check(int_in(1, kKvWindowMaxNoModel));
  cmd->add_option("--kv-sinks", kv.sinks, "With --kv-window: keep the first S positions too (0 <= S < W)")
      ->check(int_in(0, kKvWindowMaxNoModel));
  add_kv_storage_flags(cmd, kv);
  add_kv_evict_flags(cmd, kv);
}

CLI::Option* add_kv_storage_flags(CLI::App* cmd, KVLayout& kv) {
  add_name_flag(cmd, "--kv-dtype", &kv.dtype, parse_kv_dtype, "K/V row format: f32|f16|q8_0|q4_0 (default f32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
  return cmd->add_option("--kv-block", kv.block, "Paged cache with B positions per block")
      ->check(int_in(1, kv_block_max(nullptr), kKvBlockRangeText));
}

void check_kv_flags(const CLI::App& cmd, KVLayout& kv) {
  check_evict(kv);
  check_snap(cmd, kv);
  if (kv.sinks > 0 && kv.window == 0)
    throw UsageError("--kv-sinks: needs --kv-window W (sinks are kept besides a window; expected 0 <= S < W)");
  if (kv.window > 0 && kv.sinks >= kv.window) {
    throw UsageError("--kv-sinks: " + std::to_string(kv.sinks) + " is outside 0.." + std::to_string(kv.window - 1) +
                     " (expected 0 <= S < W = " + std::to_string(kv.window) + ")");
  }
}

}  // namespace kvscope
