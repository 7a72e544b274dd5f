// A model's chat template: the Jinja text its authors ship (chat_template.jinja,
// chat_template.json or tokenizer_config.json's "chat_template"), the special
// tokens it names, and the end-of-turn texts a reply stops at. Rendered as
// transformers' apply_chat_template renders it (model/chat/jinja.h), or
// refused with the built-in formats named as the override.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_value.h"

namespace kvscope {

namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The built-in formats, for models whose template kvscope cannot render
// (or that ship none): --chat-format NAME.
enum class ChatFormat : uint8_t { kChatML, kLlama3, kZephyr, kMistral };
const char* to_string(ChatFormat f);
std::optional<ChatFormat> chat_format_of(const std::string& name);
// "chatml|llama3|zephyr|mistral", for messages.
const char* chat_format_names();

struct ChatTemplate {
  std::string origin;  // where the text came from: "DIR/tokenizer_config.json", "built-in chatml"
  std::string source;  // the Jinja text
  std::shared_ptr<const jinja::Template> parsed;
  // bos_token, eos_token, unk_token, pad_token as tokenizer_config.json names
  // them (the template reads them as variables); a null one is absent.
  std::vector<std::pair<std::string, std::string>> special_tokens;
  // Texts that end an assistant turn: the template family's marker
  // (<|im_end|>, <|eot_id|>, <|end|>) and the eos token, as the model's
  // tokenizer spells them.
  std::vector<std::string> end_of_turn;
};

// The template of the model folder or GGUF file `dir` (or the built-in `format`). Throws
// Error naming the file and the field, and naming --chat-format as the
// override when the folder has no template or one kvscope cannot render.
ChatTemplate load_chat_template(const std::string& dir, std::optional<ChatFormat> format);
// A GGUF file's template: `source` (its tokenizer.chat_template, empty when it
// has none) with its bos and eos tokens' texts as the variables bos_token and
// eos_token (what tokenizer_config.json names), or the built-in `format`.
// `path` names the file. load_chat_template takes this path for a GGUF file.
ChatTemplate chat_template_from_gguf(const std::string& source, const std::string& path, const std::string& bos_token,
                                     const std::string& eos_token, std::optional<ChatFormat> format);
// A built-in format with the given special tokens.
ChatTemplate builtin_chat_template(ChatFormat format, std::vector<std::pair<std::string, std::string>> special_tokens);
// A template from its text (a test, a chat_template file). Throws as above.
ChatTemplate chat_template_from_text(const std::string& source, const std::string& origin,
                                     std::vector<std::pair<std::string, std::string>> special_tokens);

// The prompt text for `messages`, byte for byte as apply_chat_template(...,
// tokenize=False) returns it. `now` is what strftime_now reads. Throws Error
// with the template's own message (raise_exception) or the refusal.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::tm& now);
// The same with any variables (messages as JSON, tools, ...): `vars` is a
// JSON object whose members become the template's variables, beside the
// special tokens, raise_exception and strftime_now.
std::string render_chat_vars(const ChatTemplate& t, const nlohmann::ordered_json& vars, const std::tm& now);

}  // namespace kvscope
