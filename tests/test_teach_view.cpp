// Saved views: round trip and errors that name the file and the field.
#include <gtest/gtest.h>

#include <fstream>

#include "app/session/settings.h"
#include "model/core/file_io.h"
#include "model/decoding/sampler_json.h"
#include "model/decoding/setting_ranges.h"
#include "teach_test_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace teachtest;

TEST(SavedViewFile, RoundTrip) {
  testutil::TempDir tmp("teach-view");
  SavedView v;
  v.camera.target[0] = 12.5f;
  v.camera.target[1] = -1.25f;
  v.camera.target[2] = 0.5f;
  v.camera.distance = 33.0f;
  v.camera.yaw = -0.75f;
  v.camera.pitch = 0.5f;
  v.camera.fov_y = 0.9f;
  v.camera.preset = "top";
  v.step = 17;
  v.prompt = "The capital of France is \"Paris\"\n\xc3\xa9";
  v.model = "/models/gpt2";
  v.max_new = 80;
  v.cache = CacheMode::kNoCache;
  v.sampler = sampled(18446744073709551557ull, 0.7f, 40, 0.9f, 1.3f);
  v.layer = 2;
  v.head = -1;
  v.min_weight = 0.05f;
  v.text_scale = 1.5f;
  v.presentation = true;
  v.predict = true;
  const std::string path = tmp / "lesson.json";
  save_view(v, path);
  const SavedView w = load_view(path);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(w.camera.target[i], v.camera.target[i]);
  EXPECT_EQ(w.camera.distance, v.camera.distance);
  EXPECT_EQ(w.camera.yaw, v.camera.yaw);
  EXPECT_EQ(w.camera.pitch, v.camera.pitch);
  EXPECT_EQ(w.camera.fov_y, v.camera.fov_y);
  EXPECT_EQ(w.camera.preset, "top");
  EXPECT_EQ(w.step, 17);
  EXPECT_EQ(w.prompt, v.prompt);
  EXPECT_EQ(w.model, v.model);
  EXPECT_EQ(w.max_new, 80);
  EXPECT_EQ(w.cache, CacheMode::kNoCache);
  EXPECT_EQ(w.sampler.greedy, false);
  EXPECT_EQ(w.sampler.temperature, 0.7f);
  EXPECT_EQ(w.sampler.top_k, 40);
  EXPECT_EQ(w.sampler.top_p, 0.9f);
  EXPECT_EQ(w.sampler.repetition_penalty, 1.3f);
  EXPECT_EQ(w.sampler.seed, 18446744073709551557ull);
  EXPECT_EQ(w.layer, 2);
  EXPECT_EQ(w.head, -1);
  EXPECT_EQ(w.min_weight, 0.05f);
  EXPECT_EQ(w.text_scale, 1.5f);
  EXPECT_TRUE(w.presentation);
  EXPECT_TRUE(w.predict);
  // Plain floats on disk, readable by anyone.
  const json j = testutil::read_json(path);
  EXPECT_EQ(j.at("camera").at("target").size(), 3u);
  EXPECT_EQ(j.at("step"), 17);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A minimal file takes defaults.
  const SavedView d = view_from_json(R"({"kvscope_view": 1})", "min.json");
  EXPECT_EQ(d.step, 0);
  EXPECT_EQ(d.cache, CacheMode::kKV);
  EXPECT_TRUE(d.sampler.greedy);
}

