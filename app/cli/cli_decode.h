// `kvscope generate --beams N` and `kvscope generate --draft DIR --speculate K`:
// the two decoding strategies beyond one token at a time, streamed as text or
// JSON Lines; and the strategy flags `generate` and `render` share.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model/decoding/sampler.h"
#include "model/decoding/strategy.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

struct DecodeArgs {
  std::string model;  // target (empty = the default model)
  std::string prompt;
  int max_new = 64;
  int ctx = 0;                 // --ctx (0 = the default context)
  bool bf16_products = false;  // --bf16-products: the target's
  bool json = false;
  Strategy strategy;  // beam search or speculative decoding (sampling: cmd_generate)
  SamplerSettings sampler;
  // --kv-dtype and --kv-block (beam search: block 0 = the default 16, as the
  // beams share pages); a window or a score rule is refused by the caller
  // (strategy_refusal).
  KVLayout kv;
};

// Runs a.strategy's driver (make_driver) to the end.
int cmd_generate_strategy(const DecodeArgs& a);

// --beams N [--length-penalty L] or --draft DIR [--speculate K], bound by CLI11.
struct StrategyFlags {
  strategy::Beam beam;
  strategy::Speculative spec;
  CLI::Option *beams = nullptr, *length_penalty = nullptr, *draft = nullptr, *speculate = nullptr;
  bool given() const { return beams->count() || length_penalty->count() || draft->count() || speculate->count(); }
};
// `verb` says what the command does with the strategy in --help ("Run", "Draw").
void add_strategy_flags(CLI::App* cmd, StrategyFlags& f, const std::string& verb);
// The one strategy the flags choose (sampling when none is given); UsageError
// for a combination without a meaning (--beams with --draft, --speculate
// without --draft, --length-penalty without --beams).
Strategy strategy_from_flags(const StrategyFlags& f);

}  // namespace kvscope
