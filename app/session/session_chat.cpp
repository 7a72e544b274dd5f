// The Session's part of the chat view: the conversation runs on the
// session's chat thread (app/worker/chat_runner.h) with the loaded model and
// its chat template (or the built-in format chosen); the records it
// publishes become the conversation's picture (EngineState::chat.seq) and
// who said each token (chat.tags), for render/scene/scene_chat.h.
#include <algorithm>
#include <exception>

#include "app/platform/user_files.h"
#include "app/session/session.h"
#include "model/core/error.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

void Session::chat_open(bool open) {
  ui.chat.open = open;
  if (!open) return;
  ui.playing = false;  // the generation waits while the chat runs
  ui.serving.open = false;
  ui.chat.system_edit = ui.chat_system;
  if (engine.chat.opened_for != engine.model.get() || !engine.chat.pub.model) chat_restart();
}

// A new conversation with the loaded model, its system prompt and template.
void Session::chat_restart() {
  ChatState& c = engine.chat;
  c.template_error.clear();
  c.opened_for = engine.model.get();
  if (!engine.model) {
    c.template_error = "No model is loaded yet: the chat talks to the loaded model.";
    return;
  }
  const std::optional<ChatFormat> format =
      ui.chat_format > 0 ? std::optional<ChatFormat>(static_cast<ChatFormat>(ui.chat_format - 1)) : std::nullopt;
  try {
    chat_post(chatjob::Open{engine.model, load_chat_template(engine.model->dir, format), ui.chat_system});
  } catch (const std::exception& e) {
    // (no template, or one kvscope cannot render: the panel offers the built-in formats)
    c.template_error = as_user_named(e.what());
  }
}

void Session::chat_set(const std::string& system, int format) {
  ui.chat_system = ui.chat.system_edit = system;
  ui.chat_format = std::clamp(format, 0, kChatFormats);
  chat_restart();
}

void Session::chat_post(ChatJob job) {
  chat_.post(std::move(job));
  chat_.read(engine.chat.pub);
}

void Session::chat_send(const std::string& text) {
  const ChatState& c = engine.chat;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return;
  if (c.pub.generating) {
    ui.errors.push_back("Chat: the reply is still being generated; send the next message once it is done.");
    return;
  }
  if (!c.pub.model || c.opened_for != engine.model.get()) {
    ui.errors.push_back("Chat: no conversation is open" +
                        (c.template_error.empty() ? std::string(".") : ": " + c.template_error));
    return;
  }
  try {
    require_utf8(text, "the chat message");
  } catch (const std::exception& e) {
    ui.errors.push_back(std::string("Chat: ") + e.what());
    return;
  }
  chatjob::Send s;
  s.text = text;
  s.opt.max_new = std::max(1, ui.chat_max_new);
  s.opt.sampler = ui.sampler;
  chat_post(std::move(s));
  ui.chat.input.clear();
}

// The records published since the last frame into the conversation's
// picture: a new turn's prefill tags its prompt by role (the messages as the
// template rendered them), each reply token is the assistant's (its
// end-of-turn token a marker).
void Session::chat_take_records() {
  ChatState& c = engine.chat;
  const ChatPub& p = c.pub;
  if (c.conversation != p.conversation) {  // opened or reset: the picture starts over
    c.conversation = p.conversation;
    c.seq = SequenceState();
    c.tags.clear();
    c.turns_taken = p.turns.size();
    c.records_taken = p.records.size();
    return;
  }
  if (c.turns_taken != p.turns.size()) {  // a new turn: its records from the first
    c.turns_taken = p.turns.size();
    c.records_taken = 0;
  }
  if (!p.model) return;
  const Tokenizer& tok = p.model->tokenizer;
  const int message = static_cast<int>(p.messages.size()) - (p.turns.empty() || !p.turns.back().done ? 0 : 1);
  const int turn = p.turns.empty() ? 0 : p.turns.back().start.turn;
  for (; c.records_taken < p.records.size(); ++c.records_taken) {
    const RecordPtr& r = p.records[c.records_taken];
    if (r->prefill) {
      std::vector<std::string> pieces;
      for (int id : r->prompt_tokens) pieces.push_back(tok.token_bytes(id));
      // (the messages without the reply this turn adds)
      const long asked_n = std::clamp<long>(message, 0, static_cast<long>(p.messages.size()));
      const std::vector<ChatMessage> asked(p.messages.begin(), p.messages.begin() + asked_n);
      c.tags = tag_chat_tokens(pieces, asked);
    }
    append_chat_record(c.seq, r);
    c.tags.resize(static_cast<size_t>(r->seq_len));
    c.tags.push_back(reply_token_tag(message, turn, r->stop == StopReason::kEos));
  }
}

void Session::chat_update() {
  chat_.read(engine.chat.pub);
  ChatState& c = engine.chat;
  for (; c.errors_taken < c.pub.errors.size(); ++c.errors_taken) ui.errors.push_back(c.pub.errors[c.errors_taken]);
  chat_take_records();
  // A message the context could not hold goes back into the box (the panel offers dropping the oldest turn).
  if (c.pub.refused != c.refused_seen) {
    c.refused_seen = c.pub.refused;
    if (!c.refused_seen.empty() && ui.chat.input.empty()) ui.chat.input = c.refused_seen;
  }
  // Another model loaded while the chat is open: a new conversation with it.
  if (ui.chat.open && engine.model && c.opened_for != engine.model.get() && !engine.loading_model) chat_restart();
}

}  // namespace kvscope
