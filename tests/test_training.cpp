// The training record (app/lessons/training.*): the training.json that
// tools/train/export_snapshots.py writes, read and checked (a bad file names
// the file and the field), found next to the run's final model and next to
// each checkpoint folder, and laid out as the Training tab's plot. Expected
// values are worked out by hand from the records written here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/lessons/training.h"
#include "model/core/error.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testutil::TempDir;

// A record shaped like export_snapshots.py's: step 0 without a train loss,
// the restart step logged twice, the final model listed last as "../run".
json sample_record() {
  return json::parse(R"({
    "model": "run", "total_steps": 400, "batch_tokens": 6144, "note": "nats/token",
    "curve": [
      {"step": 0, "tokens": 0, "train_loss": null, "val_stories": 8.0, "val_code": 8.2, "val_heldout": 8.1},
      {"step": 100, "tokens": 614400, "train_loss": 5.0, "val_stories": 4.0, "val_code": 3.0},
      {"step": 200, "tokens": 1228800, "train_loss": 3.9, "val_stories": 3.5, "val_code": 2.9},
      {"step": 200, "tokens": 1228800, "train_loss": 4.0, "val_stories": 3.2, "val_code": 2.8},
      {"step": 400, "tokens": 2457600, "train_loss": 3.0, "val_stories": 2.2, "val_code": 1.8}
    ],
    "checkpoints": [
      {"step": 0, "tokens": 0, "dir": "step-00000", "val_loss": {"stories": 8.1, "code": 8.3}},
      {"step": 100, "tokens": 614400, "dir": "step-00100", "val_loss": {"stories": 4.1, "code": 3.1}},
      {"step": 400, "tokens": 2457600, "dir": "../run", "val_loss": {"stories": 2.3, "code": 1.9}}
    ]})");
}

// models/run (the final model) and models/run-training/{step-00000, step-00100, training.json}.
struct RecordTree {
  TempDir tmp{"training"};
  std::string models = tmp / "models";
  std::string final_dir = models + "/run";
  std::string training = models + "/run-training";
  std::string file = training + "/training.json";
  explicit RecordTree(const json& rec = sample_record()) {
    for (const std::string& d : {final_dir, training + "/step-00000", training + "/step-00100"}) {
      fs::create_directories(d);
      testutil::write_file(d + "/config.json", "{}");
    }
    testutil::write_file(file, rec.dump(1));
  }
};

std::string canonical(const std::string& p) {
  return fs::weakly_canonical(p).string();
}

TEST(TrainingRecord, ReadsTheExportersRecord) {
  RecordTree t;
  const TrainingRecord r = parse_training_record(testutil::read_file(t.file), t.file);
  EXPECT_EQ(r.model, "run");
  EXPECT_EQ(r.total_steps, 400);
  EXPECT_EQ(r.batch_tokens, 6144);
  ASSERT_EQ(r.slices, (std::vector<std::string>{"code", "stories"}));  // the checkpoints' slices
  ASSERT_EQ(r.curve.size(), 4u) << "the repeated step 200 keeps one row, the later one";
  EXPECT_TRUE(std::isnan(r.curve[0].train_loss));
  EXPECT_DOUBLE_EQ(r.curve[2].train_loss, 4.0);
  EXPECT_DOUBLE_EQ(r.curve[2].val[1], 3.2);
  EXPECT_DOUBLE_EQ(r.curve[0].val[0], 8.2);
  ASSERT_EQ(r.checkpoints.size(), 3u);
  EXPECT_EQ(r.checkpoints[1].step, 100);
  EXPECT_EQ(r.checkpoints[1].tokens, 614400);
  EXPECT_EQ(r.checkpoints[1].path, canonical(t.training + "/step-00100"));
  EXPECT_EQ(r.checkpoints[2].path, canonical(t.final_dir));
  EXPECT_DOUBLE_EQ(r.checkpoints[2].val[0], 1.9);
  EXPECT_DOUBLE_EQ(validation_loss(r.checkpoints[2].val, -1), (1.9 + 2.3) / 2);
  EXPECT_DOUBLE_EQ(validation_loss(r.checkpoints[2].val, 1), 2.3);
}

