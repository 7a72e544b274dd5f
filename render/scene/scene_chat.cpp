// The chat view's scene (scene_chat.h).
#include "render/scene/scene_chat.h"

#include <algorithm>
#include <array>

namespace kvscope {

const char* to_string(ChatRole r) {
  switch (r) {
    case ChatRole::kSystem:
      return "system";
    case ChatRole::kUser:
      return "user";
    case ChatRole::kAssistant:
      return "assistant";
    case ChatRole::kTemplate:
      return "template";
  }
  return "?";
}

glm::vec3 chat_role_colour(ChatRole r) {
  switch (r) {
    case ChatRole::kSystem:
      return {0.72f, 0.55f, 0.95f};
    case ChatRole::kUser:
      return {0.25f, 0.58f, 1.0f};
    case ChatRole::kAssistant:
      return {1.0f, 0.6f, 0.15f};
    case ChatRole::kTemplate:
      return {0.34f, 0.36f, 0.42f};
  }
  return {1, 1, 1};
}

namespace {

ChatRole role_of(const std::string& role) {
  if (role == "system") return ChatRole::kSystem;
  if (role == "user") return ChatRole::kUser;
  return ChatRole::kAssistant;
}

// The turn each message belongs to: the k-th user message starts turn k;
// a system prompt before it is turn 0.
std::vector<int> message_turns(const std::vector<ChatMessage>& messages) {
  std::vector<int> turn(messages.size() + 1, 0);
  int k = 0;
  for (size_t m = 0; m < messages.size(); ++m) {
    if (messages[m].role == "user") ++k;
    turn[m] = k;
  }
  turn[messages.size()] = k;  // the reply being generated
  return turn;
}

}  // namespace

std::vector<ChatTokenTag> tag_chat_tokens(const std::vector<std::string>& pieces,
                                          const std::vector<ChatMessage>& messages) {
  std::string text;
  std::vector<size_t> start(pieces.size() + 1, 0);  // (token + 1) byte offsets
  for (size_t i = 0; i < pieces.size(); ++i) {
    start[i] = text.size();
    text += pieces[i];
  }
  start[pieces.size()] = text.size();
  // Each message's content span [from, to) in the text, found in order.
  struct Span {
    size_t from = std::string::npos, to = 0;
  };
  std::vector<Span> spans(messages.size());
  size_t cursor = 0;
  for (size_t m = 0; m < messages.size(); ++m) {
    const std::string& c = messages[m].content;
    if (c.empty()) continue;
    const size_t at = text.find(c, cursor);
    if (at == std::string::npos) continue;
    spans[m] = {at, at + c.size()};
    cursor = at + c.size();
  }
  const std::vector<int> turn = message_turns(messages);
  std::vector<ChatTokenTag> tags(pieces.size());
  size_t m = 0;  // the first found message whose content ends after this token starts
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t b0 = start[i], b1 = start[i + 1];
    while (m < messages.size() && (spans[m].from == std::string::npos || spans[m].to <= b0)) ++m;
    ChatTokenTag& t = tags[i];
    t.message = static_cast<int>(m);
    t.turn = turn[m];
    const bool inside = m < messages.size() && b0 < spans[m].to && b1 > spans[m].from;
    t.role = inside ? role_of(messages[m].role) : ChatRole::kTemplate;
  }
  return tags;
}

ChatTokenTag reply_token_tag(int message, int turn, bool end_of_turn) {
  return {end_of_turn ? ChatRole::kTemplate : ChatRole::kAssistant, message, turn};
}

