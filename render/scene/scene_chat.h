// The chat view's scene: the conversation as one sequence, as the KV cache
// holds it across the turns. build_scene draws its stacks from the turn's
// records (the reused positions resident, the prefilled ones flashing);
// this adds what makes it a conversation: each token block tinted by who
// said it (system, user, assistant, or the template's own marker text), a
// caption where each message starts, and three bars on the ground saying
// which positions the cache reused, which this turn prefilled and which the
// reply generated. Pure, like every builder here: tested without GL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "render/scene/scene.h"

namespace kvscope {

enum class ChatRole : uint8_t { kSystem, kUser, kAssistant, kTemplate };
const char* to_string(ChatRole r);
// The tint of a role's token blocks: blue and orange for user and assistant
// (told apart in every colour vision), violet for the system prompt, dark
// grey for the template's markers (<|im_start|>, role headers, <|im_end|>).
glm::vec3 chat_role_colour(ChatRole r);

// Who one position of the conversation belongs to.
struct ChatTokenTag {
  ChatRole role = ChatRole::kTemplate;
  int message = -1;  // the message whose content (or, for template text, whose header) it is
  int turn = 0;      // 0: the system prompt; k: the k-th user message and its reply
  bool operator==(const ChatTokenTag& o) const { return role == o.role && message == o.message && turn == o.turn; }
};

// Tags for the tokens of a rendered conversation. `pieces`: each token's raw
// bytes (Tokenizer::token_bytes; together the rendered text), `messages` as
// the template rendered them. Each message's content is found in the text in
// order; a token overlapping it takes its role. The rest is the template's
// text and belongs to the message after it (its header); what follows the
// last message (the generation prompt) to the reply, message
// messages.size(). A content the template changed (not found) tags nothing.
std::vector<ChatTokenTag> tag_chat_tokens(const std::vector<std::string>& pieces,
                                          const std::vector<ChatMessage>& messages);

// A reply's next token: the assistant's (`message`, `turn`), or a marker when
// it is one of the template's end-of-turn tokens (`end_of_turn`).
ChatTokenTag reply_token_tag(int message, int turn, bool end_of_turn);

// Adds a record of the conversation's generator to `seq`. A turn's prefill
// that kept the cache (first > 0) keeps what `seq` knew of those positions
// (their K/V norms, from the turns that computed them), where append_record
// would start over; anything else is append_record.
void append_chat_record(SequenceState& seq, const RecordPtr& rec);

// The turn on screen.
struct ChatSceneInput {
  const std::vector<ChatTokenTag>* tags = nullptr;  // (position) the turn's prompt and its reply so far
  int turn = 0;
  int reused = 0;   // positions [0, reused) the cache kept from earlier turns
  int context = 0;  // [reused, context) this turn's prefill computed; [context, ...) the reply
};

// Tints build_scene's token blocks by role (an aggregated column by its most
// frequent one; the newest, falling token keeps its own colour), captions
// each message's first position, lays the three bars on the ground and
// names the turn in the banner. Sets Scene::chat (the legend's role entries).
void add_chat_marks(Scene& s, const ChatSceneInput& in, const Layout& L = Layout());

}  // namespace kvscope