TEST(TrainingRecord, IsFoundFromTheFinalModelAndFromEachCheckpoint) {
  RecordTree t;
  TrainingRecord r;
  ASSERT_TRUE(find_training_record(t.final_dir, r));
  EXPECT_EQ(r.file, canonical(t.file));
  EXPECT_EQ(checkpoint_index(r, t.final_dir), 2);
  ASSERT_TRUE(find_training_record(t.training + "/step-00100/", r));  // (a trailing slash too)
  EXPECT_EQ(checkpoint_index(r, t.training + "/step-00100/"), 1);
  EXPECT_EQ(checkpoint_index(r, t.training + "/../run-training/step-00000"), 0);

  // An ordinary model folder has none; a folder beside a record that does not list it neither.
  TempDir other("plain-model");
  fs::create_directories(other / "gpt2");
  EXPECT_FALSE(find_training_record(other / "gpt2", r));
  fs::create_directories(t.training + "/unlisted");
  EXPECT_FALSE(find_training_record(t.training + "/unlisted", r));
}

// Each broken record: what is changed, and the field the error must name.
TEST(TrainingRecord, ABadRecordNamesTheFileAndTheField) {
  struct Case {
    const char* field;
    std::function<void(json&)> edit;
  };
  const std::vector<Case> cases = {
      {"checkpoints", [](json& j) { j.erase("checkpoints"); }},
      {"checkpoints", [](json& j) { j["checkpoints"] = json::array(); }},
      {"checkpoints[1].dir", [](json& j) { j["checkpoints"][1]["dir"] = "/etc"; }},
      {"checkpoints[1].dir", [](json& j) { j["checkpoints"][1]["dir"] = "step-99999"; }},
      {"checkpoints[1].dir", [](json& j) { j["checkpoints"][1]["dir"] = 7; }},
      {"checkpoints[2].step", [](json& j) { j["checkpoints"][2]["step"] = 50; }},
      {"checkpoints[0].tokens", [](json& j) { j["checkpoints"][0]["tokens"] = -1; }},
      {"checkpoints[0].val_loss", [](json& j) { j["checkpoints"][0]["val_loss"] = "low"; }},
      {"checkpoints[1].val_loss.code", [](json& j) { j["checkpoints"][1]["val_loss"]["code"] = -2.0; }},
      {"curve", [](json& j) { j["curve"] = json::object(); }},
      {"curve[3].step", [](json& j) { j["curve"][3]["step"] = 150; }},
      {"curve[1].train_loss", [](json& j) { j["curve"][1]["train_loss"] = "5"; }},
      {"curve[4].val_stories", [](json& j) { j["curve"][4]["val_stories"] = 1e300; }},
      {"total_steps", [](json& j) { j["total_steps"] = 100; }},
      {"top level", [](json& j) { j = json::array(); }},
  };
  for (const Case& c : cases) {
    json rec = sample_record();
    c.edit(rec);
    RecordTree t(rec);
    try {
      TrainingRecord r;
      find_training_record(t.final_dir, r);
      ADD_FAILURE() << "accepted a record with a bad " << c.field;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(canonical(t.file)), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(": ") + c.field + ": expected"), std::string::npos) << msg;
    }
  }
  RecordTree t;
  testutil::write_file(t.file, "{\"curve\": [");
  EXPECT_THROW(parse_training_record(testutil::read_file(t.file), t.file), Error);
  fs::remove(t.file);
  fs::create_directories(t.file);  // a folder where the file should be
  TrainingRecord r;
  EXPECT_THROW(find_training_record(t.final_dir, r), Error);
}

