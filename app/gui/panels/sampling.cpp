// The Next-token panel: sampling made visible on the
// shown step's stored logits, and branching by clicking a candidate.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/gui/panels/lesson_panels.h"
#include "app/gui/panels/panels.h"
#include "app/lessons/sampling.h"
#include "app/session/fitting.h"
#include "render/scene/scene_format.h"

namespace kvscope {

namespace {

bool same_settings(const SamplerSettings& a, const SamplerSettings& b) {
  return a.greedy == b.greedy && a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
         a.repetition_penalty == b.repetition_penalty;
}

// The explanation of the shown step, kept in `c` while neither the step nor the settings change.
const PanelMemo::Explain& explain_for(PanelMemo::Explain& c, const EngineState& engine, int step,
                                      const SamplerSettings& settings) {
  const RecordPtr& rec = engine.records()[static_cast<size_t>(step)];
  if (c.rec == rec && same_settings(c.settings, settings) && c.settings.seed == settings.seed) return c;
  c = PanelMemo::Explain();
  c.rec = rec;
  c.settings = settings;
  c.what_if = !same_settings(rec->sampler, settings);
  try {
    const std::vector<int> before = engine.tree.current_history().tokens_before(static_cast<size_t>(step));
    c.e = c.what_if ? explain_with_settings(*rec, before, settings, 10) : explain_record(*rec, before, 10);
    c.ok = true;
  } catch (const std::exception& ex) {
    c.error = ex.what();
  }
  return c;
}

std::string piece_of(const EngineState& engine, int id) {
  if (!engine.model) return std::to_string(id);
  return visible_piece(engine.model->tokenizer.display_piece(id));
}

// A candidate's tooltip: its logit through the penalty, temperature and cuts.
void bar_tooltip(const EngineState& engine, const TokenBar& b, const SamplingExplain& e, bool chosen) {
  begin_wrapped_tooltip();
  ImGui::Text("%s (token %d), rank %d", piece_of(engine, b.token).c_str(), b.token, b.rank + 1);
  ImGui::Text("logit %.3f%s", b.logit_raw, b.penalized ? "" : " (not touched by the penalty)");
  if (b.penalized) ImGui::Text("repetition penalty: logit %.3f -> %.3f", b.logit_raw, b.logit);
  ImGui::Text("before temperature: %.2f%%   after (T = %.2f): %.2f%%", 100.0 * b.p_base, e.temperature,
              100.0 * b.p_temp);
  if (b.cut_by_top_k) ImGui::TextUnformatted("cut by top-k");
  if (b.cut_by_top_p) ImGui::TextUnformatted("cut by top-p");
  if (b.kept()) ImGui::Text("kept: %.2f%% after renormalising", 100.0 * b.p_kept);
  ImGui::TextDisabled(chosen ? "the token this step chose" : "click: force it here (generation forks)");
  end_wrapped_tooltip();
}

// A candidate's percentage after temperature, with what touched or cut it.
std::string bar_tag(const TokenBar& b) {
  return percent_text(b.p_temp, 1) + (b.penalized ? " pen" : "") + (b.cut_by_top_k ? " k" : "") +
         (b.cut_by_top_p ? " p" : "");
}

// Where the candidates' parts go (fit_candidate_rows) and how tall a row is.
struct CandidateLayout {
  CandidateRows fit;
  float row_h = 0, text_h = 0, bar_h = 0;
  float scale = 1;  // bar length per probability: the longest bar fills `fit.bar_w`
};

CandidateLayout candidate_layout(const EngineState& engine, const SamplingExplain& e, float w) {
  float name_w = 0, tag_w = 0, pmax = 0;
  for (const TokenBar& b : e.bars) {
    name_w = std::max(name_w, ImGui::CalcTextSize(piece_of(engine, b.token).c_str()).x);
    tag_w = std::max(tag_w, ImGui::CalcTextSize(bar_tag(b).c_str()).x);
    pmax = std::max({pmax, b.p_temp, b.p_base});
  }
  CandidateLayout l;
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  l.fit = fit_candidate_rows(name_w, tag_w, gap, w, 0.4f * w);
  l.text_h = ImGui::GetTextLineHeight();
  // Stacked: the name's line, then a bar half as tall; else one line with the bar inside it.
  l.bar_h = l.fit.stacked ? std::max(6.0f, 0.5f * l.text_h) : l.text_h - 4;
  l.row_h =
      l.fit.stacked ? l.text_h + l.bar_h + ImGui::GetStyle().ItemSpacing.y + 2 : ImGui::GetTextLineHeightWithSpacing();
  l.scale = pmax > 0 ? l.fit.bar_w / pmax : 0.0f;
  return l;
}

// One candidate's name, bar (before temperature: an outline; after: filled,
// grey when cut) and percentage, from the row's top left `p`, `w` wide.
void draw_candidate(const EngineState& engine, const CandidateLayout& l, ImVec2 p, float w, const TokenBar& b,
                    ImU32 text_col, ImU32 fill, bool would) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const std::string tag = bar_tag(b);
  const float tag_w = ImGui::CalcTextSize(tag.c_str()).x, gap = ImGui::GetStyle().ItemSpacing.x;
  // Stacked, a name may also take what a tag narrower than the widest leaves.
  const std::string name =
      fit_text(piece_of(engine, b.token), l.fit.stacked ? std::max(l.fit.name_w, w - gap - tag_w) : l.fit.name_w);
  dl->AddText(p, text_col, name.c_str());
  const float xb = p.x + l.fit.bar_x, yb = l.fit.stacked ? p.y + l.text_h + 1 : p.y + 2;
  const float w_base = l.scale * b.p_base, w_temp = l.scale * b.p_temp;
  dl->AddRectFilled(ImVec2(xb, yb + 1), ImVec2(xb + std::max(1.0f, w_temp), yb + l.bar_h - 1), fill, 2.0f);
  dl->AddRect(ImVec2(xb, yb - 1), ImVec2(xb + std::max(1.0f, w_base), yb + l.bar_h + 1), IM_COL32(230, 230, 240, 150),
              2.0f);
  if (would)
    dl->AddRect(ImVec2(xb - 2, yb - 2), ImVec2(xb + std::max(4.0f, w_temp) + 2, yb + l.bar_h + 2),
                IM_COL32(255, 200, 80, 255), 2.0f, 0, 2.0f);
  // Stacked: the tag ends the name's line; else it follows the longer bar.
  const float tag_x = l.fit.stacked ? p.x + w - tag_w : xb + std::max(w_temp, w_base) + gap;
  dl->AddText(ImVec2(tag_x, p.y), text_col, tag.c_str());
}

// The top candidates as bars, each readable whole at any sidebar width
// (their names above their bars where one row would cut them); clicking
// one that was not chosen forks the generation there.
void candidate_bars(const EngineState& engine, const PanelMemo::Explain& ex, const StepRecord& r, Commands& cmds,
                    const Palette& pal) {
  const SamplingExplain& e = ex.e;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = ImGui::GetContentRegionAvail().x;
  const CandidateLayout l = candidate_layout(engine, e, w);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  for (size_t i = 0; i < e.bars.size(); ++i) {
    const TokenBar& b = e.bars[i];
    const float y = p0.y + l.row_h * static_cast<float>(i);
    const bool cut = !b.kept();
    const bool chosen = b.token == r.token;               // what the step really chose
    const bool would = ex.what_if && b.token == e.token;  // what these settings would choose
    ImGui::SetCursorScreenPos(ImVec2(p0.x, y));
    ImGui::PushID(static_cast<int>(i));
    const bool clicked = ImGui::InvisibleButton("##cand", ImVec2(w, l.row_h));
    const bool hovered = ImGui::IsItemHovered();
    ImGui::PopID();
    if (hovered) dl->AddRectFilled(ImVec2(p0.x, y), ImVec2(p0.x + w, y + l.row_h), IM_COL32(40, 48, 70, 255), 3.0f);
    const ImU32 text_col = chosen ? to_imcolor(pal.new_token)
                           : cut  ? IM_COL32(95, 100, 115, 255)
                                  : IM_COL32(210, 215, 230, 255);
    const ImU32 fill = cut      ? IM_COL32(70, 74, 86, 255)
                       : chosen ? to_imcolor(pal.new_token)
                                : to_imcolor(pal.cache_high, 0.8f);
    draw_candidate(engine, l, ImVec2(p0.x, y), w, b, text_col, fill, would);
    if (hovered) bar_tooltip(engine, b, e, chosen);
    if (clicked && !chosen) cmds.push_back(cmd::Fork{b.token});
  }
  ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + l.row_h * static_cast<float>(e.bars.size())));
}