void append_chat_record(SequenceState& seq, const RecordPtr& rec) {
  if (!rec || !rec->prefill || rec->first <= 0 || seq.n_records == 0) {
    append_record(seq, rec);
    return;
  }
  // The norms of the kept positions, (position, layer), before the prefill starts the state over.
  const size_t keep = static_cast<size_t>(rec->first) * static_cast<size_t>(seq.n_layer);
  const bool same_shape = seq.n_layer == rec->n_layer && seq.k_norm.size() >= keep && seq.v_norm.size() >= keep;
  const std::vector<float> k(seq.k_norm.begin(), seq.k_norm.begin() + static_cast<long>(same_shape ? keep : 0));
  const std::vector<float> v(seq.v_norm.begin(), seq.v_norm.begin() + static_cast<long>(same_shape ? keep : 0));
  append_record(seq, rec);
  if (!same_shape || seq.k_norm.size() < keep) return;
  std::copy(k.begin(), k.end(), seq.k_norm.begin());
  std::copy(v.begin(), v.end(), seq.v_norm.begin());
  for (size_t i = 0; i < k.size(); ++i) {
    float& top = seq.k_norm_max[i % static_cast<size_t>(seq.n_layer)];
    top = std::max(top, k[i]);
  }
}

namespace {

// In front of the stacks (z): the role strips, the spans' bars, their captions, the turns' names.
constexpr float kBarY = -0.05f, kBarH = 0.06f, kStripDz = 0.35f, kBarDz = 0.75f, kLabelDz = 1.35f, kTurnLabelDz = 2.0f;

// The role most of positions [p0, p1) have.
ChatRole main_role(const std::vector<ChatTokenTag>& tags, int p0, int p1) {
  std::array<int, 4> n{};
  for (int p = p0; p < p1 && p < static_cast<int>(tags.size()); ++p)
    ++n[static_cast<size_t>(tags[static_cast<size_t>(p)].role)];
  const auto top = std::max_element(n.begin(), n.end());
  return *top == 0 ? ChatRole::kTemplate : static_cast<ChatRole>(top - n.begin());
}

void add_caption(Scene& s, const glm::vec3& at, std::string text, const glm::vec3& c, int pos,
                 std::string short_text = "") {
  Label lab;
  lab.kind = LabelKind::kCacheMark;
  lab.pos = pos;
  lab.text = std::move(text);
  lab.short_text = std::move(short_text);
  lab.anchor = at;
  lab.colour = glm::vec4(c, 1.0f);
  s.labels.push_back(std::move(lab));
}

// A bar in front of the stacks under positions [p0, p1), its caption in front of it.
void add_span_bar(Scene& s, const Layout& L, int p0, int p1, const glm::vec3& c, float glow, std::string text,
                  std::string short_text) {
  if (p1 <= p0) return;
  const float x0 = L.x(p0) - L.block_w * 0.5f, x1 = L.x(p1 - 1) + L.block_w * 0.5f;
  BlockInstance b;
  b.center = {(x0 + x1) * 0.5f, kBarY, L.block_w * 0.5f + kBarDz};
  b.size = {x1 - x0, kBarH, 0.4f};
  b.colour = glm::vec4(c, 1.0f);
  b.glow = glow;
  b.pos = p0;
  b.span = p1 - p0;
  s.cache_marks.push_back(b);
  add_caption(s, {(x0 + x1) * 0.5f, kBarY, L.block_w * 0.5f + kLabelDz}, std::move(text), c, p0, std::move(short_text));
}

// Who said what, on the ground in front of the stacks: a strip in the
// role's colour under each message's content (the template's markers have
// none), a thin wall where each turn starts (its user message's header), and
// each turn named under its positions, a row in front of the spans' captions.
void add_turn_marks(Scene& s, const std::vector<ChatTokenTag>& tags, const Layout& L, int n_pos) {
  const float top = L.token_bottom(s.n_layer) + L.token_h;
  for (int p0 = 0; p0 < n_pos;) {  // the strips: runs of one message's content
    const ChatTokenTag& t = tags[static_cast<size_t>(p0)];
    int p1 = p0 + 1;
    while (p1 < n_pos && tags[static_cast<size_t>(p1)].message == t.message &&
           tags[static_cast<size_t>(p1)].role == t.role)
      ++p1;
    if (t.role != ChatRole::kTemplate) {
      const float x0 = L.x(p0) - L.block_w * 0.5f, x1 = L.x(p1 - 1) + L.block_w * 0.5f;
      BlockInstance b;
      b.center = {(x0 + x1) * 0.5f, kBarY, L.block_w * 0.5f + kStripDz};
      b.size = {x1 - x0, kBarH, 0.3f};
      b.colour = glm::vec4(chat_role_colour(t.role), 1.0f);
      b.pos = p0;
      b.span = p1 - p0;
      s.cache_marks.push_back(b);
    }
    p0 = p1;
  }
  for (int p0 = 0; p0 < n_pos;) {  // the turns: a wall where each starts, its name under it
    const int turn = tags[static_cast<size_t>(p0)].turn;
    int p1 = p0 + 1;
    while (p1 < n_pos && tags[static_cast<size_t>(p1)].turn == turn) ++p1;
    const float x0 = L.x(p0) - L.pitch * 0.5f, x1 = L.x(p1 - 1) + L.block_w * 0.5f;
    if (p0 > 0) {
      BlockInstance wall;
      wall.center = {x0, (top + kBarY) * 0.5f, L.block_w * 0.5f};
      wall.size = {0.06f, top - kBarY, L.block_w * 2.0f};
      wall.colour = glm::vec4(0.92f, 0.94f, 1.0f, 1.0f);
      wall.glow = 0.4f;
      wall.pos = p0;
      s.cache_marks.push_back(wall);
    }
    const std::string name = turn == 0 ? "system prompt" : "turn " + std::to_string(turn);
    add_caption(s, {(x0 + x1) * 0.5f, kBarY, L.block_w * 0.5f + kTurnLabelDz}, name, glm::vec3(0.92f, 0.94f, 1.0f), p0,
                turn == 0 ? "system" : "");  // ("turn 2" has no shorter form)
    p0 = p1;
  }
}

}  // namespace

