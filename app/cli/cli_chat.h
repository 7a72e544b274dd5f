// `chat-template` (cli_chat.cpp): a conversation as the model's chat template
// renders it; and what the chat commands share: --chat-format, finding the
// template, reading a messages file.
#pragma once

#include <CLI/CLI.hpp>
#include <ctime>
#include <string>
#include <vector>

#include "app/cli/cli_commands.h"
#include "model/chat/chat_template.h"

namespace kvscope {

struct ChatTemplateCommand {
  CLI::App* cmd = nullptr;
  std::string model, messages, format;
  bool no_generation_prompt = false;
};
void add_chat_template_command(CLI::App& app, ChatTemplateCommand& c);
int run_chat_template_command(const ChatTemplateCommand& c);

// `chat`: one user turn per line of standard input, each answered by the
// model through its chat template, the conversation kept as one KV cache.
struct ChatCommand {
  CLI::App* cmd = nullptr;
  GenerateCommand gen;  // --model, --max-new, --ctx, the sampling flags, --no-cache, --json
  std::string system, format;
};
void add_chat_command(CLI::App& app, ChatCommand& c);
int run_chat_command(ChatCommand& c);
// `generate --chat TEXT [--system TEXT]`: one turn of a new conversation,
// printed as `chat` prints it.
int run_chat_once(const GenerateCommand& c, const std::string& message);

// --chat-format NAME, bound to `format` ("" = the model's own template).
void add_chat_format_flag(CLI::App& cmd, std::string& format);
// The template of `model` (a folder, a hub id, "" = the default model), or
// the built-in `format`.
ChatTemplate chat_template_for(const std::string& model, const std::string& format);
// A JSON list of {role, content}; UsageError naming the file and the message.
std::vector<ChatMessage> read_messages(const std::string& path);
// What strftime_now reads: the local time.
std::tm local_now();

}  // namespace kvscope
