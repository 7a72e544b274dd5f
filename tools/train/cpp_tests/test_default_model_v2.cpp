// The default model's unseen-name target on the C++ engine: greedy
// continuations reuse names that never occurred in training (the
// copy/induction pattern the app shows).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "generator.h"
#include "model.h"

namespace kvscope {
namespace {

const std::string kModels = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(DefaultModelV2, ReusesNamesItNeverSawInTraining) {
  const auto m = load_model(kModels + "kvscope-tiny");
  const auto prompts =
      nlohmann::json::parse(slurp(std::string(KVSCOPE_SOURCE_DIR) + "/tools/train/heldout/prompts.json"));
  int hits = 0, total = 0;
  for (const auto& p : prompts["names"]) {
    Generator g(m);
    GenerateOptions opt;
    opt.max_new = 60;
    opt.keep_history = false;
    g.start(p["prompt"].get<std::string>(), opt);
    while (g.step()) {
    }
    const std::string out = m->tokenizer.decode(std::vector<int>(g.tokens().begin() + g.n_prompt(), g.tokens().end()));
    const std::string name = p["name"];
    hits += std::regex_search(out, std::regex("\\b" + name + "\\b")) ? 1 : 0;
    ++total;
  }
  EXPECT_GE(hits * 10, total * 8) << hits << " of " << total << " unseen names reused";
}

}  // namespace
}  // namespace kvscope
