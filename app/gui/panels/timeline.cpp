// The timeline and the branches: scrubbing the generation, the history's
// memory budget, and the tree of explored forks with the FLOPs they saved.
#include "app/gui/panels/lesson_panels.h"

#include <imgui.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/session/fitting.h"
#include "model/core/units.h"
#include "render/scene/scene.h"

namespace kvscope {

namespace {

std::string one_line(const std::string& s, size_t max_chars) {
  std::string out;
  for (char ch : s) out += (ch == '\n' || ch == '\r' || ch == '\t') ? ' ' : ch;
  if (out.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    out = out.substr(0, cut) + "\xE2\x80\xA6";
  }
  return out;
}

}  // namespace

// --- timeline -----------------------------------------------------------------

HistoryText history_text(const EngineState& engine) {
  HistoryText h;
  const TrimReport& t = engine.tree.trimmed();
  const std::string held = format_bytes(engine.tree.bytes()), budget = format_bytes(engine.tree.budget());
  h.trimmed = t.any();
  h.brief = "history " + held + " of " + budget + (h.trimmed ? ", oldest trimmed" : "");
  if (h.trimmed) {
    std::string dropped = t.beam_tokens_dropped > 0
                              ? "beam sequences of " + std::to_string(t.beam_tokens_dropped) + " oldest steps dropped"
                              : "attention of " + std::to_string(t.attention_dropped) +
                                    " oldest steps dropped, logits of " + std::to_string(t.logits_dropped) +
                                    ", K/V of " + std::to_string(t.kv_dropped) +
                                    (t.pages_dropped > 0 ? ", pages of " + std::to_string(t.pages_dropped) : "");
    h.full = "history " + held + " of " + budget + ": " + dropped;
  } else {
    const size_t n = engine.tree.size();
    h.full = "history " + held + " of the " + budget + " budget, every step in full detail (" + std::to_string(n) +
             (n == 1 ? " branch)" : " branches)");
  }
  return h;
}

Commands panel_timeline(const EngineState& engine, UiState& ui, float reserve) {
  Commands cmds;
  const int n = engine.timeline_size();
  const int s = shown_step(engine, ui);
  // Room for the step counter as wide as it gets in this generation ("0000 / 0000 PAST" at most).
  const std::string widest = std::string(std::to_string(std::max(n - 1, 0)).size(), '0');
  const float spacing = ImGui::GetStyle().ItemSpacing.x, fh = ImGui::GetFrameHeight();
  // The counter with its word while the row has room, else the numbers alone (the colour and the tooltip
  // still tell LIVE from PAST): a narrow strip at a large text scale pushed the lessons button off its end.
  const std::vector<float> counter = {std::max(ImGui::CalcTextSize((widest + " / " + widest + " LIVE").c_str()).x,
                                               ImGui::CalcTextSize((widest + " / " + widest + " PAST").c_str()).x),
                                      ImGui::CalcTextSize((widest + "/" + widest).c_str()).x};
  // Wide buttons and a slider of two frames while they fit; in a strip narrower than that (a phone at
  // text scale 2.5) square buttons and a shorter slider, so the counter stays on the row.
  // The narrowest form (still too narrow for that) leaves out the counter (its numbers in the slider's
  // tooltip) and packs the row tight.
  const float row = ImGui::GetContentRegionAvail().x - reserve;
  const bool narrow = 2 * fh * 1.6f + 2 * fh + counter[1] + 3 * spacing > row;
  const bool tight = narrow && 2 * fh + fh * 1.2f + counter[1] + 3 * spacing > row;
  const float bw = narrow ? fh : fh * 1.6f, min_slider = narrow ? fh * 1.2f : fh * 2;
  const float gap = tight ? spacing * 0.25f : spacing;
  ImGui::BeginDisabled(n == 0 || s <= 0);
  if (ImGui::Button("\xE2\x97\x80##back", ImVec2(bw, 0))) cmds.push_back(cmd::Scrub{-1});
  ImGui::EndDisabled();
  ImGui::SameLine(0, gap);
  // (the slider and the counter share what the two buttons leave)
  const float rest = row - 2 * bw - 3 * gap;
  const bool brief = fit_row({{min_slider}, counter}, spacing, rest, {1})[1] == 1;
  const float info_w = tight ? -gap : counter[brief ? 1 : 0];
  ImGui::SetNextItemWidth(std::max(tight ? fh : min_slider, rest - info_w - gap));
  int step = std::max(0, s);
  ImGui::BeginDisabled(n <= 1);
  // The number alone: "step %d" in a slider narrowed by a large text scale was cut to "step 2" at step 23.
  if (ImGui::SliderInt("##timeline", &step, 0, std::max(0, n - 1), n == 0 ? "-" : "%d")) {
    cmds.push_back(cmd::ScrubTo{step});
  }
  ImGui::EndDisabled();
  const bool live = ui.view_step < 0 || s == n - 1;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "%sScrub through the generation: scene, rays, cache, counters and bars show that step.\n"
        "Step 0 is the prefill (the whole prompt in one forward), which chose the first new token; "
        "step s chose new token s + 1.\n"
        "\xE2\x86\x90 / \xE2\x86\x92 one step, Shift+arrow 10 steps; \xE2\x86\x92 at the newest step "
        "computes the next one.",
        tight && n > 0 ? (std::to_string(s) + " / " + std::to_string(n - 1) + (live ? " LIVE\n" : " PAST\n")).c_str()
                       : "");
  ImGui::SameLine(0, gap);
  ImGui::BeginDisabled(n == 0);
  if (ImGui::Button("\xE2\x96\xB6##fwd", ImVec2(bw, 0))) {
    cmds.push_back(cmd::Scrub{1});
  }
  ImGui::EndDisabled();
  if (n > 0 && !tight) {
    ImGui::SameLine();
    const ImVec4 colour = live ? ImVec4(0.45f, 1.0f, 0.55f, 1) : ImVec4(1.0f, 0.8f, 0.4f, 1);
    if (brief)
      ImGui::TextColored(colour, "%d/%d", s, n - 1);
    else
      ImGui::TextColored(colour, "%d / %d %s", s, n - 1, live ? "LIVE" : "PAST");
    hover_help(((brief ? (live ? "LIVE: the newest step\n" : "PAST: an earlier step\n") : std::string()) + "step " +
                std::to_string(s) + " of 0\xE2\x80\x93" + std::to_string(n - 1) +
                ": step 0 is the prefill, which chose the first new token\n" + history_text(engine).full)
                   .c_str());
  }
  return cmds;
}