// The cumulative bar of what was kept, with the draw that picked the token.
void kept_mass_bar(const EngineState& engine, const SamplingExplain& e, const Palette& pal) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = ImGui::GetContentRegionAvail().x;
  const float ch = ImGui::GetTextLineHeight() * 1.3f;
  const ImVec2 c0 = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(w, ch + 2));
  double lo = 0;
  for (size_t i = 0; i < e.kept.size(); ++i) {
    const double hi = e.cum_hi[i];
    const float x0 = c0.x + static_cast<float>(lo) * w, x1 = c0.x + static_cast<float>(hi) * w;
    const bool is_pick = e.kept[i] == e.token;
    const glm::vec3 base = i % 2 ? pal.cache_low : pal.cache_high * 0.7f;
    dl->AddRectFilled(ImVec2(x0, c0.y), ImVec2(std::max(x0 + 1, x1), c0.y + ch),
                      is_pick ? to_imcolor(pal.new_token) : to_imcolor(base));
    if (x1 - x0 > ImGui::CalcTextSize("MMM").x) {
      dl->PushClipRect(ImVec2(x0, c0.y), ImVec2(x1, c0.y + ch), true);
      dl->AddText(ImVec2(x0 + 2, c0.y + ch * 0.1f), is_pick ? IM_COL32(20, 20, 20, 255) : IM_COL32(230, 235, 245, 255),
                  piece_of(engine, e.kept[i]).c_str());
      dl->PopClipRect();
    }
    lo = hi;
  }
  dl->AddRect(c0, ImVec2(c0.x + w, c0.y + ch), IM_COL32(120, 130, 160, 255));
  char note[128];
  if (e.draw >= 0) {
    const float xd = c0.x + static_cast<float>(e.draw) * w;
    dl->AddTriangleFilled(ImVec2(xd - 6, c0.y - 2), ImVec2(xd + 6, c0.y - 2), ImVec2(xd, c0.y + 6),
                          IM_COL32(255, 255, 255, 255));
    dl->AddLine(ImVec2(xd, c0.y), ImVec2(xd, c0.y + ch), IM_COL32(255, 255, 255, 255), 2.0f);
    std::snprintf(note, sizeof(note), "draw %.3f lands on %s (%zu kept, %.1f%% of the mass)", e.draw,
                  piece_of(engine, e.token).c_str(), e.kept.size(), 100.0 * e.kept_mass);
  } else {
    std::snprintf(note, sizeof(note), "greedy: the top token, no random draw");
  }
  // Wrapped, not drawn at a fixed spot: a narrow sidebar or a large text scale would cut it.
  text_wrapped_coloured(ImVec4(190 / 255.0f, 195 / 255.0f, 210 / 255.0f, 1.0f), note);
}

