// The embedded default model (assets/models/kvscope-tiny): it loads, the C++
// engine reproduces the validation loss the training pipeline wrote into its
// model card (an end-to-end check of training, export and the C++ forward),
// and greedy continuations of the app's presets pass the card's quality bars.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "engine.h"
#include "generator.h"
#include "model.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

std::string model_dir() {
  return std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny";
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::shared_ptr<const Model>& tiny() {
  static const std::shared_ptr<const Model> m = load_model(model_dir());
  return m;
}

std::vector<int> greedy(const std::string& prompt, int max_new, std::vector<RecordPtr>* records = nullptr) {
  Generator g(tiny());
  GenerateOptions opt;
  opt.max_new = max_new;
  g.start(prompt, opt);
  while (RecordPtr r = g.step()) {
    if (records) records->push_back(r);
  }
  return std::vector<int>(g.tokens().begin() + g.n_prompt(), g.tokens().end());
}

TEST(DefaultModel, ShippedFilesLoadAndStaySmall) {
  const auto& m = tiny();
  EXPECT_EQ(m->config.n_layer, 4);
  EXPECT_EQ(m->config.n_positions, 256);
  EXPECT_GT(m->n_params, 1'000'000u);
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models")) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  EXPECT_LT(bytes, 10u * 1000 * 1000) << "shipped models must stay under 10 MB";
  // The draft model shares the tokenizer (speculative decoding later).
  auto draft = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-draft");
  EXPECT_EQ(slurp(model_dir() + "/vocab.json"), slurp(draft->dir + "/vocab.json"));
  EXPECT_EQ(slurp(model_dir() + "/merges.txt"), slurp(draft->dir + "/merges.txt"));
}

// The protocol is the one metrics.json spells out: documents split on the
// literal <|endoftext|>, stream [eos] d1 [eos] ... dN [eos], windows of
// n_positions tokens from index 0, each scored from position 0.
TEST(DefaultModel, ValidationLossMatchesModelCard) {
  const auto& m = tiny();
  const auto metrics = nlohmann::json::parse(slurp(model_dir() + "/metrics.json"));
  const int eos = m->config.eos_token_id;
  const int W = m->config.n_positions;
  Engine engine(*m);
  for (const char* part : {"stories", "facts", "code"}) {
    const std::string text = slurp(model_dir() + "/val/" + part + ".txt");
    ASSERT_FALSE(text.empty()) << part;
    std::vector<int> stream{eos};
    const std::string sep = "<|endoftext|>";
    size_t at = 0;
    for (;;) {
      const size_t next = text.find(sep, at);
      const std::vector<int> ids = m->tokenizer.encode(text.substr(at, next == std::string::npos ? next : next - at));
      stream.insert(stream.end(), ids.begin(), ids.end());
      stream.push_back(eos);
      if (next == std::string::npos) break;
      at = next + sep.size();
    }
    double nats = 0;
    uint64_t predicted = 0;
    for (size_t w0 = 0; w0 + 2 <= stream.size(); w0 += static_cast<size_t>(W)) {
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
    const double loss = nats / static_cast<double>(predicted);
    const auto& card = metrics["parts"][part];
    EXPECT_EQ(predicted, card["predicted_tokens"].get<uint64_t>()) << part;
    EXPECT_NEAR(loss, card["loss"].get<double>(), 0.01) << part << ": C++ engine vs the model card";
  }
}

TEST(DefaultModel, FactPresetAnswersCapitals) {
  const auto& tok = tiny()->tokenizer;
  EXPECT_NE(tok.decode(greedy("The capital of France is", 4)).find(" Paris"), std::string::npos);
  // "Most countries": the pairs come from the held-out facts (countries-list data).
  const std::string facts = slurp(model_dir() + "/val/facts.txt");
  const std::regex pat("The capital of ([A-Z][A-Za-z ]+) is ([A-Z][^.\\n]+)\\.");
  std::map<std::string, std::string> truth;
  for (auto it = std::sregex_iterator(facts.begin(), facts.end(), pat); it != std::sregex_iterator(); ++it) {
    truth[(*it)[1]] = (*it)[2];
  }
  ASSERT_GE(truth.size(), 20u);
  int right = 0, total = 0;
  for (const auto& [country, capital] : truth) {
    if (total == 40) break;
    ++total;
    const std::string out = tok.decode(greedy("The capital of " + country + " is", 8));
    if (out.rfind(" " + capital, 0) == 0) ++right;
  }
  EXPECT_GE(right * 10, total * 8) << right << " of " << total << " capitals right";
}

TEST(DefaultModel, StoryPresetReusesNamesAndACopyHeadPointsBack) {
  std::vector<RecordPtr> recs;
  const std::vector<int> out = greedy("Once upon a time", 60, &recs);
  const std::string text = tiny()->tokenizer.decode(out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("named ([A-Z][a-z]+)"))) << text;
  const std::string name = m[1];
  const size_t first = static_cast<size_t>(m.position(1));
  ASSERT_NE(text.find(name, first + name.size()), std::string::npos) << "the name is never reused: " << text;

  // At a step that writes the name again, some head puts most of its weight on
  // the earlier occurrence (the induction / copy pattern the app shows).
  const std::vector<int> name_ids = tiny()->tokenizer.encode(" " + name);
  ASSERT_EQ(name_ids.size(), 1u);
  std::vector<int> seq = recs.front()->prompt_tokens;
  for (const auto& r : recs) seq.push_back(r->token);
  float best = 0;
  for (size_t s = 1; s < recs.size(); ++s) {
    const StepRecord& r = *recs[s];
    if (r.token != name_ids[0]) continue;
    for (int pos = 0; pos < r.seq_len - 1; ++pos) {
      if (seq[static_cast<size_t>(pos)] != name_ids[0]) continue;
      for (int l = 0; l < r.n_layer; ++l)
        for (int h = 0; h < r.n_head; ++h) best = std::max(best, r.attention(l, h, r.n_rows - 1, pos));
    }
  }
  EXPECT_GT(best, 0.5f) << "no head attends back to the earlier \"" << name << "\"";
}

TEST(DefaultModel, CodePresetLooksLikePython) {
  const std::string text = "def " + tiny()->tokenizer.decode(greedy("def ", 40));
  EXPECT_TRUE(std::regex_search(text, std::regex("^def [A-Za-z_][A-Za-z_0-9]*\\("))) << text;
  EXPECT_NE(text.find("\n    "), std::string::npos) << "no indented body: " << text;
}

}  // namespace
}  // namespace kvscope