TEST(TrainingPlot, StepsRunRightAndLossRunsUp) {
  RecordTree t;
  const TrainingRecord r = parse_training_record(testutil::read_file(t.file), t.file);
  const PlotRect rect{10, 20, 400, 100};
  // Highest value shown: the step-0 checkpoint's code loss 8.3 (above the reference 5) -> top = 8.3 * 1.08.
  const TrainingPlot code = layout_training_plot(r, 0, rect, 5.0);
  EXPECT_EQ(code.step_hi, 400);
  EXPECT_DOUBLE_EQ(code.y_lo, 0.0);
  EXPECT_NEAR(code.y_hi, 8.3 * 1.08, 1e-12) << "the step-0 checkpoint's 8.3 is the highest";
  auto y_of = [&](double loss) { return 20 + 100 * static_cast<float>((code.y_hi - loss) / code.y_hi); };
  ASSERT_EQ(code.train.size(), 3u) << "step 0 has no train loss";
  EXPECT_FLOAT_EQ(code.train[0].x, 10 + 400 * 100 / 400.0f);
  EXPECT_FLOAT_EQ(code.train[0].y, y_of(5.0));
  ASSERT_EQ(code.val.size(), 4u);
  EXPECT_FLOAT_EQ(code.val[0].x, 10);
  EXPECT_FLOAT_EQ(code.val[0].y, y_of(8.2));
  EXPECT_FLOAT_EQ(code.val[3].x, 410);
  EXPECT_FLOAT_EQ(code.val[3].y, y_of(1.8));
  ASSERT_EQ(code.marks.size(), 3u);
  EXPECT_FLOAT_EQ(code.marks[1].x, 110);
  EXPECT_FLOAT_EQ(code.marks[1].y, y_of(3.1));
  // The mean over the slices; a reference above every loss sets the top.
  const TrainingPlot mean = layout_training_plot(r, -1, rect, 9.0);
  EXPECT_NEAR(mean.y_hi, 9.0 * 1.08, 1e-12);
  EXPECT_FLOAT_EQ(mean.val[1].y, 20 + 100 * static_cast<float>((mean.y_hi - 3.5) / mean.y_hi));
  EXPECT_FLOAT_EQ(mean.marks[2].y, 20 + 100 * static_cast<float>((mean.y_hi - 2.1) / mean.y_hi));
  // Picking: the nearest mark within reach.
  EXPECT_EQ(pick_checkpoint(code, 104, 12), 1);
  EXPECT_EQ(pick_checkpoint(code, 20, 12), 0);
  EXPECT_EQ(pick_checkpoint(code, 400, 12), 2);
  EXPECT_EQ(pick_checkpoint(code, 250, 12), -1);
}

TEST(AttentionSpread, EntropyOfTheNewestRowAveragedOverHeads) {
  // 1 layer, 2 heads, 2 query rows (a prefill) over 4 keys; only the newest row counts.
  StepRecord r;
  r.n_layer = 1;
  r.n_head = 2;
  r.n_rows = 2;
  r.seq_len = 4;
  r.attn = {
      0.5f, 0.5f, 0.0f, 0.0f, 0.25f, 0.25f, 0.25f, 0.25f,  // head 0: rows 0, 1 (uniform: 2 bits)
      1.0f, 0.0f, 0.0f, 0.0f, 0.0f,  0.0f,  1.0f,  0.0f,   // head 1: one key: 0 bits
  };
  const AttentionSpread s = attention_spread(r);
  EXPECT_EQ(s.keys, 4);
  EXPECT_DOUBLE_EQ(s.uniform_bits, 2.0);
  EXPECT_DOUBLE_EQ(s.mean_bits, 1.0);
  EXPECT_DOUBLE_EQ(s.mean_top, (0.25 + 1.0) / 2);
  // Half on one key, a quarter on two others: 0.5*1 + 2*0.25*2 = 1.5 bits.
  r.attn[12] = 0.5f;
  r.attn[13] = 0.25f;
  r.attn[14] = 0.25f;
  EXPECT_DOUBLE_EQ(attention_spread(r).mean_bits, (2.0 + 1.5) / 2);
  r.attn.pop_back();  // a record whose buffer does not match its sizes: no numbers from it
  EXPECT_DOUBLE_EQ(attention_spread(r).mean_bits, 0.0);
}

// The shipped default model's own record, when the assets carry one.
TEST(TrainingRecord, TheShippedRecordReadsAndListsTheDefaultModelLast) {
  const std::string model = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny";
  TrainingRecord r;
  ASSERT_TRUE(find_training_record(model, r)) << "no training record beside " << model;
  ASSERT_GE(r.checkpoints.size(), 2u);
  EXPECT_EQ(checkpoint_index(r, model), static_cast<int>(r.checkpoints.size()) - 1);
  EXPECT_EQ(r.checkpoints.front().step, 0);
  for (const TrainingCheckpoint& c : r.checkpoints) EXPECT_TRUE(fs::exists(c.path + "/model.safetensors")) << c.path;
}

}  // namespace
}  // namespace kvscope
