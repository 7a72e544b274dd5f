#include "app/worker/chat_runner.h"

#include <ctime>
#include <exception>
#include <utility>

#include "model/core/overloaded.h"

namespace kvscope {

namespace {

// What a template's strftime_now reads: the local time, as `kvscope chat`'s.
std::tm local_time() {
  const std::time_t t = std::time(nullptr);
  std::tm now{};
  localtime_r(&t, &now);
  return now;
}

}  // namespace

ChatRunner::~ChatRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stop_reply_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ChatRunner::post(ChatJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!std::holds_alternative<chatjob::Send>(job)) stop_reply_ = true;
    if (std::holds_alternative<chatjob::Send>(job)) pub_.generating = true;  // until its turn has run
    jobs_.push_back(std::move(job));
    ++pub_.version;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
}

void ChatRunner::read(ChatPub& into) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (into.version != pub_.version) into = pub_;
}

template <typename F>
void ChatRunner::publish(F&& change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    change(pub_);
    ++pub_.version;
  }
  if (wake_) wake_();
}

void ChatRunner::run() {
  for (;;) {
    ChatJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      // A reply is asked to stop only by a job queued after it.
      stop_reply_ = false;
      for (const ChatJob& j : jobs_) stop_reply_ = stop_reply_ || !std::holds_alternative<chatjob::Send>(j);
    }
    try {
      run_job(job);
    } catch (const std::exception& e) {
      publish([&](ChatPub& p) { p.errors.push_back(std::string("Chat: ") + e.what()); });
    }
    publish([&](ChatPub& p) {
      bool sends = false;
      for (const ChatJob& j : jobs_) sends = sends || std::holds_alternative<chatjob::Send>(j);
      p.generating = sends;
    });
  }
}

void ChatRunner::run_job(ChatJob& job) {
  std::visit(overloaded{
                 [&](chatjob::Open& o) {
                   conv_ = std::make_unique<Conversation>(o.model, std::move(o.tmpl), o.system);
                   auto model = o.model;
                   const std::string origin = conv_->chat_template().origin;
                   const std::vector<ChatMessage> messages = conv_->messages();
                   publish([&](ChatPub& p) {
                     const uint64_t c = p.conversation + 1, version = p.version;
                     std::vector<std::string> errors = std::move(p.errors);
                     p = ChatPub();
                     p.version = version;  // (publish bumps it: a reader's copy is never mistaken for this one)
                     p.model = model;
                     p.origin = origin;
                     p.conversation = c;
                     p.messages = messages;
                     p.errors = std::move(errors);
                   });
                 },
                 [&](chatjob::Send& s) { run_turn(s); },
                 [&](chatjob::Reset&) {
                   if (!conv_) return;
                   conv_->reset();
                   const std::vector<ChatMessage> messages = conv_->messages();
                   publish([&](ChatPub& p) {
                     ++p.conversation;
                     p.messages = messages;
                     p.turns.clear();
                     p.records.clear();
                     p.reply.clear();
                     p.refused.clear();
                   });
                 },
                 [&](chatjob::Drop&) {
                   if (!conv_) return;
                   const bool dropped = conv_->drop_oldest_turn();
                   const std::vector<ChatMessage> messages = conv_->messages();
                   publish([&](ChatPub& p) {
                     if (!dropped) {
                       p.errors.push_back("Chat: no turn to drop (only the system prompt is left)");
                       return;
                     }
                     p.messages = messages;
                     p.refused.clear();
                   });
                 },
             },
             job);
}

// One turn: the message rendered with the whole conversation, the prefill
// of what the cache does not hold, then the reply a forward at a time, each
// record published as it comes (the window shows the reply growing).
void ChatRunner::run_turn(const chatjob::Send& s) {
  if (!conv_) throw Error("no conversation is open (the model's chat template could not be used)");
  TurnStart t;
  try {
    t = conv_->begin_turn(s.text, s.opt, local_time());
  } catch (const ContextFull& e) {
    publish([&](ChatPub& p) {
      p.refused = s.text;
      p.needed = e.needed;
      p.n_ctx = e.context;
      p.errors.push_back(std::string("Chat: ") + e.what());
    });
    return;
  }
  const std::vector<ChatMessage> messages = conv_->messages();
  publish([&](ChatPub& p) {
    p.messages = messages;
    p.turns.push_back({t, {}, false});
    p.records.clear();
    p.reply.clear();
    p.refused.clear();
  });
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_reply_) break;
    }
    RecordPtr r = conv_->step();
    if (!r) break;
    const std::string text = conv_->generator().text();
    publish([&](ChatPub& p) {
      p.records.push_back(r);
      p.reply = text;
    });
  }
  const TurnEnd e = conv_->end_turn();
  const std::vector<ChatMessage> after = conv_->messages();
  publish([&](ChatPub& p) {
    p.messages = after;
    p.turns.back().end = e;
    p.turns.back().done = true;
    p.reply = e.text;
  });
}

}  // namespace kvscope
