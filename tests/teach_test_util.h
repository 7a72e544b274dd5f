// Shared by the teaching-logic tests (test_teach_*.cpp): a random checkpoint
// of the default model's size, a fixed prompt, a generation run to its end,
// sampler settings, and an error matcher.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "app/lessons/kv_memory.h"
#include "app/lessons/phases.h"
#include "app/lessons/sampling.h"
#include "app/session/branches.h"
#include "app/session/history.h"
#include "app/session/saved_view.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"
#include "model/engine/engine.h"
#include "numpy_ref_util.h"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kvscope {
namespace teachtest {

// Expects `f` to throw kvscope::Error whose message contains every needle.
template <class F>
void expect_error(F f, const std::vector<std::string>& needles, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << what << ": \"" << msg << "\" lacks \"" << n << "\"";
  }
}

// ---------------------------------------------------------------------------
// A random checkpoint of the default model's size (4 layers, 4 heads, 160
// wide, 256 positions, vocab 3257), written by tools/numpy_ref.py make into
// the build tree once (cached per content of the script, published by an
// atomic rename as the suite is). EOS is removed from its config so a
// generation runs to the end of the context.

inline const std::string& teach_checkpoint() {
  static const std::string dir = [] {
    const std::string args = "--layers 4 --heads 4 --embd 160 --ctx 256 --vocab 3257 --synthetic-vocab --seed 5";
    const std::string script = testutil::read_file(testutil::numpy_ref_script());
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(script + args));
    const std::filesystem::path root = std::filesystem::path(KVSCOPE_BUILD_DIR) / "test-data";
    std::filesystem::create_directories(root);
    const std::filesystem::path final_dir = root / (std::string("teach-") + hash);
    if (std::filesystem::exists(final_dir / "config.json")) return final_dir.string();
    const std::filesystem::path tmp = root / (std::string("teach-") + hash + ".tmp-" + std::to_string(getpid()));
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    testutil::run_numpy_ref("make --out " + testutil::shell_quote(tmp.string()) + " " + args,
                            (root / ("teach-log-" + std::to_string(getpid()) + ".txt")).string());
    nlohmann::json cfg = testutil::read_json((tmp / "config.json").string());
    cfg.erase("eos_token_id");
    cfg.erase("bos_token_id");
    testutil::write_file((tmp / "config.json").string(), cfg.dump(2));
    std::filesystem::remove(root / ("teach-log-" + std::to_string(getpid()) + ".txt"), ec);
    std::filesystem::rename(tmp, final_dir, ec);
    if (ec) std::filesystem::remove_all(tmp, ec);  // another process published it first
    if (!std::filesystem::exists(final_dir / "config.json"))
      throw std::runtime_error("teach checkpoint missing: " + final_dir.string());
    return final_dir.string();
  }();
  return dir;
}

inline std::shared_ptr<const Model> teach_model() {
  static std::shared_ptr<const Model> m = load_model(teach_checkpoint());
  return m;
}

inline std::vector<int> test_prompt(int n = 16) {
  std::vector<int> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 211 + 37) % 3000);
  return p;
}

inline std::vector<RecordPtr> run(Generator& gen, const std::vector<int>& prompt, GenerateOptions opt,
                                  const std::function<CacheMode(int)>& mode_at = nullptr) {
  if (mode_at) opt.mode = mode_at(0);
  gen.start_tokens(prompt, opt);
  std::vector<RecordPtr> out;
  for (int s = 0;; ++s) {
    if (mode_at) gen.set_mode(mode_at(s));
    RecordPtr r = gen.step();
    if (!r) break;
    out.push_back(r);
    if (s > 100000) throw std::runtime_error("generation does not stop");
  }
  return out;
}

inline SamplerSettings sampled(uint64_t seed, float temp = 0.9f, int top_k = 40, float top_p = 0.9f, float pen = 1.3f) {
  SamplerSettings s;
  s.greedy = false;
  s.temperature = temp;
  s.top_k = top_k;
  s.top_p = top_p;
  s.repetition_penalty = pen;
  s.seed = seed;
  return s;
}

// ===========================================================================
// 1. KV memory calculator

}  // namespace teachtest
}  // namespace kvscope
