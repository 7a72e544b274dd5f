// The embedded default model (assets/models/kvscope-tiny): it loads, the C++
// engine reproduces the validation loss the training pipeline wrote into its
// model card and into its training record for every shipped checkpoint (an
// end-to-end check of training, export and the C++ forward), and greedy
// continuations of the app's presets pass the card's quality bars.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "app/lessons/training.h"
#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"

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
  // The default model, the draft and the training checkpoints together.
  EXPECT_LT(bytes, 25u * 1000 * 1000) << "shipped models must stay under 25 MB";
  // The draft model shares the tokenizer (speculative decoding later).
  auto draft = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-draft");
  EXPECT_EQ(slurp(model_dir() + "/vocab.json"), slurp(draft->dir + "/vocab.json"));
  EXPECT_EQ(slurp(model_dir() + "/merges.txt"), slurp(draft->dir + "/merges.txt"));
}

// Mean cross-entropy (nats/token) by the protocol metrics.json spells out:
// documents split on the literal <|endoftext|>, stream [eos] d1 [eos] ...
// dN [eos], windows of n_positions tokens from index 0, each scored from
// position 0.
double validation_loss(const Model& m, const std::string& text, uint64_t* predicted_out) {
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
  if (predicted_out) *predicted_out = predicted;
  return nats / static_cast<double>(predicted);
}

TEST(DefaultModel, ValidationLossMatchesModelCard) {
  const auto metrics = nlohmann::json::parse(slurp(model_dir() + "/metrics.json"));
  for (const char* part : {"stories", "facts", "code", "stdlib", "english", "handwritten_story"}) {
    const std::string text = slurp(model_dir() + "/val/" + part + ".txt");
    ASSERT_FALSE(text.empty()) << part;
    uint64_t predicted = 0;
    const double loss = validation_loss(*tiny(), text, &predicted);
    const auto& card = metrics["parts"][part];
    EXPECT_EQ(predicted, card["predicted_tokens"].get<uint64_t>()) << part;
    EXPECT_NEAR(loss, card["loss"].get<double>(), 0.01) << part << ": C++ engine vs the model card";
  }
}

// The checkpoints of the default model's own training run, read as the
// window's Training tab reads them: every one loads, its validation loss
// computed here matches what the training pipeline recorded, and it falls
// from one checkpoint to the next; the last is the shipped model.
TEST(DefaultModel, ValidationLossFallsAlongTheTrainingCheckpoints) {
  TrainingRecord rec;
  ASSERT_TRUE(find_training_record(model_dir(), rec)) << "no training record beside " << model_dir();
  ASSERT_GE(rec.checkpoints.size(), 4u);
  const auto slice = std::find(rec.slices.begin(), rec.slices.end(), "stories");
  ASSERT_NE(slice, rec.slices.end()) << rec.file << " has no stories validation loss";
  const size_t s = static_cast<size_t>(slice - rec.slices.begin());
  const std::string val = slurp(model_dir() + "/val/stories.txt");
  double prev = 1e9;
  int prev_step = -1;
  for (const TrainingCheckpoint& c : rec.checkpoints) {
    const double loss = validation_loss(*load_model(c.path), val, nullptr);
    EXPECT_NEAR(loss, c.val[s], 0.01) << c.path;
    EXPECT_LT(loss, prev) << "step " << c.step << " is not better than step " << prev_step;
    prev = loss;
    prev_step = c.step;
  }
  EXPECT_EQ(prev_step, rec.total_steps) << "the last checkpoint is the shipped model";
  EXPECT_EQ(fs::canonical(rec.checkpoints.back().path), fs::canonical(model_dir()));
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
  const Tokenizer& tok = tiny()->tokenizer;
  const std::string text = tok.decode(out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("named ([A-Z][a-z]+)"))) << text;
  const std::string name = m[1];
  const size_t first = static_cast<size_t>(m.position(1));
  ASSERT_NE(text.find(name, first + name.size()), std::string::npos) << "the name is never reused: " << text;

  // Names are made up syllable by syllable, so most take several tokens. At a
  // step that writes one of the name's tokens again (not its first
  // occurrence), some head puts most of its weight on that token's earlier
  // occurrence: the copy pattern for the name's first token, the induction
  // pattern for the later ones, both drawn as the strongest beam in the app.
  const std::vector<int> name_ids = tok.encode(" " + name);
  std::vector<int> seq = recs.front()->prompt_tokens;
  const size_t n_prompt = seq.size();
  for (const auto& r : recs) seq.push_back(r->token);
  float best = 0;
  int events = 0;
  for (size_t s = 0; s < recs.size(); ++s) {
    const StepRecord& r = *recs[s];
    const size_t at = n_prompt + s;  // position of the token this step wrote
    if (std::find(name_ids.begin(), name_ids.end(), r.token) == name_ids.end()) continue;
    for (int pos = 0; pos + 1 < r.seq_len && static_cast<size_t>(pos) < at; ++pos) {
      if (seq[static_cast<size_t>(pos)] != r.token) continue;
      ++events;
      for (int l = 0; l < r.n_layer; ++l)
        for (int h = 0; h < r.n_head; ++h) best = std::max(best, r.attention(l, h, r.n_rows - 1, pos));
    }
  }
  ASSERT_GT(events, 0) << text;
  EXPECT_GT(best, 0.5f) << "no head attends back to an earlier token of \"" << name << "\": " << text;
}

// Hand-written prompts introduce names that never occur in the training data
// (tools/train/evaluate.py --check-unseen); at least 80 % of the greedy
// continuations must use the name again, which only copying can do.
TEST(DefaultModel, ReusesNamesItNeverSawInTraining) {
  const auto prompts =
      nlohmann::json::parse(slurp(std::string(KVSCOPE_SOURCE_DIR) + "/tools/train/heldout/prompts.json"));
  int hits = 0, total = 0;
  std::string misses;
  for (const auto& p : prompts.at("names")) {
    const std::string out = tiny()->tokenizer.decode(greedy(p.at("prompt").get<std::string>(), 60));
    const std::string name = p.at("name");
    const bool hit = std::regex_search(out, std::regex("\\b" + name + "\\b"));
    hits += hit ? 1 : 0;
    if (!hit) misses += "\n  " + name + ": " + out;
    ++total;
  }
  ASSERT_EQ(total, 25);
  EXPECT_GE(hits * 10, total * 8) << hits << " of " << total << " unseen names reused; misses:" << misses;
}

TEST(DefaultModel, CodePresetLooksLikePython) {
  const std::string text = "def " + tiny()->tokenizer.decode(greedy("def ", 40));
  EXPECT_TRUE(std::regex_search(text, std::regex("^def [A-Za-z_][A-Za-z_0-9]*\\("))) << text;
  EXPECT_NE(text.find("\n    "), std::string::npos) << "no indented body: " << text;
}

}  // namespace
}  // namespace kvscope
