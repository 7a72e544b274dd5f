// `kvscope chat-template`: a conversation rendered by the model's own chat
// template, exactly as transformers' apply_chat_template(tokenize=False)
// returns it (no newline added), so anyone can check a template. `kvscope
// chat`: the conversation itself, one KV cache across the turns.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/cli_chat.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "app/cli/record_json.h"
#include "model/arch/hf_cache.h"
#include "model/chat/chat_template.h"
#include "model/chat/conversation.h"
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
  c.cmd->add_option("--model", c.model, "Model folder, Hugging Face id or GGUF file (its chat template)")
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

namespace kvscope {

void add_chat_command(CLI::App& app, ChatCommand& c) {
  GenerateArgs& g = c.gen.args;
  g.max_new = 256;
  auto* cmd = c.cmd =
      app.add_subcommand("chat",
                         "Talk to an instruct model: one message per line of standard input (/reset starts over, /drop "
                         "drops the oldest turn); the conversation stays one KV cache");
  cmd->add_option("--model", g.model, "Model folder, Hugging Face id or GGUF file (with a chat template)")
      ->check(non_empty("a model folder"));
  cmd->add_option("--system", c.system, "System prompt (default: the template's own, if it has one)")
      ->check(non_empty("a system prompt"));
  cmd->add_option("--max-new", g.max_new, "Most new tokens per reply")->check(in_range(setting::kMaxNew));
  cmd->add_option("--ctx", g.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  cmd->add_flag("--bf16-products", g.bf16_products, kBf16ProductsHelp);
  add_sampling_flags(cmd, c.gen);
  cmd->add_flag("--no-cache", g.no_cache, "Recompute the whole conversation at every step");
  cmd->add_flag("--json", g.json,
                "JSON Lines: each turn's {\"event\":\"turn\"} (positions reused and prefilled), its prefill "
                "and step records, and its {\"event\":\"reply\"}");
  add_chat_format_flag(*cmd, c.format);
}

namespace {

using nlohmann::json;

// Streams the reply as text (holding back what a stop string could still
// cut) or as records; returns when it is done.
void stream_reply(Conversation& conv, const GenerateArgs& g, int turn) {
  const Tokenizer& tok = conv.generator().model().tokenizer;
  size_t hold = 0;
  for (const auto& s : conv.generator().options().stop) hold = std::max(hold, s.size());
  size_t printed = 0;
  while (RecordPtr r = conv.step()) {
    if (g.json) {
      json j = step_json(*r, tok);
      j["turn"] = turn;
      out_line(j.dump());
      continue;
    }
    const std::string t = conv.generator().text();
    const bool done = conv.generator().done();
    const size_t end = done ? t.size() : (t.size() > hold ? t.size() - hold : 0);
    if (end > printed) {
      out_text(t.substr(printed, end - printed));
      printed = end;
    }
  }
}

void report_turn(const TurnStart& t, bool as_json) {
  if (as_json) {
    out_line(json{{"event", "turn"},
                  {"turn", t.turn},
                  {"reused", t.reused},
                  {"prefilled", t.prefilled},
                  {"context", t.context},
                  {"diverged", t.diverged}}
                 .dump());
    return;
  }
  std::fprintf(stderr, "[turn %d] %d positions reused from the cache, %d prefilled (context %d)%s\n", t.turn, t.reused,
               t.prefilled, t.context,
               t.diverged > 0
                   ? (", " + std::to_string(t.diverged) + " earlier positions re-rendered and recomputed").c_str()
                   : "");
}

void report_reply(const TurnEnd& e, int turn, bool as_json) {
  if (as_json) {
    out_line(json{{"event", "reply"},
                  {"turn", turn},
                  {"text", escape_invalid_utf8(e.text)},
                  {"stop", to_string(e.stop)},
                  {"new_tokens", e.new_tokens},
                  {"computed", e.computed},
                  {"no_cache", e.no_cache}}
                 .dump());
    return;
  }
  out_text("\n");
  std::fprintf(stderr,
               "[turn %d] %d new tokens, stop: %s; the forwards computed %lld positions, NO CACHE would "
               "compute %lld\n",
               turn, e.new_tokens, to_string(e.stop), e.computed, e.no_cache);
}

// /reset, /drop: true when the line was one of them.
bool chat_command(Conversation& conv, const std::string& line, bool as_json) {
  if (line == "/reset") {
    conv.reset();
    if (as_json) out_line(json{{"event", "reset"}}.dump());
    std::fprintf(stderr, "[chat] started over: the cache is empty\n");
    return true;
  }
  if (line == "/drop") {
    const bool dropped = conv.drop_oldest_turn();
    if (as_json) out_line(json{{"event", "drop"}, {"dropped", dropped}}.dump());
    std::fprintf(
        stderr, "[chat] %s\n",
        dropped ? "dropped the oldest turn: the next turn recomputes what follows the change" : "no turn to drop");
    return true;
  }
  return false;
}

// The conversation over `next_line`'s lines (standard input, or generate's one --chat).
int run_chat_lines(const GenerateCommand& gc, const std::string& system, const std::string& format,
                   const std::function<bool(std::string&)>& next_line) {
  const GenerateArgs& g = gc.args;
  const GenerateOptions opt = generate_options(g, sampling_requested(gc));
  auto model = load_cli_model(g.model, g.ctx, g.bf16_products);
  Conversation conv(model, chat_template_for(g.model, format), system);
  int rc = 0;
  std::string line;
  for (int line_no = 1; next_line(line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || chat_command(conv, line, g.json)) continue;
    try {
      require_utf8(line, "standard input, line " + std::to_string(line_no));
      const TurnStart t = conv.begin_turn(line, opt, local_now());
      report_turn(t, g.json);
      stream_reply(conv, g, t.turn);
      report_reply(conv.end_turn(), t.turn, g.json);
    } catch (const ContextFull& e) {
      if (g.json) {
        out_line(json{{"event", "context_full"}, {"needed", e.needed}, {"context", e.context}}.dump());
      }
      std::fprintf(stderr, "kvscope: %s: type /reset to start over, or /drop to drop the oldest turn\n",
                   terminal_safe(e.what()).c_str());
      rc = 1;
    } catch (const Error& e) {
      std::fprintf(stderr, "kvscope: error: %s\n", terminal_safe(e.what()).c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int run_chat_command(ChatCommand& c) {
  return run_chat_lines(c.gen, c.system, c.format,
                        [](std::string& line) { return static_cast<bool>(std::getline(std::cin, line)); });
}

int run_chat_once(const GenerateCommand& c, const std::string& message) {
  if (message.find('\n') != std::string::npos) {
    throw UsageError("--chat: one message on one line (kvscope chat takes a conversation, a line a turn)");
  }
  bool given = false;
  const int rc = run_chat_lines(c, c.args.system, c.args.chat_format, [&](std::string& line) {
    if (given) return false;
    line = message;
    given = true;
    return true;
  });
  if (rc != 0) throw Error("--chat: the turn failed (see above)");
  return 0;
}

}  // namespace kvscope