// --- branches -------------------------------------------------------------------

namespace {

// What forking does and what it saved: over every fork, then the current branch's.
void branches_summary(const EngineState& engine, const Palette& pal) {
  text_wrapped_wordsf(
      "Click a candidate in the Next-token panel to force it at the shown step: generation forks there. "
      "Click a branch to return to it.");
  const uint64_t saved = engine.tree.flops_saved_total();
  text_wrapped_coloured(v4(pal.cache_high), "FLOPs saved by reusing the KV cache at forks: " + format_flops(saved));
  const Branch& cur = engine.tree.current_branch();
  if (cur.parent >= 0) {
    const ForkCost& f = cur.fork;
    if (f.cache_reused)
      text_wrapped_wordsf("this branch: cache cut back to %d positions and kept; its first step cost %s instead of %s",
                          f.reused_positions, format_flops(f.flops_reuse).c_str(),
                          format_flops(f.flops_recompute).c_str());
    else
      text_wrapped_wordsf("this branch: every position recomputed (%s): %s", f.fork_pos > 0 ? "no reusable cache" : "",
                          format_flops(f.flops_recompute).c_str());
    ImGui::Text("shares %d positions with its parent", engine.tree.shared_positions(cur.id, cur.parent));
  }
}

}  // namespace

Commands panel_branches(const EngineState& engine, UiState& ui) {
  Commands cmds;
  if (engine.tree.size() == 0) {
    ImGui::TextDisabled("(no generation yet)");
    return cmds;
  }
  branches_summary(engine, palette_for(ui.colour_blind));
  ImGui::Separator();
  // In a narrow column (text scale 2.5) each branch's numbers go on a line
  // under its text instead of squeezing either into a cut column.
  const bool narrow = ImGui::GetContentRegionAvail().x < 24 * ImGui::GetFontSize();
  if (ImGui::BeginTable(
          "branches", narrow ? 1 : 3,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_ScrollY,
          ImVec2(0, std::max(ImGui::GetTextLineHeightWithSpacing() * 3, ImGui::GetContentRegionAvail().y)))) {
    ImGui::TableSetupColumn(narrow ? "branch" : "branch (generated text)", ImGuiTableColumnFlags_WidthStretch, 5.0f);
    if (!narrow) {
      ImGui::TableSetupColumn("probability", ImGuiTableColumnFlags_WidthStretch, 1.2f);
      ImGui::TableSetupColumn("tokens", ImGuiTableColumnFlags_WidthStretch, 0.8f);
    }
    ImGui::TableHeadersRow();
    // Predict mode: the branch on screen without its newest token (nor the probability that includes it).
    const bool hidden = prediction_hidden(engine, ui) && !engine.records().empty();
    for (const TreeRow& row : engine.tree.rows()) {
      const Branch& b = engine.tree.branch(row.id);
      const bool guessing = hidden && b.id == engine.tree.current();
      std::string text = b.text;
      if (guessing) {
        const std::string& newest = engine.records().back()->raw_piece;
        if (text.size() >= newest.size() && text.compare(text.size() - newest.size(), newest.size(), newest) == 0)
          text.resize(text.size() - newest.size());
        text += " ?";
      }
      text = visible_text(text);  // bytes cut mid-character and control characters as \xNN, as on the text line
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      std::string label(static_cast<size_t>(row.depth) * 2, ' ');
      label += row.depth > 0 ? "\xE2\x94\x94 " : "";
      label += b.parent < 0 ? "root: " : "@" + std::to_string(b.fork_step) + ": ";
      label += "\"" + one_line(text, 60) + "\"";
      label += "##b" + std::to_string(b.id);
      const bool current = b.id == engine.tree.current();
      if (ImGui::Selectable(label.c_str(), current, ImGuiSelectableFlags_SpanAllColumns) && !current) {
        cmds.push_back(cmd::SelectBranch{b.id});
      }
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
        ImGui::TextUnformatted(text.c_str());
        ImGui::PopTextWrapPos();
        if (b.parent >= 0)
          ImGui::Text("forked at step %d; fork saved %s", b.fork_step, format_flops(b.fork.flops_saved).c_str());
        ImGui::EndTooltip();
      }
      if (narrow) {
        if (guessing)
          ImGui::TextDisabled("p ? \xC2\xB7 %d tokens", b.n_generated());
        else
          ImGui::TextDisabled("p %.3g \xC2\xB7 %d tokens", b.prob(), b.n_generated());
        continue;
      }
      ImGui::TableSetColumnIndex(1);
      if (guessing)
        ImGui::TextUnformatted("?");
      else
        ImGui::Text("%.3g", b.prob());
      ImGui::TableSetColumnIndex(2);
      ImGui::Text("%d", b.n_generated());
    }
    ImGui::EndTable();
  }
  return cmds;
}

}  // namespace kvscope
