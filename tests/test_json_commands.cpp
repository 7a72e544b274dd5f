// The page's window.kvscope.command() objects (app/session/json_commands.h):
// every field is checked against its setting's one range, and a bad one is
// named with its command, what was expected and what came, with nothing
// changed. Ranges come from model/decoding/setting_ranges.h, the text
// scale's and the loaded model's layers and heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "app/session/json_commands.h"
#include "app/session/session.h"
#include "model/core/error.h"

namespace kvscope {
namespace {

using nlohmann::json;

// The message of the UsageError that `c` raises ("" when it raises none).
std::string refusal(const json& c, Session& s) {
  try {
    (void)commands_from_json(c, s);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonCommands, WhatIsNotACommandObjectIsNamed) {
  Session s;
  for (const json& c : {json(nullptr), json(42), json("step"), json::array(), json::object(), json{{"cmd", 42}}})
    EXPECT_NE(refusal(c, s).find("command: expected an object naming its command, such as {\"cmd\": \"step\"}"),
              std::string::npos)
        << c.dump();
  EXPECT_NE(refusal({{"cmd", "jump"}}, s).find("command: unknown cmd \"jump\" (expected prompt, reset,"),
            std::string::npos);
  // A field the command does not take (a typo) is named with the ones it takes.
  EXPECT_NE(refusal({{"cmd", "decoding"}, {"mode", "beam"}, {"beam", 4}}, s)
                .find("decoding: takes no field \"beam\" (it takes \"mode\", \"beams\", \"k\")"),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "step"}, {"n", 2}}, s).find("step: takes no field \"n\" (it takes none)"),
            std::string::npos);
}

// Every command the unknown-command message lists has a reader.
TEST(JsonCommands, EveryListedCommandIsRead) {
  Session s;
  std::string list = refusal({{"cmd", "?"}}, s);
  list = list.substr(list.find("(expected ") + 10);
  list = list.substr(0, list.rfind(')'));
  int n = 0;
  for (size_t at = 0; at < list.size(); ++n) {
    size_t end = std::min(list.find(", ", at), list.find(" or ", at));
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(at, end - at);
    EXPECT_EQ(refusal({{"cmd", name}}, s).find("has no reader"), std::string::npos) << name;
    at = end == list.size() ? end : end + (list.compare(end, 2, ", ") == 0 ? 2 : 4);
  }
  EXPECT_EQ(n, 33) << list;  // (27, and the chat view's six)
}

TEST(JsonCommands, NumbersMustBeWholeAndInTheSettingsRange) {
  Session s;
  const int before = s.ui.max_new;
  const struct {
    json n;
    const char* got;
  } bad[] = {{1.5, "got 1.5"},      {"5", "got \"5\""},
             {true, "got true"},    {nullptr, "got null (NaN and Infinity reach JSON as null)"},
             {0, "got 0"},          {-1, "got -1"},
             {1e308, "got 1e+308"}, {json(1ull << 40), "got 1099511627776"}};
  for (const auto& b : bad) {
    const std::string m = refusal({{"cmd", "max_new"}, {"n", b.n}}, s);
    EXPECT_NE(m.find("max_new: \"n\" must be a whole number in 1..1048576, " + std::string(b.got)), std::string::npos)
        << m;
    EXPECT_EQ(s.ui.max_new, before) << "nothing changes on a refusal";
  }
  EXPECT_NE(refusal({{"cmd", "max_new"}}, s).find("max_new: \"n\" is missing (expected a whole number in 1..1048576)"),
            std::string::npos);
  EXPECT_EQ(refusal({{"cmd", "max_new"}, {"n", 7.0}}, s), "");
  EXPECT_EQ(s.ui.max_new, 7);
  EXPECT_NE(
      refusal({{"cmd", "text_scale"}, {"scale", 3}}, s).find("text_scale: \"scale\" must be a number in 0.75..2.5"),
      std::string::npos);
  EXPECT_NE(refusal({{"cmd", "decoding"}, {"mode", "beam"}, {"beams", 9}}, s)
                .find("decoding: \"beams\" must be a whole number in 1..8, got 9"),
            std::string::npos);
  // A field of another strategy is refused rather than passed over.
  EXPECT_NE(refusal({{"cmd", "decoding"}, {"mode", "sample"}, {"beams", 3}}, s)
                .find("decoding: \"beams\" applies to mode beam only"),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "decoding"}, {"mode", "beam"}, {"k", 3}}, s)
                .find("decoding: \"k\" applies to mode speculative only"),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "scrub_to"}, {"step", -1}}, s).find("scrub_to: \"step\" must be a whole number in 0.."),
            std::string::npos);
}

