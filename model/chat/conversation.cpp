// A chat as one growing KV cache (conversation.h).
#include "model/chat/conversation.h"

#include <algorithm>

#include "model/tokenizer/tokenizer.h"

namespace kvscope {

Conversation::Conversation(std::shared_ptr<const Model> model, ChatTemplate tmpl, std::string system)
    : model_(std::move(model)), tmpl_(std::move(tmpl)), gen_(model_) {
  if (!system.empty()) messages_.push_back({"system", std::move(system)});
}

std::vector<int> Conversation::render_ids(const std::tm& now) const {
  // The template writes the special tokens as text (<|im_start|>, the bos
  // token); the tokenizer turns them into their single ids. Nothing is added
  // in front: apply_chat_template tokenizes with add_special_tokens=False.
  return model_->tokenizer.encode(render_chat(tmpl_, messages_, true, now));
}

TurnStart Conversation::begin_turn(const std::string& user, const GenerateOptions& opt, const std::tm& now) {
  messages_.push_back({"user", user});
  std::vector<int> ids;
  try {
    ids = render_ids(now);
  } catch (...) {
    messages_.pop_back();
    throw;
  }
  const int n_ctx = model_->config.n_positions;
  if (static_cast<int>(ids.size()) + 1 > n_ctx) {
    messages_.pop_back();
    throw ContextFull("the conversation is " + std::to_string(ids.size()) + " tokens with this message, and " +
                          model_->name + "'s context holds " + std::to_string(n_ctx) +
                          " positions: start over, or drop the oldest turns and recompute",
                      static_cast<int>(ids.size()), n_ctx);
  }
  GenerateOptions o = opt;
  o.max_new = std::min(opt.max_new, n_ctx - static_cast<int>(ids.size()));
  const Tokenizer& tok = model_->tokenizer;
  for (const std::string& end : tmpl_.end_of_turn) {
    const std::vector<int> one = tok.encode(end);
    if (one.size() == 1) {
      o.stop_ids.push_back(one[0]);
    } else {
      o.stop.push_back(end);  // not a single token in this vocabulary: stop at its text
    }
  }
  const int held = fresh_ ? 0 : gen_.cache_length();
  TurnStart t;
  try {
    if (fresh_) {
      gen_.start_tokens(ids, o);
    } else {
      t.reused = gen_.continue_tokens(ids, o);
    }
  } catch (...) {
    messages_.pop_back();
    throw;
  }
  t.turn = ++turn_;
  t.context = static_cast<int>(ids.size());
  t.prefilled = t.context - t.reused;
  t.diverged = std::max(0, held - t.reused);
  fresh_ = false;
  computed_ = no_cache_ = 0;
  return t;
}

RecordPtr Conversation::step() {
  RecordPtr r = gen_.step();
  if (r) {
    computed_ += r->seq_len - r->first;
    no_cache_ += r->seq_len;
  }
  return r;
}

TurnEnd Conversation::end_turn() {
  TurnEnd e;
  e.text = gen_.text();
  e.stop = gen_.reason();
  e.new_tokens = gen_.n_generated();
  e.computed = computed_;
  e.no_cache = no_cache_;
  messages_.push_back({"assistant", e.text});
  return e;
}

void Conversation::reset() {
  std::vector<ChatMessage> keep;
  if (!messages_.empty() && messages_[0].role == "system") keep.push_back(messages_[0]);
  messages_ = std::move(keep);
  turn_ = 0;
  fresh_ = true;
}

bool Conversation::drop_oldest_turn() {
  const size_t first = !messages_.empty() && messages_[0].role == "system" ? 1 : 0;
  if (messages_.size() <= first) return false;
  size_t end = first + 1;
  if (end < messages_.size() && messages_[end].role == "assistant") ++end;
  messages_.erase(messages_.begin() + static_cast<long>(first), messages_.begin() + static_cast<long>(end));
  return true;
}

}  // namespace kvscope
