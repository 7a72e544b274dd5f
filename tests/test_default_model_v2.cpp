// The v2 default model's held-out behaviour and its training checkpoints,
// computed by the C++ engine: the validation loss falls along the shipped
// checkpoints of the model's own training run (and matches each
// checkpoint's metrics.json), and greedy continuations reuse names that
// never occurred in training (the copy/induction pattern the app shows).
// The v2 default model ships with its training run (a training.json beside
// it, read as the window's Training tab reads it); v1 had none and copied
// no unseen name, so both tests skip while the shipped model is v1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "engine.h"
#include "generator.h"
#include "model.h"
#include "teach_training.h"

namespace kvscope {
namespace {

// The shipped models; $KVSCOPE_TEST_MODELS_DIR points the tests at another export
// (e.g. tools/train/make_training_fixture.sh's OUT/models) before it is shipped.
std::string models_dir() {
  const char* env = std::getenv("KVSCOPE_TEST_MODELS_DIR");
  return env && *env ? std::string(env) + "/" : std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/";
}
const std::string kModels = models_dir();

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Mean cross-entropy (nats/token) by the protocol in metrics.json: documents
// split on <|endoftext|>, stream [eos] d1 [eos] ... dN [eos], windows of
// n_positions tokens from index 0, each scored from position 0.
// The shipped default model's training record; false (the test skips) without one.
bool shipped_training(TrainingRecord& r) {
  return find_training_record(kModels + "kvscope-tiny", r);
}

double engine_validation_loss(const Model& m, const std::string& text) {
  const int eos = m.config.eos_token_id;
  const size_t W = static_cast<size_t>(m.config.n_positions);
  std::vector<int> stream{eos};
  const std::string sep = "<|endoftext|>";
  for (size_t at = 0;;) {
    const size_t next = text.find(sep, at);
    const std::vector<int> ids = m.tokenizer.encode(text.substr(at, next == std::string::npos ? next : next - at));
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos);
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  Engine engine(m);
  double nats = 0;
  uint64_t predicted = 0;
  for (size_t w0 = 0; w0 + 2 <= stream.size(); w0 += W) {
    const std::vector<int> window(stream.begin() + static_cast<std::ptrdiff_t>(w0),
                                  stream.begin() + static_cast<std::ptrdiff_t>(std::min(stream.size(), w0 + W)));
    const ForwardOutput out = engine.forward(window, 0, nullptr, false, /*all_logits=*/true);
    const size_t V = out.logits.size() / window.size();
    for (size_t i = 0; i + 1 < window.size(); ++i) {
      const float* row = &out.logits[i * V];
      double mx = row[0];
      for (size_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
      double z = 0;
      for (size_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
      nats += (mx + std::log(z)) - row[window[i + 1]];
      ++predicted;
    }
  }
  return nats / static_cast<double>(predicted);
}

TEST(TrainingCheckpoints, ValidationLossFallsAlongTheShippedCheckpoints) {
  TrainingRecord rec;
  if (!shipped_training(rec)) GTEST_SKIP() << "the shipped default model has no training checkpoints";
  ASSERT_GE(rec.checkpoints.size(), 4u);
  const auto slice = std::find(rec.slices.begin(), rec.slices.end(), "stories");
  ASSERT_NE(slice, rec.slices.end()) << rec.file << " has no stories validation loss";
  const size_t s = static_cast<size_t>(slice - rec.slices.begin());
  const std::string val = slurp(kModels + "kvscope-tiny/val/stories.txt");
  ASSERT_FALSE(val.empty());
  double prev = 1e9;
  int prev_step = -1;
  for (const TrainingCheckpoint& c : rec.checkpoints) {
    const auto m = load_model(c.path);
    const double loss = engine_validation_loss(*m, val);
    EXPECT_NEAR(loss, c.val[s], 0.01) << c.path;
    EXPECT_LT(loss, prev) << "step " << c.step << " is not better than step " << prev_step;
    prev = loss;
    prev_step = c.step;
  }
}

TEST(DefaultModelV2, ReusesNamesItNeverSawInTraining) {
  TrainingRecord rec;
  if (!shipped_training(rec)) GTEST_SKIP() << "the shipped default model is v1 (no training checkpoints)";
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
