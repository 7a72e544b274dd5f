// A conversation with an instruct model as one growing KV cache. Each turn
// renders the whole conversation with the model's chat template, tokenizes
// it, keeps the longest prefix the cache already holds and prefills only the
// rest; the reply stops at the template's end-of-turn token and joins the
// messages. Every count comes from what the generator really ran.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "model/decoding/generator.h"

namespace kvscope {

// What starting a turn costs, in positions.
struct TurnStart {
  int turn = 0;       // 1, 2, ...
  int reused = 0;     // positions the cache kept from earlier turns
  int prefilled = 0;  // positions this turn's prefill computes
  int context = 0;    // the rendered conversation's length (reused + prefilled)
  // Positions the cache held (the last turn's prompt and reply) that the new
  // rendering does not start with: the template re-rendered (or the
  // tokenizer re-split) an earlier turn, so they are computed again.
  int diverged = 0;
};

// What the reply cost: positions the forwards computed, and what NO CACHE
// would have computed for the same tokens (the whole sequence every step).
struct TurnEnd {
  std::string text;  // the reply, end-of-turn token and stop strings removed
  StopReason stop = StopReason::kNone;
  int new_tokens = 0;
  long long computed = 0;
  long long no_cache = 0;
};

// The conversation no longer fits the context: start over, or drop the
// oldest turns and recompute.
class ContextFull : public Error {
 public:
  ContextFull(const std::string& what, int needed, int context) : Error(what), needed(needed), context(context) {}
  int needed, context;
};

class Conversation {
 public:
  // `system`: the system prompt ("" = the template's own default, if any).
  Conversation(std::shared_ptr<const Model> model, ChatTemplate tmpl, std::string system);

  // Adds the user's message and starts the reply. Throws ContextFull when
  // the rendered conversation leaves no room for a reply (nothing changes),
  // Error when the template refuses the conversation.
  TurnStart begin_turn(const std::string& user, const GenerateOptions& opt, const std::tm& now);
  RecordPtr step();    // the reply's next forward; nullptr once it is done
  TurnEnd end_turn();  // the reply joins the messages

  void reset();             // only the system prompt stays; the cache is emptied
  bool drop_oldest_turn();  // the first user message and its reply go; false if none
  // The conversation as the template renders it (with the generation prompt), in tokens.
  std::vector<int> render_ids(const std::tm& now) const;

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const Generator& generator() const { return gen_; }
  const ChatTemplate& chat_template() const { return tmpl_; }
  int turn() const { return turn_; }

 private:
  std::shared_ptr<const Model> model_;
  ChatTemplate tmpl_;
  std::vector<ChatMessage> messages_;
  Generator gen_;
  int turn_ = 0;
  bool fresh_ = true;  // nothing in the cache yet (the first turn, or after a reset)
  long long computed_ = 0, no_cache_ = 0;
};

}  // namespace kvscope