TEST(JsonCommands, StringsAndChoicesAreNamed) {
  Session s;
  EXPECT_NE(refusal({{"cmd", "prompt"}, {"text", ""}}, s).find("prompt: \"text\" must be some text, got \"\""),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "prompt"}, {"text", 42}}, s).find("prompt: \"text\" must be some text, got 42"),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "camera"}, {"preset", "back"}}, s)
                .find("camera: \"preset\" must be front, top, side or follow, got \"back\""),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "cache"}, {"mode", "none"}}, s)
                .find("cache: \"mode\" must be kv_cache or no_cache, got \"none\""),
            std::string::npos);
  const std::string long_text(1000, 'x');
  const std::string m = refusal({{"cmd", "camera"}, {"preset", long_text}}, s);
  EXPECT_LT(m.size(), 200u) << "a long value is cut in the message";
  const KVLayout layout = s.ui.kv_layout;
  EXPECT_NE(refusal({{"cmd", "kv_layout"}, {"dtype", "q2_k"}}, s)
                .find("kv_layout: \"dtype\" must be f32, f16, q8_0 or q4_0, got \"q2_k\""),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "kv_layout"}, {"dtype", "q8_0"}, {"window", -4}}, s)
                .find("kv_layout: \"window\" must be a whole number in 0.."),
            std::string::npos);
  // The layout's own checks run before a model loads too, naming this command's fields, not the CLI's flags.
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"budget", 5}}, s),
            "kv_layout: \"budget\": needs \"evict\" tova|h2o|snapkv");
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"window", 4}, {"sinks", 4}}, s),
            "kv_layout: \"sinks\": expected 0 <= S < W = 4, got 4");
  // A flag of two words names its field with an underscore.
  const std::string snap = refusal({{"cmd", "kv_layout"}, {"evict", "snapkv"}, {"budget", 4}, {"snap_window", 8}}, s);
  EXPECT_NE(snap.find("\"snap_window\""), std::string::npos) << snap;
  EXPECT_EQ(snap.find("--kv-"), std::string::npos) << snap;
  EXPECT_EQ(s.ui.kv_layout, layout) << "nothing changes on a refusal";
  // One eviction rule at a time, as in the Cache panel: choosing one turns the other off.
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "tova"}, {"budget", 8}}, s), "");
  EXPECT_EQ(s.ui.kv_layout.evict, KVEvict::kTova);
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"window", 16}, {"sinks", 2}}, s), "");
  EXPECT_EQ(s.ui.kv_layout.evict, KVEvict::kNone);
  EXPECT_EQ(s.ui.kv_layout.budget, 0);
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "h2o"}, {"budget", 8}}, s), "");
  EXPECT_EQ(s.ui.kv_layout.window, 0);
  EXPECT_EQ(s.ui.kv_layout.sinks, 0);
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "none"}}, s), "");  // the rule off takes its budget along
  EXPECT_EQ(s.ui.kv_layout.evict, KVEvict::kNone);
  EXPECT_EQ(s.ui.kv_layout.budget, 0);
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "tova"}}, s), "");  // a rule alone starts as the panel's does
  EXPECT_EQ(s.ui.kv_layout.budget, 16);
}

