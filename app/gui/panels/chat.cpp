// The chat view's column: the conversation (system prompt, user and
// assistant bubbles, the reply streaming as the engine generates it), the
// message box, the context meter and what each turn cost, counted from the
// records the engine ran. The 3D view beside it shows the same conversation
// as the cache holds it (render/scene/scene_chat.h).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <string>

#include "app/gui/panels/panels.h"
#include "render/scene/scene_chat.h"

namespace kvscope {

namespace {

ChatRole role_of(const std::string& role) {
  return role == "system" ? ChatRole::kSystem : role == "user" ? ChatRole::kUser : ChatRole::kAssistant;
}

// One message: its role in its colour, its text wrapped on a tinted card
// (newlines kept, control characters made visible).
void bubble(const std::string& role, const std::string& label, const std::string& text) {
  const glm::vec3 c = chat_role_colour(role_of(role));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->ChannelsSplit(2);
  dl->ChannelsSetCurrent(1);
  const float pad = ImGui::GetStyle().FramePadding.x;
  ImGui::BeginGroup();
  ImGui::Indent(pad);
  ImGui::TextColored(v4(c), "%s", label.c_str());
  ImGui::PushTextWrapPos(ImGui::GetCursorPos().x + ImGui::GetContentRegionAvail().x - pad);
  size_t from = 0;
  do {
    const size_t end = std::min(text.find('\n', from), text.size());
    ImGui::TextUnformatted(visible_text(text.substr(from, end - from)).c_str());
    from = end + 1;
  } while (from <= text.size());
  ImGui::PopTextWrapPos();
  ImGui::Unindent(pad);
  ImGui::EndGroup();
  dl->ChannelsSetCurrent(0);
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  dl->AddRectFilled(ImVec2(a.x, a.y - 2), ImVec2(a.x + ImGui::GetContentRegionAvail().x, b.y + 2),
                    ImGui::ColorConvertFloat4ToU32(v4(c * 0.22f, 0.9f)), 4.0f);
  dl->ChannelsMerge();
  ImGui::Dummy(ImVec2(0, ImGui::GetStyle().ItemSpacing.y * 0.5f));
}

// The conversation, scrolled to its end when it grew since the last frame.
void message_list(const ChatState& c, UiState& ui, float height) {
  if (!ImGui::BeginChild("##chat_messages", ImVec2(0, height), true)) {
    ImGui::EndChild();
    return;
  }
  const ChatPub& p = c.pub;
  if (p.messages.empty() || p.messages[0].role != "system")
    bubble("system", "system", "(none: the template's own default, if it has one)");
  int turn = 0;
  for (const ChatMessage& m : p.messages) {
    if (m.role == "user") ++turn;
    const std::string label = m.role == "system" ? "system" : m.role + " \xC2\xB7 turn " + std::to_string(turn);
    bubble(m.role, label, m.content);
  }
  const ChatTurn* t = c.turn();
  if (t && !t->done)
    bubble("assistant", "assistant \xC2\xB7 turn " + std::to_string(turn) + " \xC2\xB7 generating",
           p.reply + "\xE2\x96\x8D");
  if (p.messages.size() != ui.chat.shown_messages || p.reply.size() != ui.chat.shown_reply) ImGui::SetScrollHereY(1.0f);
  ui.chat.shown_messages = p.messages.size();
  ui.chat.shown_reply = p.reply.size();
  ImGui::EndChild();
}

// Positions the conversation holds against the model's context, and what a full one means.
void context_meter(const EngineState& engine, Commands& cmds) {
  const ChatState& c = engine.chat;
  const int n_ctx = c.pub.model ? c.pub.model->config.n_positions : 0;
  if (n_ctx <= 0) {
    ImGui::TextDisabled("no conversation yet");
    return;
  }
  const int used = static_cast<int>(c.seq.tokens.size());
  const float f = std::clamp(static_cast<float>(used) / static_cast<float>(n_ctx), 0.0f, 1.0f);
  const glm::vec3 col = f < 0.75f   ? glm::vec3(0.3f, 0.7f, 0.45f)
                        : f < 0.95f ? glm::vec3(0.95f, 0.65f, 0.2f)
                                    : glm::vec3(0.95f, 0.3f, 0.3f);
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, v4(col));
  const std::string full = std::to_string(used) + " / " + std::to_string(n_ctx) + " tokens of context";
  const std::string brief = std::to_string(used) + " / " + std::to_string(n_ctx);
  const float room = ImGui::GetContentRegionAvail().x - 2 * ImGui::GetStyle().FramePadding.x;
  ImGui::ProgressBar(f, ImVec2(-1, 0), (ImGui::CalcTextSize(full.c_str()).x <= room ? full : brief).c_str());
  ImGui::PopStyleColor();
  hover_help(
      "Every turn the model re-reads the whole conversation. When it no longer fits the context, a new message "
      "is refused: drop the oldest question and answer (the system prompt stays), or start over.");
  if (c.pub.refused.empty()) return;
  text_wrapped_coloured(ImVec4(1.0f, 0.55f, 0.5f, 1), "Context full: with your message the conversation is " +
                                                          std::to_string(c.pub.needed) + " tokens, the context holds " +
                                                          std::to_string(c.pub.n_ctx) + ".");
  if (big_button("Drop oldest turn", glm::vec3(0.95f, 0.5f, 0.3f), ImVec2(-1, 0))) cmds.push_back(cmd::ChatDrop{});
}

// What the newest turn cost, from its records as they arrive (TurnEnd once
// done: the same sums): a table where names and values fit side by side,
// else (a large text scale in the column) one sentence that wraps.
void turn_counters(const ChatState& c) {
  const ChatTurn* t = c.turn();
  if (!t) {
    text_wrapped_words("Send a message: the counters show what each turn computed.");
    return;
  }
  long long computed = 0, no_cache = 0;
  for (const RecordPtr& r : c.pub.records) computed += r->seq_len - r->first, no_cache += r->seq_len;
  if (t->done) computed = t->end.computed, no_cache = t->end.no_cache;
  const long long reply = t->done ? t->end.new_tokens : static_cast<long long>(c.pub.records.size());
  const ImVec4 reuse = v4(palette_for(false).cache_high), fresh = v4(palette_for(false).prefill);
  const std::string diverged =
      t->start.diverged > 0 ? " (" + std::to_string(t->start.diverged) + " re-rendered, recomputed)" : "";
  if (ImGui::GetContentRegionAvail().x < ImGui::GetFontSize() * 20.0f) {
    ImGui::TextColored(reuse, "Turn %d: %d reused", t->start.turn, t->start.reused);
    text_wrapped_coloured(fresh, std::to_string(t->start.prefilled) + " prefilled" + diverged);
    text_wrapped_words("computed " + std::to_string(computed) + ", NO CACHE " + std::to_string(no_cache));
    return;
  }
  ImGui::Text("Turn %d%s", t->start.turn, t->done ? "" : " (generating)");
  if (!begin_counters("##chat_turn")) return;
  counter_row("reused from the cache", std::to_string(t->start.reused) + " positions", &reuse);
  counter_row("prefilled this turn", std::to_string(t->start.prefilled) + " positions" + diverged, &fresh);
  counter_row("reply", std::to_string(reply) + " tokens");
  counter_row("forwards computed", std::to_string(computed) + " positions");
  counter_row("NO CACHE would compute", std::to_string(no_cache) + " positions");
  ImGui::EndTable();
}

// Every turn since the conversation started: the second question is cheap only because of the cache.
void turn_table(const ChatState& c) {
  if (c.pub.turns.size() < 2) return;
  if (!ImGui::BeginTable("##chat_turns", 4, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) return;
  for (const char* h : {"turn", "reused", "prefilled", "NO CACHE"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const ChatTurn& t : c.pub.turns) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", t.start.turn);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(std::to_string(t.start.reused).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(std::to_string(t.start.prefilled).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(t.done ? std::to_string(t.end.no_cache).c_str() : "\xE2\x80\xA6");
  }
  ImGui::EndTable();
  hover_help("NO CACHE: the positions recomputed if nothing were kept: the whole conversation at every token.");
}

// The message box and its buttons (Enter sends; nothing is sent while a reply is generating).
void input_rows(const EngineState& engine, UiState& ui, Commands& cmds) {
  const bool generating = engine.chat.pub.generating;
  const float send_w = ImGui::CalcTextSize("Send").x + 2 * ImGui::GetStyle().FramePadding.x;
  ImGui::SetNextItemWidth(-(send_w + ImGui::GetStyle().ItemSpacing.x));
  const bool enter =
      ImGui::InputTextWithHint("##chat_input", "Your message", &ui.chat.input, ImGuiInputTextFlags_EnterReturnsTrue);
  if (!ImGui::IsItemActive()) hover_help("Type a message; Enter sends it.");
  if (enter) ImGui::SetKeyboardFocusHere(-1);  // keep typing after Enter
  ImGui::SameLine();
  ImGui::BeginDisabled(generating || ui.chat.input.empty());
  if (ImGui::Button("Send", ImVec2(-1, 0)) || (enter && !generating && !ui.chat.input.empty()))
    cmds.push_back(cmd::ChatSend{ui.chat.input});
  ImGui::EndDisabled();
  if (generating) ImGui::TextDisabled("generating the reply\xE2\x80\xA6");
  // Reset at its own width, Drop oldest turn taking the rest of the row (a shorter label where it would not fit).
  const float spacing = ImGui::GetStyle().ItemSpacing.x, pad = 2 * ImGui::GetStyle().FramePadding.x;
  const float reset_w = ImGui::CalcTextSize("Reset").x + pad,
              room = ImGui::GetContentRegionAvail().x - reset_w - spacing;
  const char* drop = ImGui::CalcTextSize("Drop oldest turn").x + pad <= room ? "Drop oldest turn" : "Drop oldest";
  if (ImGui::Button("Reset", ImVec2(reset_w, 0))) cmds.push_back(cmd::ChatReset{});
  hover_help("Start over: only the system prompt stays, and the cache is emptied.");
  ImGui::SameLine();
  if (ImGui::Button(drop, ImVec2(-1, 0))) cmds.push_back(cmd::ChatDrop{});
  hover_help("Drop the first question and its answer; the next turn recomputes everything after them.");
}

const char* const kFormatNames[] = {"the model's own", "ChatML", "Llama 3", "Zephyr", "Mistral"};

// The template (the model's own or a built-in one), the system prompt and the reply's length.
void settings(const EngineState& engine, UiState& ui, Commands& cmds) {
  const ChatState& c = engine.chat;
  if (!c.template_error.empty()) {
    text_wrapped_coloured(ImVec4(1.0f, 0.7f, 0.4f, 1), c.template_error);
    text_wrapped_words("Use a built-in format instead:");
    for (int f = 1; f <= kChatFormats; ++f) {
      if (ImGui::Button((std::string("Use ") + kFormatNames[f]).c_str(), ImVec2(-1, 0)))
        cmds.push_back(cmd::ChatSetFormat{f});
    }
    return;
  }
  ImGui::TextUnformatted("Template");
  ImGui::SetNextItemWidth(-1);
  const int cur = std::clamp(ui.chat_format, 0, kChatFormats);
  if (ImGui::BeginCombo("##chat_format", kFormatNames[cur])) {
    for (int f = 0; f <= kChatFormats; ++f)
      if (ImGui::Selectable(kFormatNames[f], f == cur) && f != cur) cmds.push_back(cmd::ChatSetFormat{f});
    ImGui::EndCombo();
  }
  if (!c.pub.origin.empty()) hover_help(("from " + c.pub.origin + "; choosing another starts over").c_str());
  ImGui::TextUnformatted("System prompt");
  ImGui::InputTextMultiline("##chat_system", &ui.chat.system_edit, ImVec2(-1, ImGui::GetTextLineHeight() * 2.6f));
  ImGui::BeginDisabled(ui.chat.system_edit == ui.chat_system);
  if (ImGui::Button("Use this system prompt (starts over)", ImVec2(-1, 0)))
    cmds.push_back(cmd::ChatSystem{ui.chat.system_edit});
  ImGui::EndDisabled();
  ImGui::SetNextItemWidth(-1);
  const int hi = std::min(512, c.pub.model ? c.pub.model->config.n_positions : 512);
  ImGui::SliderInt("##chat_max_new", &ui.chat_max_new, 1, std::max(1, hi), "reply: at most %d tokens");
}

}  // namespace

void chat_tooltip(const ChatState& c, int pos) {
  if (pos < 0 || pos >= static_cast<int>(c.seq.tokens.size()) || pos >= static_cast<int>(c.tags.size())) return;
  const ChatTokenTag& t = c.tags[static_cast<size_t>(pos)];
  const ChatTurn* turn = c.turn();
  begin_wrapped_tooltip();
  ImGui::Text("position %d: \"%s\"", pos, visible_piece(c.seq.tokens[static_cast<size_t>(pos)].piece).c_str());
  const std::string who = t.role == ChatRole::kTemplate ? "the template's marker text" : to_string(t.role);
  ImGui::TextColored(v4(chat_role_colour(t.role)), "%s, %s", who.c_str(),
                     t.turn == 0 ? "the system prompt" : ("turn " + std::to_string(t.turn)).c_str());
  if (turn) {
    const char* how = pos < turn->start.reused    ? "reused from the cache (computed in an earlier turn)"
                      : pos < turn->start.context ? "prefilled this turn"
                                                  : "generated by this turn's reply";
    ImGui::TextUnformatted(how);
  }
  end_wrapped_tooltip();
}

Commands panel_chat(const EngineState& engine, UiState& ui) {
  Commands cmds;
  // Back, then the context meter on the same row (a large text scale keeps the arrow only).
  const ImGuiStyle& st = ImGui::GetStyle();
  const char* back = "\xE2\x97\x80 Back";
  for (const char* label : {"\xE2\x97\x80 Back to generation", "\xE2\x97\x80 Back", "\xE2\x97\x80"}) {
    back = label;
    if (ImGui::CalcTextSize(label).x + 2 * st.FramePadding.x <= ImGui::GetContentRegionAvail().x * 0.4f) break;
  }
  if (ImGui::Button(back)) cmds.push_back(cmd::ChatOpen{false});
  hover_help("Back to the generation's panels (the conversation stays).");
  ImGui::SameLine();
  context_meter(engine, cmds);
  turn_counters(engine.chat);
  // The messages take what the rows under them leave, at least four lines.
  const float below = 2 * ImGui::GetFrameHeightWithSpacing() + st.ItemSpacing.y +
                      (engine.chat.pub.generating ? ImGui::GetTextLineHeightWithSpacing() : 0.0f);
  const float h = std::max(ImGui::GetContentRegionAvail().y - below, 4 * ImGui::GetTextLineHeightWithSpacing());
  message_list(engine.chat, ui, h);
  input_rows(engine, ui, cmds);
  ImGui::Separator();
  turn_table(engine.chat);
  settings(engine, ui, cmds);
  return cmds;
}

}  // namespace kvscope
