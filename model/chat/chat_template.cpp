// Finding, reading and rendering a model's chat template (chat_template.h).
// transformers looks for chat_template.jinja, then chat_template.json, then
// tokenizer_config.json's "chat_template" (a string, or a list of {name,
// template} of which "default" is used), and renders with the special
// tokens as variables plus raise_exception and strftime_now.
#include "model/chat/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "model/arch/gguf_model.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/chat/jinja.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"

namespace kvscope {

namespace {

using ojson = nlohmann::ordered_json;

// The built-in formats, as the families' own templates write them (ChatML
// as SmolLM2's without its default system line, Llama 3's 8B-Instruct,
// TinyLlama's Zephyr, Mistral-7B-Instruct-v0.1's).
const char* builtin_source(ChatFormat f) {
  switch (f) {
    case ChatFormat::kChatML:
      return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
             "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
             "{% endif %}";
    case ChatFormat::kLlama3:
      return "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
             "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
             "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
             "{{ content }}{% endfor %}{% if add_generation_prompt %}"
             "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
    case ChatFormat::kZephyr:
      return "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
             "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + "
             "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  "
             "+ message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n"
             "{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
    case ChatFormat::kMistral:
      return "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == "
             "0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
             "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
             "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}"
             "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
  }
  return "";
}

std::string override_hint() {
  return std::string("; pass --chat-format ") + chat_format_names() + " to use a built-in format";
}

// tokenizer_config.json's special tokens: a string, or an AddedToken object
// {"content": ...}; null or absent: not a variable.
std::vector<std::pair<std::string, std::string>> special_tokens_of(const ojson& cfg, const std::string& origin) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!cfg.contains(name) || cfg[name].is_null()) continue;
    const ojson& v = cfg[name];
    if (v.is_string()) {
      out.emplace_back(name, v.get<std::string>());
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      out.emplace_back(name, v["content"].get<std::string>());
    } else {
      throw Error(origin + ": \"" + name + "\" must be a string or an object with a \"content\" string");
    }
  }
  return out;
}

ojson read_json_file(const std::string& path, const std::string& expected) {
  const std::string text = read_regular_file(path, expected);
  try {
    parse_json_bounded(text, kJsonMaxDepth, path);
    return ojson::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON (" + e.what() + ")");
  }
}

// tokenizer_config.json's "chat_template": a string, or [{name, template}] ("default").
std::string template_field(const ojson& v, const std::string& origin) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw Error(origin + ": \"chat_template\" must be a string or a list of {name, template}");
  std::string names;
  for (const ojson& e : v) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
        !e["template"].is_string()) {
      throw Error(origin + ": each entry of \"chat_template\" must be {\"name\": string, \"template\": string}");
    }
    if (e["name"] == "default") return e["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
  }
  throw Error(origin + ": \"chat_template\" lists no template named \"default\" (it has: " + names + ")");
}

std::vector<std::string> end_of_turn_texts(const std::string& source,
                                           const std::vector<std::pair<std::string, std::string>>& special) {
  std::vector<std::string> out;
  for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|end|>", "<|end_of_turn|>", "<end_of_turn>"}) {
    if (source.find(marker) != std::string::npos) out.emplace_back(marker);
  }
  for (const auto& [name, text] : special) {
    if (name == "eos_token" && !text.empty() && std::find(out.begin(), out.end(), text) == out.end()) {
      out.push_back(text);
    }
  }
  return out;
}

}  // namespace

const char* to_string(ChatFormat f) {
  static const char* const names[] = {"chatml", "llama3", "zephyr", "mistral"};
  return names[static_cast<int>(f)];
}

const char* chat_format_names() {
  return "chatml|llama3|zephyr|mistral";
}

std::optional<ChatFormat> chat_format_of(const std::string& name) {
  for (ChatFormat f : {ChatFormat::kChatML, ChatFormat::kLlama3, ChatFormat::kZephyr, ChatFormat::kMistral}) {
    if (name == to_string(f)) return f;
  }
  return std::nullopt;
}

ChatTemplate chat_template_from_text(const std::string& source, const std::string& origin,
                                     std::vector<std::pair<std::string, std::string>> special_tokens) {
  ChatTemplate t;
  t.origin = origin;
  t.source = source;
  try {
    t.parsed = jinja::parse(source);
  } catch (const jinja::Unsupported& e) {
    throw Error(origin + ": the chat template uses what kvscope's template interpreter does not implement (" +
                e.what() + ")" + override_hint());
  }
  t.end_of_turn = end_of_turn_texts(source, special_tokens);
  t.special_tokens = std::move(special_tokens);
  return t;
}