// Layers, heads, checkpoints and layouts are checked against the model loaded.
TEST(JsonCommands, ModelBoundFieldsFollowTheLoadedModel) {
  Session s;
  s.ui.playing = false;
  EXPECT_NE(refusal({{"cmd", "head"}, {"layer", 0}}, s).find("head: no model is loaded yet"), std::string::npos);
  s.load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  const auto t0 = std::chrono::steady_clock::now();
  while (!s.engine.model && s.ui.errors.empty()) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "the model did not load";
    s.update(1e9);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(s.engine.model);
  const Config& c = s.engine.model->config;
  const std::string top_layer = std::to_string(c.n_layer - 1), top_head = std::to_string(c.n_head - 1);
  EXPECT_NE(refusal({{"cmd", "head"}, {"layer", c.n_layer}}, s)
                .find("head: \"layer\" must be a whole number in -1.." + top_layer),
            std::string::npos);
  EXPECT_NE(
      refusal({{"cmd", "head"}, {"head", -2}}, s).find("head: \"head\" must be a whole number in -1.." + top_head),
      std::string::npos);
  EXPECT_EQ(refusal({{"cmd", "head"}, {"layer", c.n_layer - 1}, {"head", -1}}, s), "");
  // max_new reaches as far as the model's context, as the panel's slider does.
  EXPECT_NE(refusal({{"cmd", "max_new"}, {"n", c.n_positions + 1}}, s)
                .find("max_new: \"n\" must be a whole number in 1.." + std::to_string(c.n_positions)),
            std::string::npos);
  // Turning a rule off on a loaded model is accepted (its budget goes with it).
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "tova"}, {"budget", 8}}, s), "");
  EXPECT_EQ(refusal({{"cmd", "kv_layout"}, {"evict", "none"}}, s), "");
  EXPECT_NE(refusal({{"cmd", "kv_layout"}, {"block", c.n_positions + 1}}, s).find("kv_layout: \"block\": "),
            std::string::npos);
  EXPECT_NE(refusal({{"cmd", "kv_layout"}, {"evict", "h2o"}, {"budget", 8}, {"window", 8}}, s)
                .find("one eviction rule at a time"),
            std::string::npos);
  if (s.engine.training) {
    const int n = static_cast<int>(s.engine.training->checkpoints.size());
    EXPECT_NE(refusal({{"cmd", "load_checkpoint"}, {"index", n}}, s)
                  .find("load_checkpoint: \"index\" must be a whole number in 0.." + std::to_string(n - 1)),
              std::string::npos);
  }
}

// kvscope.cli([...]): an array of strings (the CLI's parser reads them).
TEST(JsonCommands, CliArgumentsAreAnArrayOfStrings) {
  auto refused = [](const json& args) {
    try {
      (void)cli_args_from_json(args);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(cli_args_from_json(json::array({"generate", "--prompt", "Hi"})),
            (std::vector<std::string>{"generate", "--prompt", "Hi"}));
  EXPECT_EQ(refused(json::array({"--help"})), "");
  EXPECT_NE(refused("generate").find("kvscope.cli: expected an array of strings"), std::string::npos);
  EXPECT_NE(refused(json::array({"generate", 1})).find("kvscope.cli: element 1 is 1, not a string"), std::string::npos);
  EXPECT_NE(refused(json::array({"tokenize", "--text", std::string("a\0b", 3)}))
                .find("kvscope.cli: element 2 holds a NUL character"),
            std::string::npos);
}

// What the page sends is JSON.stringify's text: a lone surrogate (half a
// character) and nothing at all are named as such.
TEST(JsonCommands, PageJsonIsParsedWithErrorsInWords) {
  auto refused = [](const char* text) {
    try {
      (void)parse_page_json(text, "command");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refused(R"({"cmd": "step"})"), "");
  EXPECT_NE(refused(R"({"cmd": "prompt", "text": "\ud800"})").find("command: a string holds a lone UTF-16 surrogate"),
            std::string::npos);
  EXPECT_NE(refused(nullptr).find("command: nothing was given"), std::string::npos);
  EXPECT_NE(refused("{cmd: step}").find("command: not JSON ("), std::string::npos);
  EXPECT_NE(refused(R"({"cmd": "max_new", "n": 1e400})").find("command: a number beyond a double"), std::string::npos);
  Session s;
  EXPECT_NE(refusal(json{{"cmd", std::string("step\0x", 6)}}, s).find(R"(unknown cmd "step\u0000x")"),
            std::string::npos)
      << "a NUL in a name is shown, not an end to the message";
}

}  // namespace
}  // namespace kvscope
