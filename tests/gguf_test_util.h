// The GGUF tests' shared helper: tools/numpy_gguf.py's suite (GGUF files,
// their float64 references and suite.json), generated once per version of
// the script (numpy_ref_util.h's generated_suite).
#pragma once

#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope::testutil {

inline const std::string& gguf_suite_dir() {
  static const std::string dir =
      generated_suite(std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_gguf.py", "numpy_gguf");
  return dir;
}

// Greedy steps from `prompt` on a dense cache (its prefill, then one token a
// step): each step's logits and the tokens, prompt included.
struct Greedy {
  std::vector<std::vector<float>> logits;
  std::vector<int> tokens;
};

inline Greedy greedy_run(const Model& m, std::vector<int> tokens, int steps) {
  Engine eng(m);
  KVCache cache(KVLayout::for_model(m.config));
  Greedy r;
  for (int s = 0; s <= steps; ++s) {
    const int T = static_cast<int>(tokens.size());
    ForwardOutput out = eng.forward(tokens, s == 0 ? 0 : T - 1, &cache, false);
    int best = 0;
    for (int v = 1; v < static_cast<int>(out.logits.size()); ++v)
      if (out.logits[static_cast<size_t>(v)] > out.logits[static_cast<size_t>(best)]) best = v;
    r.logits.push_back(out.logits);
    tokens.push_back(best);
  }
  r.tokens = tokens;
  return r;
}

}  // namespace kvscope::testutil
