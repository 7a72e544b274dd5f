// `kvscope chat-template`: a conversation rendered by the model's own chat
// template, exactly as transformers' apply_chat_template(tokenize=False)
// returns it (no newline added), so anyone can check a template.
#include <ctime>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/cli_chat.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "model/arch/hf_cache.h"
#include "model/chat/chat_template.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

void add_chat_format_flag(CLI::App& cmd, std::string& format) {
  cmd.add_option("--chat-format", format,
                 std::string("Use a built-in chat format instead of the model's own template: ") + chat_format_names())
      ->check(CLI::IsMember({"chatml", "llama3", "zephyr", "mistral"}));
}

ChatTemplate chat_template_for(const std::string& model, const std::string& format) {
  const std::string dir = resolve_model_dir(model.empty() ? default_model_dir() : model);
  return load_chat_template(dir, format.empty() ? std::nullopt : chat_format_of(format));
}

std::tm local_now() {
  const std::time_t t = std::time(nullptr);
  std::tm now{};
  localtime_r(&t, &now);
  return now;
}

void add_chat_template_command(CLI::App& app, ChatTemplateCommand& c) {
  c.cmd = app.add_subcommand("chat-template", "Print a conversation as the model's chat template renders it");
  c.cmd->add_option("--model", c.model, "Model folder or Hugging Face id (its tokenizer_config.json's template)")
      ->check(non_empty("a model folder"));
  c.cmd
      ->add_option("--messages", c.messages,
                   "JSON file: a list of {\"role\": \"system\"|\"user\"|\"assistant\", \"content\": text}")
      ->required()
      ->check(non_empty("a JSON file"));
  c.cmd->add_flag("--no-generation-prompt", c.no_generation_prompt,
                  "Leave out the assistant header that asks the model to answer");
  add_chat_format_flag(*c.cmd, c.format);
}

std::vector<ChatMessage> read_messages(const std::string& path) {
  const std::string text = read_regular_file(path, "a JSON list of chat messages");
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, kJsonMaxDepth, path);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_array()) throw UsageError(path + ": expected a JSON list of messages, found " + json_quote(j));
  std::vector<ChatMessage> out;
  for (size_t k = 0; k < j.size(); ++k) {
    const nlohmann::json& m = j[k];
    const std::string where = path + ": message " + std::to_string(k);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      throw UsageError(where + ": expected {\"role\": string, \"content\": string}, found " + json_quote(m));
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant") {
      throw UsageError(where + ": role must be \"system\", \"user\" or \"assistant\", found \"" + role + "\"");
    }
    const std::string content = m["content"].get<std::string>();
    require_utf8(content, where + "'s content");
    out.push_back({role, content});
  }
  return out;
}

int run_chat_template_command(const ChatTemplateCommand& c) {
  const std::vector<ChatMessage> messages = read_messages(c.messages);
  const ChatTemplate t = chat_template_for(c.model, c.format);
  out_text(render_chat(t, messages, !c.no_generation_prompt, local_now()));
  return 0;
}

}  // namespace kvscope
