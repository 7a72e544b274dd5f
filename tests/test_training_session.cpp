// The Training tab's one action, through the window's real controller
// (app/session/session.*, no GL): picking a checkpoint of the loaded model's training
// run loads that folder and regenerates the same prompt with the same sampler
// (seed included), and what the timeline then shows was computed with the
// checkpoint's weights: its prefill logits and attention match the
// independent float64 NumPy forward (tools/numpy_ref.py) over that folder.
// Going back to the final model gives back the very same sampled tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/session/session.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testutil::run_numpy_ref;
using testutil::shell_quote;
using testutil::TempDir;

// A run in miniature: three random checkpoints of one shape (one tokenizer:
// numpy_ref.py learns it from its built-in text) standing for step 0, step
// 100 and the final model, and the training.json export_snapshots.py writes.
struct MiniRun {
  TempDir tmp{"training-session"};
  std::string final_dir = tmp / "run";
  std::string training = tmp / "run-training";
  std::vector<std::string> dirs = {training + "/step-00000", training + "/step-00100", final_dir};
  MiniRun() {
    const char* seeds[] = {"31", "32", "33"};
    for (size_t i = 0; i < dirs.size(); ++i)
      run_numpy_ref(
          "make --out " + shell_quote(dirs[i]) + " --layers 2 --heads 2 --embd 32 --ctx 48 --seed " + seeds[i],
          tmp / "make.log");
    const json rec = {{"model", "run"},
                      {"total_steps", 200},
                      {"curve",
                       {{{"step", 0}, {"tokens", 0}, {"train_loss", nullptr}, {"val_a", 5.8}},
                        {{"step", 100}, {"tokens", 1000}, {"train_loss", 4.0}, {"val_a", 4.1}},
                        {{"step", 200}, {"tokens", 2000}, {"train_loss", 3.0}, {"val_a", 3.2}}}},
                      {"checkpoints",
                       {{{"step", 0}, {"tokens", 0}, {"dir", "step-00000"}, {"val_loss", {{"a", 5.8}}}},
                        {{"step", 100}, {"tokens", 1000}, {"dir", "step-00100"}, {"val_loss", {{"a", 4.1}}}},
                        {{"step", 200}, {"tokens", 2000}, {"dir", "../run"}, {"val_loss", {{"a", 3.2}}}}}}};
    testutil::write_file(training + "/training.json", rec.dump(1));
  }
};

template <class F>
void update_until(Session& s, F done) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 60s) << "the session did not get there";
    s.update(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(1ms);
  }
}

std::vector<int> generated(const Session& s) {
  std::vector<int> out;
  for (const RecordPtr& r : s.engine.records()) out.push_back(r->token);
  return out;
}

// Loads checkpoint `index` as the Training tab does and waits for the whole regeneration.
void pick(Session& s, int index, const std::string& dir) {
  s.execute(cmd::LoadCheckpoint{index}, 0);
  update_until(s, [&] {
    return s.engine.model && s.engine.model->dir == dir && s.engine.stop != StopReason::kNone && s.engine_idle();
  });
}

// The prefill record against the float64 forward of the folder's own weights.
void expect_prefill_from(const StepRecord& r, const std::string& dir, const TempDir& tmp) {
  std::string ids;
  for (int t : r.prompt_tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const std::string out = tmp / "ref.json";
  run_numpy_ref("ref --model " + shell_quote(dir) + " --prompt " + ids + " --steps 0 --out " + shell_quote(out),
                tmp / "ref.log");
  const json ref = testutil::read_json(out)["steps"][0];
  const auto logits = ref["logits"].get<std::vector<double>>();
  ASSERT_EQ(r.logits.size(), logits.size());
  double worst = 0;
  for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::fabs(r.logits[i] - logits[i]));
  EXPECT_LE(worst, 1e-4) << dir << ": the prefill's logits are not this folder's";
  const auto attn = ref["attn"].get<std::vector<double>>();  // (layer, head, rows, T)
  const int T = r.seq_len;
  ASSERT_EQ(attn.size(), static_cast<size_t>(r.n_layer) * r.n_head * T * T);
  worst = 0;
  for (int l = 0; l < r.n_layer; ++l)
    for (int h = 0; h < r.n_head; ++h)
      for (int row = 0; row < T; ++row)
        for (int key = 0; key < T; ++key)
          worst = std::max(worst, std::fabs(r.attention(l, h, row, key) -
                                            attn[((static_cast<size_t>(l) * r.n_head + h) * T + row) * T + key]));
  EXPECT_LE(worst, 1e-4) << dir << ": the prefill's attention is not this folder's";
}

