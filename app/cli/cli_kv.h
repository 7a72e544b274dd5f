// The KV cache flags of `generate`, `eval`, `render` and `bench` (--kv-window,
// --kv-sinks, --kv-dtype, --kv-block, --kv-evict, --kv-budget, --kv-snap-*),
// bound straight to a KVLayout, and `kvscope eval`: a text's loss under a
// cache layout, compared with the dense f32 cache.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model/kv/kv_layout.h"

namespace kvscope {

// Adds the flags to `cmd`, bound to the choices of `kv` (each with its range
// in --help). They are checked together after the parse by check_kv_flags.
void add_kv_flags(CLI::App* cmd, KVLayout& kv);
// Only --kv-dtype and --kv-block (its option returned): for serve, whose pool
// keeps every position (a preempted request recomputes from 0, a shared
// prefix block is shared whole).
CLI::Option* add_kv_storage_flags(CLI::App* cmd, KVLayout& kv);
// After `cmd` parsed into `kv`: the flags checked together without a model
// (S < W, sinks without a window, an eviction rule without a budget or beside
// a window, SnapKV's settings only with SnapKV) and SnapKV's defaults
// resolved. Throws UsageError, one line naming the flag and its range.
void check_kv_flags(const CLI::App& cmd, KVLayout& kv);

// `eval --needle`: the needle-in-a-haystack probe (model/decoding/needle.h)
// of each eviction rule at each budget and depth, the haystack from --file.
struct NeedleArgs {
  bool on = false;
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};  // where the needle sits in the haystack
  std::vector<int> budgets{8, 16, 32};                    // positions each layer keeps
  int tokens = 64;  // prompt length at most (what the embedded model still copies across)
  // The embedded model copies a made-up name it has seen once: the question
  // ends with the name's first letter, the answer is the rest.
  std::string needle = " There was also a kind robot named Zubrik.";
  std::string question = "\nOne day, Z";
  std::string answer = "ubrik";
};

struct EvalArgs {
  std::string file, model;
  KVLayout kv;
  bool json = false;
  NeedleArgs needle;
};

// Scores a UTF-8 text with the model card's protocol (documents split on
// <|endoftext|>, an eos stream cut into windows of n_positions, every token
// after a window's first predicted). Throws kvscope::Error for a missing,
// empty or non-UTF-8 file.
int cmd_eval(const EvalArgs& a, const std::string& default_model);
// The needle table: one row per (depth, layout) with whether the answer
// survives; a.kv must be the default (the probe compares its own layouts).
int cmd_needle(const EvalArgs& a, const std::string& default_model);

}  // namespace kvscope