// The shown step's choice, explained by the sampler's trace under the panel's settings.
void explained_step(const EngineState& engine, UiState& ui, int step, const StepRecord& r, Commands& cmds) {
  const PanelMemo::Explain& ex = explain_for(ui.memo.explain, engine, step, ui.sampler);
  text_wrapped_words("step " + std::to_string(step) + " chose: " + visible_piece(r.piece) + " (" +
                     percent_text(r.prob, 1) + ")");
  if (!ex.ok) {
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.4f, 1), "(%s)", ex.error.c_str());
    return;
  }
  const SamplingExplain& e = ex.e;
  if (!ex.what_if && e.token != r.token) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.8f, 0.4f, 1));
    text_wrapped_wordsf("forced here (a branch): the sampler's draw picked %s", piece_of(engine, e.token).c_str());
    ImGui::PopStyleColor();
  }
  if (ex.what_if) {
    text_wrapped_coloured(ImVec4(1.0f, 0.8f, 0.4f, 1), "what if: these settings would pick " +
                                                           piece_of(engine, e.token) + " (from the stored logits)");
  }
  candidate_bars(engine, ex, r, cmds, palette_for(ui.colour_blind));
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped(
      "outline: before temperature, fill: after; grey: cut (k = top-k, p = top-p); "
      "pen = repetition penalty. Click a token to force it (fork).");
  ImGui::PopStyleColor();
  kept_mass_bar(engine, e, palette_for(ui.colour_blind));
  if (!e.penalized.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    text_wrapped_wordsf("repetition penalty touched %zu tokens of the history", e.penalized.size());
    ImGui::PopStyleColor();
  }
}

