// Values nested far deeper than any kvscope format uses, in the places that
// quote a bad value in their error message: every reader refuses them with a
// bounded message instead of recursing once per level (json::dump) until the
// stack runs out.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "app/session/json_commands.h"
#include "app/session/saved_view.h"
#include "app/session/settings.h"
#include "model/arch/config.h"
#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/decoding/sampler_json.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using nlohmann::json;

constexpr int kDeep = 120000;

std::string deep_text(int levels = kDeep) {
  return std::string(levels, '[') + "1" + std::string(levels, ']');
}

// Built in place: copying a value this deep would itself recurse per level.
json deep_value(int levels = kDeep) {
  json root = json::array();
  json* cur = &root;
  for (int i = 1; i < levels; ++i) {
    cur->push_back(json::array());
    cur = &cur->back();
  }
  cur->push_back(1);
  return root;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(DeepJson, QuoteIsBoundedInDepthAndLength) {
  const std::string q = json_quote(deep_value());
  EXPECT_LE(q.size(), 60u);
  EXPECT_EQ(q.substr(0, 4), "[[[[");
  EXPECT_NE(q.find("[...]"), std::string::npos) << q;
  EXPECT_EQ(json_quote(json(std::string(1000, 'x')), 20), "\"" + std::string(16, 'x') + "...");
  EXPECT_EQ(json_quote(json{{"a", 1}, {"b", "\xc3\xa9"}}), "{\"a\":1,\"b\":\"\\u00e9\"}");
  EXPECT_EQ(json_quote(json(1e23)), "1e+23");
  EXPECT_EQ(json_quote(json(2.0)), "2.0");
  EXPECT_EQ(json_quote(json(0.1)), "0.1");
}

TEST(DeepJson, BoundedParseRefusesDepthNamingTheFile) {
  const std::string m = message_of([] { parse_json_bounded(deep_text(), kJsonMaxDepth, "f.json"); });
  EXPECT_EQ(m.rfind("f.json: nested deeper than 16 levels", 0), 0u) << m;
  EXPECT_EQ(parse_json_bounded(deep_text(kJsonMaxDepth), kJsonMaxDepth, "f.json").size(), 1u);
}

TEST(DeepJson, SettingsFileWithADeepValueFallsBackToDefaults) {
  UiState ui;
  WindowSettings win;
  std::string error;
  EXPECT_FALSE(settings_from_json("{\"sampler\": " + deep_text() + "}", "s.json", ui, win, error));
  EXPECT_NE(error.find("s.json"), std::string::npos) << error;
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
}

TEST(DeepJson, SavedViewWithADeepCameraIsRefused) {
  const std::string m = message_of([] { view_from_json("{\"camera\": " + deep_text() + "}", "v.json"); });
  EXPECT_EQ(m.rfind("v.json: nested deeper", 0), 0u) << m;
}

TEST(DeepJson, PageCommandsWithADeepValueAreAUsageError) {
  EXPECT_THROW(parse_page_json(("{\"cmd\": " + deep_text() + "}").c_str(), "kvscope.command"), UsageError);
}

// Readers of values already parsed (the settings' sampler object, a config
// parsed without a depth limit) quote them bounded.
TEST(DeepJson, ReadersOfParsedValuesQuoteThemBounded) {
  json obj = json::object();
  obj["top_k"] = deep_value();
  SamplerSettings s;
  std::string m = message_of([&] { sampler_fields_from_json(obj, "sampler.", s); });
  EXPECT_NE(m.find("top_k"), std::string::npos) << m;
  EXPECT_LT(m.size(), 300u);
  m = message_of([] { parse_config("{\"n_layer\": " + deep_text() + "}", "config.json"); });
  EXPECT_NE(m.find("config.json"), std::string::npos) << m.substr(0, 300);
  EXPECT_LT(m.size(), 300u);
}

TEST(DeepJson, ServeRefusesADeepRequestNamingTheLine) {
  testutil::TempDir tmp("deep-json");
  const std::string file = tmp / "reqs.jsonl";
  testutil::write_file(
      file, "{\"id\": \"a\", \"prompt\": \"x\", \"max_new\": 4}\n{\"id\": \"b\", \"prompt\": \"x\", \"max_new\": " +
                deep_text() + "}\n");
  std::string out;
  EXPECT_EQ(testutil::run_kvscope("serve --requests " + file, out, tmp), 2) << out.substr(0, 300);
  EXPECT_NE(out.find("reqs.jsonl:2: nested deeper"), std::string::npos) << out.substr(0, 300);
}

}  // namespace
}  // namespace kvscope
