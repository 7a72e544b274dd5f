// Real models' chat templates (tests/data/chat_templates) rendered by kvscope
// and by Debian's python3-jinja2 in transformers' environment
// (tools/jinja_ref.py), for varied conversations, with and without the
// generation prompt: the same bytes, or the same refusal. And how a model
// folder's template is found (chat_template.jinja, chat_template.json,
// tokenizer_config.json as a string or a list of named templates).
#include <gtest/gtest.h>

#include "jinja_ref_util.h"

namespace kvscope {
namespace {

using nlohmann::ordered_json;
using testutil::TempDir;

std::string template_text(const std::string& file) {
  return testutil::read_file(std::string(KVSCOPE_SOURCE_DIR) + "/tests/data/chat_templates/" + file);
}

struct Family {
  const char* file;
  const char* bos;
  const char* eos;
};
const Family kFamilies[] = {
    {"smollm2.jinja", "<|im_start|>", "<|im_end|>"},
    {"qwen2.5.jinja", "<|endoftext|>", "<|im_end|>"},
    {"llama-3.2.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"zephyr-tinyllama.jinja", "<s>", "</s>"},
    {"mistral-v0.1.jinja", "<s>", "</s>"},
    {"mistral-nemo.jinja", "<s>", "</s>"},
    {"phi-3.5.jinja", "<s>", "<|endoftext|>"},
    {"deepseek-r1-distill-qwen.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
};

// Conversations: one turn, a system prompt, several turns, awkward text
// (template syntax, role markers, Unicode, surrounding whitespace, empty),
// a reply with reasoning, and one that breaks the user/assistant order.
std::vector<ordered_json> conversations() {
  return {
      ordered_json::parse(R"([{"role": "user", "content": "Hello!"}])"),
      ordered_json::parse(R"([{"role": "system", "content": "You are a pirate."},
                              {"role": "user", "content": "What is 2+2?"}])"),
      ordered_json::parse(R"([{"role": "user", "content": "Name a fruit."},
                              {"role": "assistant", "content": "An apple."},
                              {"role": "user", "content": "Another one?"}])"),
      ordered_json::parse(R"([{"role": "system", "content": "  Answer in one line.  \n"},
                              {"role": "user", "content": "{{ x }} {% if %} <|im_end|> [INST] é 漢字 🙂\n\n"},
                              {"role": "assistant", "content": ""},
                              {"role": "user", "content": "  padded  "},
                              {"role": "assistant", "content": "<think>\nhm\n</think>\n\nFinal."}])"),
      ordered_json::parse(R"([{"role": "assistant", "content": "I speak first."},
                              {"role": "user", "content": "Odd order."}])"),
  };
}

ordered_json tools() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

TEST(ChatTemplate, RealTemplatesRenderAsTransformersDoes) {
  TempDir tmp("chat-template");
  ordered_json cases = ordered_json::array();
  for (const Family& f : kFamilies) {
    for (const ordered_json& messages : conversations()) {
      for (bool gen : {true, false}) {
        ordered_json vars = {{"messages", messages},         {"tools", nullptr},   {"documents", nullptr},
                             {"add_generation_prompt", gen}, {"bos_token", f.bos}, {"eos_token", f.eos}};
        cases.push_back({{"template", template_text(f.file)}, {"vars", vars}, {"file", f.file}});
      }
    }
    // The tools branch, where a template has one.
    ordered_json vars = {{"messages", conversations()[1]},
                         {"tools", tools()},
                         {"add_generation_prompt", true},
                         {"bos_token", f.bos},
                         {"eos_token", f.eos}};
    cases.push_back({{"template", template_text(f.file)}, {"vars", vars}, {"file", f.file}});
  }
  const ordered_json ref = testutil::jinja_reference(cases, tmp);
  ASSERT_EQ(ref.size(), cases.size());
  int rendered = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k]["file"].get<std::string>() + " case " + std::to_string(k) + ": " +
                 cases[k]["vars"]["messages"].dump());
    const ordered_json got = testutil::kvscope_render(cases[k]);
    if (ref[k].contains("error")) {
      ASSERT_TRUE(got.contains("error")) << "Jinja2: " << ref[k]["error"] << "\nkvscope: " << got.dump();
      // The template's own message (raise_exception) reaches the user.
      const std::string want = ref[k]["error"].get<std::string>();
      const std::string msg = want.substr(want.find(": ") + 2);
      EXPECT_NE(got["error"].get<std::string>().find(msg), std::string::npos) << got["error"];
    } else {
      ASSERT_TRUE(got.contains("text")) << got.dump();
      EXPECT_EQ(got["text"], ref[k]["text"]);
      ++rendered;
    }
  }
  EXPECT_GE(rendered, 60);  // most cases render: the comparison is of text, not of two failures
}

