// `kvscope generate --beams N` and `kvscope generate --draft DIR --speculate K`:
// the two decoding strategies beyond one token at a time, streamed as text or
// JSON Lines. Flag combinations are checked by the caller (cli.cpp).
#pragma once

#include <string>
#include <vector>

#include "model/decoding/sampler.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

struct DecodeArgs {
  std::string model;  // target (empty = the default model)
  std::string prompt;
  int max_new = 64;
  int ctx = 0;                 // --ctx (0 = the default context)
  bool bf16_products = false;  // --bf16-products: the target's
  bool json = false;
  // Beam search
  int beams = 0;  // 0 = off
  double length_penalty = 1.0;
  // Speculative decoding
  std::string draft;  // draft model folder (empty = off)
  int speculate = 4;  // K
  SamplerSettings sampler;
  // --kv-dtype and --kv-block (beam search: block 0 = the default 16, as the
  // beams share pages); the window is refused by the caller.
  KVSettings kv;
};

int cmd_generate_beams(const DecodeArgs& a);
int cmd_generate_speculative(const DecodeArgs& a);

}  // namespace kvscope