TEST(SavedViewFile, ErrorsNameFileAndField) {
  testutil::TempDir tmp("teach-view-bad");
  expect_error([&] { load_view(tmp / "missing.json"); }, {"missing.json", "cannot open"}, "missing");
  expect_error([&] { save_view(SavedView{}, tmp / "no/such/dir/v.json"); }, {"no/such/dir/v.json", "cannot write"},
               "bad dir");
  struct Bad {
    const char* json;
    std::vector<std::string> needles;
  };
  const std::vector<Bad> bad = {
      {"{", {"v.json", "not valid JSON"}},
      {"[]", {"v.json", "object"}},
      {R"({"step": 3})", {"v.json", "kvscope_view"}},
      {R"({"kvscope_view": 2})", {"v.json", "kvscope_view", "not supported"}},
      {R"({"kvscope_view": 1, "camera": {"yaw": "left"}})", {"v.json", "camera.yaw", "number"}},
      {R"({"kvscope_view": 1, "camera": {"target": [1, 2]}})", {"v.json", "camera.target", "3 numbers"}},
      {R"({"kvscope_view": 1, "camera": {"distance": "far"}})", {"v.json", "camera.distance", "number"}},
      {R"({"kvscope_view": 1, "camera": {"target": [0, 1e39, 0]}})", {"v.json", "camera.target[1]", "number"}},
      {R"({"kvscope_view": 1, "camera": {"preset": "iso"}})", {"v.json", "camera.preset", "iso"}},
      {R"({"kvscope_view": 1, "camera": 5})", {"v.json", "camera", "object"}},
      {R"({"kvscope_view": 1, "step": -2})", {"v.json", "step", "out of range"}},
      {R"({"kvscope_view": 1, "step": 1.5})", {"v.json", "step", "integer"}},
      {R"({"kvscope_view": 1, "cache": "maybe"})", {"v.json", "cache", "kv_cache"}},
      {R"({"kvscope_view": 1, "sampler": {"top_p": 0}})", {"v.json", "sampler.top_p", "out of range"}},
      {R"({"kvscope_view": 1, "sampler": {"temperature": 0}})", {"v.json", "sampler.temperature"}},
      {R"({"kvscope_view": 1, "sampler": {"seed": -1}})", {"v.json", "sampler.seed"}},
      {R"({"kvscope_view": 1, "sampler": {"greedy": 1}})", {"v.json", "sampler.greedy", "true or false"}},
      {R"({"kvscope_view": 1, "attention": {"layer": 1.5}})", {"v.json", "attention.layer", "integer"}},
      {R"({"kvscope_view": 1, "attention": 4})", {"v.json", "attention", "object"}},
      {R"({"kvscope_view": 1, "text_scale": "big"})", {"v.json", "text_scale", "number"}},
      {R"({"kvscope_view": 1, "presentation": "yes"})", {"v.json", "presentation"}},
  };
  for (const Bad& b : bad) expect_error([&] { view_from_json(b.json, "v.json"); }, b.needles, b.json);
}

// The sampler has one JSON form: a saved view and the settings file accept
// exactly the values the CLI's flags accept (setting_ranges.h), at the edges.
TEST(SamplerJson, SavedViewsAndSettingsTakeTheFlagsRanges) {
  struct Edge {
    const char* field;
    json ok, bad;
  };
  const Edge edges[] = {
      {"temperature", setting::kTemperature.lo, setting::kTemperature.lo / 2},
      {"temperature", setting::kTemperature.hi, setting::kTemperature.hi * 2},
      {"top_p", setting::kTopP.hi, setting::kTopP.lo},  // (0, 1]: 0 itself is out
      {"repetition_penalty", setting::kRepetitionPenalty.lo, setting::kRepetitionPenalty.lo / 2},
      {"repetition_penalty", setting::kRepetitionPenalty.hi, setting::kRepetitionPenalty.hi * 2},
      {"top_k", setting::kTopK.hi, setting::kTopK.hi + 1},
  };
  testutil::TempDir tmp("sampler-json");
  const std::string path = tmp.path() + "/settings.json";
  for (const Edge& e : edges) {
    const auto view = [&](const json& x) { return json{{"kvscope_view", 1}, {"sampler", {{e.field, x}}}}.dump(); };
    EXPECT_NO_THROW(view_from_json(view(e.ok), "v.json")) << e.field << " " << e.ok;
    expect_error([&] { view_from_json(view(e.bad), "v.json"); },
                 {"v.json", std::string("sampler.") + e.field, "out of range"}, view(e.bad));
    { std::ofstream(path) << json{{"sampler", {{e.field, e.bad}, {"seed", 5}}}}.dump(); }
    UiState ui;
    WindowSettings win;
    std::string err;
    EXPECT_FALSE(load_settings(path, ui, win, err)) << e.field;
    EXPECT_NE(err.find(std::string("sampler.") + e.field), std::string::npos) << err;
    EXPECT_EQ(ui.sampler.seed, UiState().sampler.seed) << "a sampler that cannot be read is not half taken";
  }
  // Written and read back through the same form.
  UiState ui;
  WindowSettings win;
  ui.sampler = sampled(7, 0.25f, 3, 0.5f, 1.5f);
  std::string err;
  ASSERT_TRUE(save_settings(path, ui, win, err)) << err;
  const json saved = json::parse(read_regular_file(path, "settings"));
  EXPECT_EQ(saved.at("sampler"), sampler_to_json(ui.sampler));
  UiState back;
  ASSERT_TRUE(load_settings(path, back, win, err)) << err;
  EXPECT_EQ(back.sampler.seed, 7u);
  EXPECT_FLOAT_EQ(back.sampler.top_p, 0.5f);
  EXPECT_FALSE(back.sampler.greedy);
}

}  // namespace
}  // namespace kvscope