void add_chat_marks(Scene& s, const ChatSceneInput& in, const Layout& layout) {
  s.chat = true;
  if (!in.tags || s.slot < 0) return;
  const std::vector<ChatTokenTag>& tags = *in.tags;
  Layout L = layout;
  L.columns = s.columns;
  for (BlockInstance& b : s.tokens) {
    if (b.pos < 0 || b.pos == s.slot) continue;  // the newest token falls in its own colour
    const ChatRole r = main_role(tags, b.pos, b.pos + b.span);
    glm::vec3 c = chat_role_colour(r);
    if (b.span > 1) c *= 0.8f;
    b.colour = glm::vec4(c, b.colour.a);
  }
  for (Label& l : s.labels)  // the template's markers read as such: their pieces dimmed
    if (l.kind == LabelKind::kToken && l.pos >= 0 && l.pos != s.slot && l.pos < static_cast<int>(tags.size()) &&
        tags[static_cast<size_t>(l.pos)].role == ChatRole::kTemplate)
      l.colour = glm::vec4(0.55f, 0.58f, 0.66f, 1.0f);
  const int n_pos = std::min(s.slot + 1, static_cast<int>(tags.size()));
  const Palette& pal = s.palette;
  const int reused = std::clamp(in.reused, 0, s.seq_len), context = std::clamp(in.context, reused, s.seq_len);
  add_span_bar(s, L, 0, reused, pal.cache_high, 0.0f, "reused from the cache: " + std::to_string(reused),
               "reused " + std::to_string(reused));
  add_span_bar(s, L, reused, context, pal.prefill, 0.3f, "prefilled this turn: " + std::to_string(context - reused),
               "prefill " + std::to_string(context - reused));
  // (the reply's newest token is on the screen, its K/V computed next step)
  const int reply_end = std::min(s.slot + 1, n_pos);
  add_span_bar(s, L, context, reply_end, pal.new_kv, 0.3f, "reply: " + std::to_string(reply_end - context),
               "reply " + std::to_string(reply_end - context));
  // (after the spans: where the ground is crowded, their captions are the ones kept)
  add_turn_marks(s, tags, L, n_pos);
  s.banner = "CHAT \xC2\xB7 TURN " + std::to_string(in.turn) + " \xC2\xB7 " + s.banner;
  s.bounds_max.z = std::max(s.bounds_max.z, L.block_w * 0.5f + kTurnLabelDz + 0.3f);
}

}  // namespace kvscope