ChatTemplate builtin_chat_template(ChatFormat format, std::vector<std::pair<std::string, std::string>> special) {
  const auto has = [&](const char* name) {
    return std::any_of(special.begin(), special.end(), [&](const auto& s) { return s.first == name; });
  };
  // The formats' own token spellings where the model names none.
  if (!has("eos_token") && (format == ChatFormat::kZephyr || format == ChatFormat::kMistral)) {
    special.emplace_back("eos_token", "</s>");
  }
  if (!has("bos_token")) {
    if (format == ChatFormat::kMistral) special.emplace_back("bos_token", "<s>");
    if (format == ChatFormat::kLlama3) special.emplace_back("bos_token", "<|begin_of_text|>");
  }
  return chat_template_from_text(builtin_source(format), std::string("built-in ") + to_string(format),
                                 std::move(special));
}

ChatTemplate load_chat_template(const std::string& dir, std::optional<ChatFormat> format) {
  namespace fs = std::filesystem;
  if (const std::string gguf = gguf_model_path(dir); !gguf.empty()) {
    const GgufChatInfo info = gguf_chat_info(GgufFile::open(gguf));
    return chat_template_from_gguf(info.source, gguf, info.bos_token, info.eos_token, format);
  }
  const std::string cfg_path = (fs::path(dir) / "tokenizer_config.json").string();
  ojson cfg = ojson::object();
  if (fs::exists(cfg_path)) cfg = read_json_file(cfg_path, "a tokenizer_config.json");
  if (!cfg.is_object()) throw Error(cfg_path + ": expected a JSON object");
  auto special = special_tokens_of(cfg, cfg_path);
  if (format) return builtin_chat_template(*format, std::move(special));

  const std::string jinja_path = (fs::path(dir) / "chat_template.jinja").string();
  const std::string json_path = (fs::path(dir) / "chat_template.json").string();
  if (fs::exists(jinja_path)) {
    return chat_template_from_text(read_regular_file(jinja_path, "a chat template"), jinja_path, std::move(special));
  }
  if (fs::exists(json_path)) {
    const ojson j = read_json_file(json_path, "a chat_template.json");
    if (!j.is_object() || !j.contains("chat_template")) throw Error(json_path + ": no \"chat_template\" field");
    return chat_template_from_text(template_field(j["chat_template"], json_path), json_path, std::move(special));
  }
  if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    return chat_template_from_text(template_field(cfg["chat_template"], cfg_path), cfg_path, std::move(special));
  }
  throw Error(dir +
              ": the model has no chat template (no chat_template.jinja, chat_template.json or "
              "\"chat_template\" in tokenizer_config.json)" +
              override_hint());
}

ChatTemplate chat_template_from_gguf(const std::string& source, const std::string& path, const std::string& bos_token,
                                     const std::string& eos_token, std::optional<ChatFormat> format) {
  std::vector<std::pair<std::string, std::string>> special;
  if (!bos_token.empty()) special.emplace_back("bos_token", bos_token);
  if (!eos_token.empty()) special.emplace_back("eos_token", eos_token);
  if (format) return builtin_chat_template(*format, std::move(special));
  if (source.empty()) {
    throw Error(path + ": the model has no chat template (no metadata \"tokenizer.chat_template\")" + override_hint());
  }
  return chat_template_from_text(source, path + ": tokenizer.chat_template", std::move(special));
}

std::string render_chat_vars(const ChatTemplate& t, const ojson& vars, const std::tm& now) {
  jinja::Value globals = jinja::Value::make_dict();
  for (const auto& [name, text] : t.special_tokens) globals.set(name, jinja::Value::string(text));
  for (const auto& [k, v] : vars.items()) globals.set(k, jinja::from_json(v));
  globals.set("raise_exception", jinja::Value::callable([](jinja::Args& a) -> jinja::Value {
                throw jinja::RenderError(jinja::str(a.get(0, "message")));
              }));
  globals.set("strftime_now", jinja::Value::callable([now](jinja::Args& a) {
                char buf[256];
                const std::string fmt = jinja::str(a.get(0, "format"));
                const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &now);
                return jinja::Value::string(std::string(buf, n));
              }));
  try {
    return jinja::render(*t.parsed, globals);
  } catch (const jinja::Unsupported& e) {
    throw Error(t.origin +
                ": rendering the chat template needs what kvscope's template interpreter does not "
                "implement (" +
                e.what() + ")" + override_hint());
  } catch (const jinja::RenderError& e) {
    throw Error(t.origin + ": the chat template refused the conversation: " + e.what());
  }
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::tm& now) {
  ojson vars = ojson::object();
  vars["messages"] = ojson::array();
  for (const ChatMessage& m : messages) vars["messages"].push_back({{"role", m.role}, {"content", m.content}});
  // As transformers calls it: tools and documents are passed, as None.
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  return render_chat_vars(t, vars, now);
}

}  // namespace kvscope