class ChatFolder : public ::testing::Test {
 protected:
  TempDir tmp{"chat-folder"};
  void write(const std::string& name, const std::string& text) { testutil::write_file(tmp / name, text); }
  std::string config(const ordered_json& chat_template) {
    return ordered_json{{"bos_token", {{"__type", "AddedToken"}, {"content", "<|im_start|>"}}},
                        {"eos_token", "<|im_end|>"},
                        {"pad_token", nullptr},
                        {"chat_template", chat_template}}
        .dump();
  }
};

TEST_F(ChatFolder, TokenizerConfigTemplateRendersTheConversationAsJinja2Does) {
  write("tokenizer_config.json", config(template_text("smollm2.jinja")));
  const ChatTemplate t = load_chat_template(tmp.path(), std::nullopt);
  EXPECT_EQ(t.origin, tmp / "tokenizer_config.json");
  EXPECT_EQ(t.end_of_turn, std::vector<std::string>{"<|im_end|>"});
  const std::vector<ChatMessage> messages = {{"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
  const std::string got = render_chat(t, messages, true, testutil::fixed_now());
  ordered_json vars = {{"messages", ordered_json::parse(R"([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}])")},
                       {"tools", nullptr},
                       {"documents", nullptr},
                       {"add_generation_prompt", true},
                       {"bos_token", "<|im_start|>"},
                       {"eos_token", "<|im_end|>"}};
  const ordered_json ref = testutil::jinja_reference(
      ordered_json::array({{{"template", template_text("smollm2.jinja")}, {"vars", vars}}}), tmp);
  EXPECT_EQ(got, ref[0]["text"].get<std::string>());
}

TEST_F(ChatFolder, NamedTemplatesUseDefaultAndFilesTakePrecedence) {
  write(
      "tokenizer_config.json",
      config(ordered_json::parse(R"([{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}])")));
  EXPECT_EQ(render_chat(load_chat_template(tmp.path(), std::nullopt), {}, false, testutil::fixed_now()), "D");
  write("chat_template.json", R"({"chat_template": "J"})");
  EXPECT_EQ(render_chat(load_chat_template(tmp.path(), std::nullopt), {}, false, testutil::fixed_now()), "J");
  write("chat_template.jinja", "F\n");  // one trailing newline is dropped, as Jinja2 does
  EXPECT_EQ(render_chat(load_chat_template(tmp.path(), std::nullopt), {}, false, testutil::fixed_now()), "F");
}

TEST_F(ChatFolder, MissingOrUnusableTemplatesNameTheFileAndTheOverride) {
  auto message = [&] {
    try {
      const ChatTemplate t = load_chat_template(tmp.path(), std::nullopt);
      render_chat(t, {{"user", "x"}}, true, testutil::fixed_now());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_NE(message().find("has no chat template"), std::string::npos) << message();
  EXPECT_NE(message().find("--chat-format chatml|llama3|zephyr|mistral"), std::string::npos);
  write("tokenizer_config.json", config(ordered_json::parse(R"([{"name": "tool_use", "template": "T"}])")));
  EXPECT_NE(message().find("no template named \"default\" (it has: tool_use)"), std::string::npos) << message();
  write("tokenizer_config.json", config("{% include 'other.jinja' %}"));
  EXPECT_NE(message().find("tokenizer_config.json: the chat template uses what kvscope"), std::string::npos)
      << message();
  EXPECT_NE(message().find("--chat-format"), std::string::npos);
  write("tokenizer_config.json", R"({"eos_token": 7, "chat_template": "x"})");
  EXPECT_NE(message().find("\"eos_token\" must be a string"), std::string::npos) << message();
  write("tokenizer_config.json", "{\"chat_template\": ");
  EXPECT_NE(message().find("tokenizer_config.json: not valid JSON"), std::string::npos) << message();
  // The override works where the folder's own template does not.
  write("tokenizer_config.json", config("{% include 'other.jinja' %}"));
  const ChatTemplate t = load_chat_template(tmp.path(), ChatFormat::kChatML);
  EXPECT_EQ(render_chat(t, {{"user", "x"}}, true, testutil::fixed_now()),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

// The built-in formats render as the families' own templates do.
TEST(ChatTemplate, BuiltinFormatsMatchTheFamiliesTemplates) {
  TempDir tmp("chat-builtin");
  const std::vector<ChatMessage> messages = {{"system", "Sys."}, {"user", "Hi"}, {"assistant", "Yo"}, {"user", "Q"}};
  const std::vector<ChatMessage> alternating(messages.begin() + 1, messages.end());
  const ordered_json sys_msgs = ordered_json::parse(R"([{"role": "system", "content": "Sys."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Q"}])");
  ordered_json alt_msgs = sys_msgs;
  alt_msgs.erase(0);
  struct Pair {
    ChatFormat format;
    const char* file;
    bool with_system;
  };
  for (const Pair& p :
       {Pair{ChatFormat::kChatML, "smollm2.jinja", true}, Pair{ChatFormat::kZephyr, "zephyr-tinyllama.jinja", true},
        Pair{ChatFormat::kMistral, "mistral-v0.1.jinja", false}}) {
    SCOPED_TRACE(p.file);
    const ChatTemplate t = builtin_chat_template(p.format, {});
    const std::string got = render_chat(t, p.with_system ? messages : alternating, true, testutil::fixed_now());
    ordered_json vars = {{"messages", p.with_system ? sys_msgs : alt_msgs},
                         {"add_generation_prompt", true},
                         {"bos_token", "<s>"},
                         {"eos_token", "</s>"}};
    const ordered_json ref =
        testutil::jinja_reference(ordered_json::array({{{"template", template_text(p.file)}, {"vars", vars}}}), tmp);
    EXPECT_EQ(got, ref[0]["text"].get<std::string>());
  }
  EXPECT_EQ(builtin_chat_template(ChatFormat::kLlama3, {}).end_of_turn, std::vector<std::string>{"<|eot_id|>"});
  EXPECT_EQ(builtin_chat_template(ChatFormat::kMistral, {}).end_of_turn, std::vector<std::string>{"</s>"});
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// `kvscope chat-template` prints exactly the rendering (no newline added),
// and refuses bad messages files naming the file and the message.
TEST_F(ChatFolder, CliPrintsTheRenderingExactly) {
  write("tokenizer_config.json", config(template_text("llama-3.2.jinja")));
  const std::string msgs = R"([{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}])";
  write("m.json", msgs);
  std::string out;
  // stdout and stderr together: on success stderr says nothing.
  ASSERT_EQ(testutil::run_kvscope("chat-template --model " + tmp.path() + " --messages " + (tmp / "m.json"), out,
                                  tmp / "prompt.txt"),
            0)
      << out;
  // Today's date is in the Llama 3.2 header: the reference gets the same clock.
  std::time_t t = std::time(nullptr);
  std::tm now{};
  localtime_r(&t, &now);
  ordered_json vars = {{"messages", ordered_json::parse(msgs)},
                       {"tools", nullptr},
                       {"documents", nullptr},
                       {"add_generation_prompt", true},
                       {"bos_token", "<|im_start|>"},
                       {"eos_token", "<|im_end|>"}};
  const ordered_json ref = testutil::jinja_reference(
      ordered_json::array({{{"template", template_text("llama-3.2.jinja")},
                            {"vars", vars},
                            {"now", {now.tm_year + 1900, now.tm_mon + 1, now.tm_mday, 0, 0, 0}}}}),
      tmp);
  EXPECT_EQ(out, ref[0]["text"].get<std::string>());

  write("bad.json", R"([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}])");
  EXPECT_EQ(
      testutil::run_kvscope("chat-template --model " + tmp.path() + " --messages " + (tmp / "bad.json"), out, tmp), 2);
  EXPECT_NE(out.find("bad.json: message 1: role must be"), std::string::npos) << out;
  write("bad.json", R"({"role": "user"})");
  EXPECT_EQ(
      testutil::run_kvscope("chat-template --model " + tmp.path() + " --messages " + (tmp / "bad.json"), out, tmp), 2);
  EXPECT_NE(out.find("expected a JSON list of messages"), std::string::npos) << out;
  EXPECT_EQ(testutil::run_kvscope(
                "chat-template --model " + tmp.path() + " --messages " + (tmp / "m.json") + " --chat-format vicuna",
                out, tmp),
            2);
}

}  // namespace
}  // namespace kvscope