// The sampler settings the next steps use (and the bars redraw with now).
void sampler_controls(UiState& ui, Commands& cmds) {
  ImGui::TextWrapped("Sampling (bars redraw now; generation uses it from the next step)");
  bool changed = checkbox_wrapped("greedy (always the top token)", &ui.sampler.greedy);
  ImGui::BeginDisabled(ui.sampler.greedy);
  // Labels inside the sliders: a narrow sidebar (or text scale 2.5) never clips them.
  ImGui::PushItemWidth(-1);
  changed |= ImGui::SliderFloat("##temperature", &ui.sampler.temperature, 0.05f, 2.0f,
                                fitting_label({"temperature %.2f", "temp. %.2f"}));
  changed |= ImGui::SliderInt("##topk", &ui.sampler.top_k, 0, 100, ui.sampler.top_k == 0 ? "top-k off" : "top-k %d");
  changed |= ImGui::SliderFloat("##topp", &ui.sampler.top_p, 0.05f, 1.0f, "top-p %.2f");
  ImGui::EndDisabled();
  changed |= ImGui::SliderFloat("##penalty", &ui.sampler.repetition_penalty, 1.0f, 2.0f,
                                fitting_label({"repetition penalty %.2f", "penalty %.2f"}));
  ImGui::PopItemWidth();
  int seed = static_cast<int>(ui.sampler.seed);
  // The field keeps room for 8 digits and its - + buttons: else its label goes on the line above.
  const float field = ImGui::CalcTextSize("00000000").x + 2 * ImGui::GetFrameHeight() +
                      2 * ImGui::GetStyle().ItemInnerSpacing.x + 2 * ImGui::GetStyle().FramePadding.x;
  const float label = ImGui::CalcTextSize("seed").x + ImGui::GetStyle().ItemInnerSpacing.x;
  const bool above = ImGui::GetContentRegionAvail().x - label < field;
  if (above) ImGui::TextUnformatted("seed");
  ImGui::SetNextItemWidth(above ? -1 : -label);
  if (ImGui::InputInt(above ? "##seed" : "seed", &seed)) {
    ui.sampler.seed = static_cast<uint64_t>(std::max(0, seed));
    changed = true;
  }
  if (changed) cmds.push_back(cmd::SetSampler{ui.sampler});
}

}  // namespace

Commands panel_next_token(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  Commands cmds;
  const bool sample = is_sampling(engine.strategy);
  if (prediction_hidden(engine, ui)) {  // every strategy: the step's tokens, bars, beams and verdicts wait
    ImGui::TextColored(v4(pal.new_token), "next token: ?");
    ImGui::TextWrapped(sample ? "Predict mode: guess the next token, then press Enter (or the button) to reveal it "
                                "and its bars."
                              : "Predict mode: guess what this step chooses, then press Enter (or the button) to "
                                "reveal it.");
    if (ImGui::Button("Reveal (Enter)", ImVec2(-1, 0))) cmds.push_back(cmd::Reveal{});
    if (!sample) return cmds;
    ImGui::Separator();
    sampler_controls(ui, cmds);
    return cmds;
  }
  if (!sample) return panel_decode_step(engine, ui);
  const int step = shown_step_or_note(engine, ui);
  if (step >= 0) {
    explained_step(engine, ui, step, *engine.records()[static_cast<size_t>(step)], cmds);
  }
  ImGui::Separator();
  sampler_controls(ui, cmds);
  return cmds;
}

}  // namespace kvscope
