// The chat view's engine thread: it owns one Conversation
// (model/chat/conversation.h) and runs its turns, publishing each forward's
// record as the reply streams, token by token, and each turn's counts
// (TurnStart: reused and prefilled positions; TurnEnd: what the forwards
// computed and what NO CACHE would have). The Session owns the runner and
// reads what it published (ChatPub); nothing else touches the Conversation.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "model/chat/conversation.h"

namespace kvscope {

// One turn as it ran: its start, and once the reply is done, its end.
struct ChatTurn {
  TurnStart start;
  TurnEnd end;
  bool done = false;
};

// Everything the runner published.
struct ChatPub {
  std::shared_ptr<const Model> model;  // the conversation's (null before open)
  std::string origin;                  // where its template came from ("built-in chatml", a file)
  uint64_t conversation = 0;           // bumped by open, reset and drop: the cache's picture starts over
  std::vector<ChatMessage> messages;   // the conversation, the message being answered included
  std::vector<ChatTurn> turns;         // every turn since the conversation (re)started
  std::vector<RecordPtr> records;      // the newest turn's records so far, its prefill first
  std::string reply;                   // the newest reply so far (the reply's text, streaming)
  bool generating = false;             // a reply is being generated (or a message waits for it)
  // The last message the context could not hold (ContextFull): its text
  // and sizes; cleared by the next turn, a reset or a drop.
  std::string refused;
  int needed = 0, n_ctx = 0;
  std::vector<std::string> errors;  // every failure so far, in order (the session takes the new ones)
  uint64_t version = 0;             // bumped by every change
};

namespace chatjob {
struct Open {
  std::shared_ptr<const Model> model;
  ChatTemplate tmpl;
  std::string system;  // "" = the template's own default, if any
};
struct Send {
  std::string text;
  GenerateOptions opt;
};
struct Reset {};
struct Drop {};
}  // namespace chatjob
using ChatJob = std::variant<chatjob::Open, chatjob::Send, chatjob::Reset, chatjob::Drop>;

class ChatRunner {
 public:
  // `wake` is called from the runner's thread after each change it
  // publishes (thread-safe, e.g. glfwPostEmptyEvent).
  explicit ChatRunner(std::function<void()> wake = {}) : wake_(std::move(wake)) {}
  ~ChatRunner();
  ChatRunner(const ChatRunner&) = delete;
  ChatRunner& operator=(const ChatRunner&) = delete;

  // Queues a job; Open, Reset and Drop stop a reply being generated first
  // (it ends where it is and joins the messages).
  void post(ChatJob job);
  // Everything published so far (copied when it changed since `into.version`).
  void read(ChatPub& into) const;

 private:
  void run();
  void run_job(ChatJob& job);
  void run_turn(const chatjob::Send& s);
  template <typename F>
  void publish(F&& change);

  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ChatPub pub_;
  std::deque<ChatJob> jobs_;
  bool stop_reply_ = false;  // a later job asks the reply to end where it is
  bool stop_ = false;
  std::unique_ptr<Conversation> conv_;  // the runner's thread's
  std::thread thread_;
};

}  // namespace kvscope