TEST(TrainingSession, PickingACheckpointRegeneratesTheSamePromptWithItsWeights) {
  MiniRun run;
  Session s;
  s.ui.preset = kNumPresets;
  s.ui.custom_prompt = "Once upon a time";
  s.ui.max_new = 8;
  s.ui.fastest = true;
  s.ui.sampler.greedy = false;  // sampled: the same seed must give the same draws again
  s.ui.sampler.temperature = 0.9f;
  s.ui.sampler.seed = 77;
  s.load_model(run.final_dir);
  update_until(s, [&] { return s.engine.model && s.engine.stop != StopReason::kNone && s.engine_idle(); });
  ASSERT_TRUE(s.engine.training) << "the run's record beside the final model";
  EXPECT_EQ(s.engine.checkpoint, 2);
  EXPECT_EQ(checkpoint_note(s.engine), "") << "the final model is the model";
  const std::vector<int> final_tokens = generated(s);
  const std::vector<int> prompt = s.engine.records().at(0)->prompt_tokens;
  const std::vector<float> final_logits = s.engine.records()[0]->logits;

  pick(s, 0, fs::weakly_canonical(run.dirs[0]).string());
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  EXPECT_EQ(s.engine.checkpoint, 0);
  EXPECT_EQ(checkpoint_note(s.engine), "weights from training step 0 of 200");
  ASSERT_TRUE(s.engine.training) << "the record stays while a checkpoint is loaded";
  EXPECT_EQ(s.ui.active_prompt, "Once upon a time");
  const StepRecord& first = *s.engine.records().at(0);
  EXPECT_EQ(first.prompt_tokens, prompt);
  EXPECT_EQ(first.sampler.seed, 77u);
  EXPECT_FLOAT_EQ(first.sampler.temperature, 0.9f);
  EXPECT_NE(first.logits, final_logits);
  expect_prefill_from(first, run.dirs[0], run.tmp);

  pick(s, 1, fs::weakly_canonical(run.dirs[1]).string());
  EXPECT_EQ(s.engine.checkpoint, 1);
  expect_prefill_from(*s.engine.records().at(0), run.dirs[1], run.tmp);

  // Back to the final model: the same tokens as the first time.
  pick(s, 2, fs::weakly_canonical(run.final_dir).string());
  EXPECT_EQ(s.engine.checkpoint, 2);
  EXPECT_EQ(generated(s), final_tokens);
  EXPECT_TRUE(s.ui.errors.empty());
}

TEST(TrainingSession, AModelWithoutARunHasNoRecordAndABrokenOneIsReported) {
  MiniRun run;
  TempDir plain("plain-run");
  run_numpy_ref("make --out " + shell_quote(plain / "gpt2") + " --layers 1 --heads 1 --embd 16 --ctx 16",
                plain / "log");
  Session s;
  s.ui.playing = false;
  s.load_model(plain / "gpt2");
  update_until(s, [&] { return s.engine.model != nullptr; });
  EXPECT_FALSE(s.engine.training);
  s.execute(cmd::LoadCheckpoint{0}, 0);  // nothing to pick: ignored
  EXPECT_FALSE(s.engine.loading_model);

  testutil::write_file(run.training + "/training.json", R"({"checkpoints": [{"step": "zero"}]})");
  s.load_model(run.final_dir);
  update_until(s, [&] { return s.engine.model && s.engine.model->dir != plain / "gpt2"; });
  EXPECT_FALSE(s.engine.training);
  ASSERT_EQ(s.ui.errors.size(), 1u);
  EXPECT_NE(s.ui.errors[0].find("training.json: checkpoints[0].step: expected"), std::string::npos) << s.ui.errors[0];
}

}  // namespace
}  // namespace kvscope
