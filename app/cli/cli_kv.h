// The KV cache flags of `generate`, `eval`, `render` and `bench` (--kv-window,
// --kv-sinks, --kv-dtype, --kv-block, --kv-evict, --kv-budget) and `kvscope eval`: a text's loss
// under a cache layout, compared with the dense f32 cache.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/kv/kv_cache.h"

namespace kvscope {

struct KVFlags {
  int window = 0, sinks = 0, block = 0;
  std::string dtype = "f32";
  CLI::Option *window_opt = nullptr, *sinks_opt = nullptr, *block_opt = nullptr;
  std::string evict = "none";  // none|tova|h2o|snapkv
  int budget = 0;
  CLI::Option *evict_opt = nullptr, *budget_opt = nullptr;
  // SnapKV: 0 = the default (kv_cache.h: snap_default_window, kSnapPoolDefault).
  int snap_window = 0, snap_pool = 0;
  std::string snap_pooling = "max";
  CLI::Option *snap_window_opt = nullptr, *snap_pool_opt = nullptr, *snap_pooling_opt = nullptr;
};

// Adds the flags to `cmd` (each with its range in --help).
void add_kv_flags(CLI::App* cmd, KVFlags& f);
// Only --kv-dtype and --kv-block: for serve, whose pool keeps every position
// (a preempted request recomputes from 0, a shared prefix block is shared whole).
void add_kv_storage_flags(CLI::App* cmd, KVFlags& f);
// The settings, or a one-line message naming the flag and its accepted
// range (S >= W, sinks without a window, an eviction rule without a budget
// or beside a window): the caller's usage error.
bool kv_settings_from_flags(const KVFlags& f, KVSettings* out, std::string* problem);
// The same, throwing that message as a UsageError.
KVSettings kv_settings_or_throw(const KVFlags& f);

struct EvalArgs {
  std::string file, model;
  KVSettings kv;
  bool json = false;
};

// Scores a UTF-8 text with the model card's protocol (documents split on
// <|endoftext|>, an eos stream cut into windows of n_positions, every token
// after a window's first predicted). Throws kvscope::Error for a missing,
// empty or non-UTF-8 file.
int cmd_eval(const EvalArgs& a, const std::string& default_model);

}  // namespace kvscope
