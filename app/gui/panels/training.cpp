// The Training tab: the loaded model's own training run
// (app/lessons/training.h) — its loss curve with the checkpoints it kept marked,
// and one click to run the same prompt with the weights of that moment.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/gui/panels/panels.h"
#include "app/lessons/training.h"
#include "model/core/units.h"

namespace kvscope {

namespace {

const ImU32 kTrainColour = IM_COL32(120, 190, 255, 255);
const ImU32 kValColour = IM_COL32(255, 170, 60, 255);
const ImU32 kGuessColour = IM_COL32(150, 160, 185, 200);
const ImU32 kAxisText = IM_COL32(170, 178, 200, 255);

// "step 300", the last one "final: step 2200".
std::string checkpoint_label(const TrainingRecord& r, size_t i) {
  return (i + 1 == r.checkpoints.size() ? "final: step " : "step ") + std::to_string(r.checkpoints[i].step);
}

void checkpoint_tooltip(const TrainingRecord& r, size_t i, int slice, bool loaded) {
  const TrainingCheckpoint& c = r.checkpoints[i];
  ImGui::SetTooltip("%s of %d, after %s training tokens\nvalidation loss %.2f nats/token\n%s",
                    checkpoint_label(r, i).c_str(), r.total_steps, format_si(static_cast<double>(c.tokens)).c_str(),
                    validation_loss(c.val, slice),
                    loaded ? "(loaded)" : "click: the same prompt and seed with these weights");
}

void dashed_hline(ImDrawList* dl, float x0, float x1, float y, ImU32 col) {
  for (float x = x0; x < x1; x += 10.0f) dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 5.0f, x1), y), col, 1.0f);
}

// Axes, the curves, the uniform-guess line and the checkpoint marks; returns
// the checkpoint clicked (-1: none).
int loss_plot(const TrainingRecord& r, const EngineState& engine, int slice, ImVec2 size) {
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##loss", size);
  const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p1(p0.x + size.x, p0.y + size.y);
  dl->AddRectFilled(p0, p1, IM_COL32(10, 12, 20, 255), 3.0f);
  dl->AddRect(p0, p1, IM_COL32(60, 68, 90, 255), 3.0f);
  const float fh = ImGui::GetFontSize(), left = ImGui::CalcTextSize("8.8").x + 10.0f;
  const PlotRect rect{p0.x + left, p0.y + fh * 0.6f, size.x - left - 12.0f, size.y - fh * 2.0f};
  const double guess = engine.model ? std::log(static_cast<double>(engine.model->config.vocab_size)) : NAN;
  const TrainingPlot p = layout_training_plot(r, slice, rect, guess);
  auto y_at = [&](double loss) { return rect.y + rect.h * static_cast<float>((p.y_hi - loss) / (p.y_hi - p.y_lo)); };
  char buf[64];
  for (double v : {0.0, p.y_hi / 1.08 / 2, p.y_hi / 1.08}) {  // loss axis
    std::snprintf(buf, sizeof buf, "%.1f", v);
    dl->AddText(ImVec2(p0.x + 4, y_at(v) - fh * 0.5f), kAxisText, buf);
    dl->AddLine(ImVec2(rect.x, y_at(v)), ImVec2(rect.x + rect.w, y_at(v)), IM_COL32(40, 46, 62, 255));
  }
  if (r.total_steps > p.step_hi)  // a run exported before it finished
    std::snprintf(buf, sizeof buf, "step %d (of %d planned)", p.step_hi, r.total_steps);
  else
    std::snprintf(buf, sizeof buf, "step %d", p.step_hi);
  // The first step's tick as "step 0", or "0", where it keeps clear of the last one's.
  const float room = rect.w - ImGui::CalcTextSize(buf).x - fh;
  const char* first = ImGui::CalcTextSize("step 0").x <= room ? "step 0"
                      : ImGui::CalcTextSize("0").x <= room    ? "0"
                                                              : "";
  dl->AddText(ImVec2(rect.x, rect.y + rect.h + 2), kAxisText, first);
  dl->AddText(ImVec2(rect.x + rect.w - ImGui::CalcTextSize(buf).x, rect.y + rect.h + 2), kAxisText, buf);
  if (std::isfinite(guess)) {
    dashed_hline(dl, rect.x, rect.x + rect.w, y_at(guess), kGuessColour);
    std::snprintf(buf, sizeof buf, "ln %d = %.2f", engine.model->config.vocab_size, guess);
    const ImVec2 ts = ImGui::CalcTextSize(buf);
    dl->AddText(ImVec2(rect.x + rect.w - ts.x, y_at(guess) + 2), kGuessColour, buf);
  }
  const char* title = ImGui::CalcTextSize("loss (nats/token)").x <= rect.w - 12 ? "loss (nats/token)" : "loss";
  dl->AddText(ImVec2(rect.x + 6, rect.y + rect.h - fh * 1.1f), kAxisText, title);
  auto line = [&](const std::vector<PlotPoint>& pts, ImU32 col) {
    for (size_t i = 1; i < pts.size(); ++i)
      dl->AddLine(ImVec2(pts[i - 1].x, pts[i - 1].y), ImVec2(pts[i].x, pts[i].y), col, 2.5f);
  };
  line(p.train, kTrainColour);
  line(p.val, kValColour);
  const int hover = hovered ? pick_checkpoint(p, ImGui::GetIO().MousePos.x, fh * 1.2f) : -1;
  for (size_t i = 0; i < p.marks.size(); ++i) {
    const bool loaded = static_cast<int>(i) == engine.checkpoint, hot = static_cast<int>(i) == hover;
    const ImVec2 m(p.marks[i].x, p.marks[i].y);
    dl->AddLine(ImVec2(m.x, rect.y), ImVec2(m.x, rect.y + rect.h), IM_COL32(255, 240, 120, loaded ? 200 : 70), 1.0f);
    dl->AddCircleFilled(m, loaded || hot ? 7.0f : 5.0f, loaded ? IM_COL32(255, 240, 120, 255) : kValColour);
    dl->AddCircle(m, loaded || hot ? 7.0f : 5.0f, IM_COL32(0, 0, 0, 255), 0, 1.5f);
  }
  if (hover >= 0) checkpoint_tooltip(r, static_cast<size_t>(hover), slice, hover == engine.checkpoint);
  return clicked ? hover : -1;
}

void legend_entry(ImU32 col, const char* text) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetFontSize(), w = h * 1.6f;
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + h * 0.55f), ImVec2(p.x + w, p.y + h * 0.55f), col, 3.0f);
  ImGui::Dummy(ImVec2(w, h));
  ImGui::SameLine();
  text_wrapped_words(text);  // (a narrow lessons column at a large text scale)
}

// Diffuse or structured: the shown step's attention, in one line.
void spread_line(const EngineState& engine, const UiState& ui) {
  const int s = shown_step(engine, ui);
  if (s < 0) return;
  const AttentionSpread a = attention_spread(*engine.records()[static_cast<size_t>(s)]);
  text_wrapped_wordsf("Step %d attention: %.1f bits/head (even spread: %.1f), top ray %.0f%%", s, a.mean_bits,
                      a.uniform_bits, 100.0 * a.mean_top);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "How spread out the newest token's attention is, mean over layers and heads:\n"
        "the entropy of each head's weights over the %d keys (0 bits: one key gets everything,\n"
        "%.1f bits: every key the same), and the largest weight. Compare the checkpoints:\n"
        "the same prompt and step, only the weights differ.",
        a.keys, a.uniform_bits);
}

// The checkpoints as buttons, the loaded one lit; the slice the curve shows.
void checkpoint_list(const TrainingRecord& r, const EngineState& engine, int slice, UiState& ui, Commands& cmds) {
  for (size_t i = 0; i < r.checkpoints.size(); ++i) {
    const bool loaded = static_cast<int>(i) == engine.checkpoint;
    const std::string label = (loaded ? "\xE2\x96\xB6 " : "   ") + checkpoint_label(r, i);
    ImGui::BeginDisabled(engine.loading_model);
    if (ImGui::Selectable(label.c_str(), loaded) && !loaded) cmds.push_back(cmd::LoadCheckpoint{static_cast<int>(i)});
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) checkpoint_tooltip(r, i, slice, loaded);
  }
  const int last = static_cast<int>(r.checkpoints.size()) - 1;
  ImGui::BeginDisabled(engine.loading_model || engine.checkpoint == last);
  if (ImGui::Button("Back to final")) cmds.push_back(cmd::LoadCheckpoint{last});
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("back to the final model");
  ImGui::EndDisabled();
  const std::string current = ui.training_slice < 0 || ui.training_slice >= static_cast<int>(r.slices.size())
                                  ? "all texts"
                                  : r.slices[static_cast<size_t>(ui.training_slice)];
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##slice", current.c_str())) {
    if (ImGui::Selectable("all texts (mean)", ui.training_slice < 0)) ui.training_slice = -1;
    for (size_t i = 0; i < r.slices.size(); ++i)
      if (ImGui::Selectable(r.slices[i].c_str(), ui.training_slice == static_cast<int>(i)))
        ui.training_slice = static_cast<int>(i);
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the held-out text the validation curve is measured on");
}

}  // namespace

namespace {

// The loss curve (`plot_h` tall, clicking a checkpoint loads it), its legend and the attention line.
void loss_column(const TrainingRecord& r, const EngineState& engine, const UiState& ui, int slice, float plot_h,
                 Commands& cmds) {
  const int clicked = loss_plot(r, engine, slice, ImVec2(ImGui::GetContentRegionAvail().x, plot_h));
  if (clicked >= 0 && clicked != engine.checkpoint && !engine.loading_model)
    cmds.push_back(cmd::LoadCheckpoint{clicked});
  legend_entry(kTrainColour, "training");
  const char* val = "validation (held-out text)";
  same_line_if_fits(ImGui::GetFontSize() * 1.6f + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(val).x);
  legend_entry(kValColour, val);
  spread_line(engine, ui);
}

// The checkpoints to load, and what loading one did.
void checkpoint_column(const TrainingRecord& r, const EngineState& engine, UiState& ui, int slice, Commands& cmds) {
  const Palette& pal = palette_for(ui.colour_blind);
  text_wrapped_wordsf("Same prompt, same seed, weights from:");
  checkpoint_list(r, engine, slice, ui, cmds);
  if (engine.loading_model) ImGui::TextDisabled("loading the weights\xE2\x80\xA6");
  if (!engine.model_error.empty()) {  // a checkpoint folder that did not load (the Model panel has it too)
    ImGui::PushStyleColor(ImGuiCol_Text, v4(pal.recomputed));
    text_wrapped_wordsf("Could not load: %s", engine.model_error.c_str());
    ImGui::PopStyleColor();
  }
}

}  // namespace

Commands panel_training(const EngineState& engine, UiState& ui) {
  Commands cmds;
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 240, 120, 255));
  text_wrapped_wordsf("During inference the weights are frozen; training is what changed them.");
  ImGui::PopStyleColor();
  if (!engine.training && !ui.training_fetch.empty()) {
    text_wrapped_wordsf("%s", ui.training_fetch.c_str());
    return cmds;
  }
  if (!engine.training) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    text_wrapped_wordsf("%s has no training checkpoints (a model exported with its run has a training.json beside it).",
                        engine.model ? engine.model->name.c_str() : "No model");
    ImGui::PopStyleColor();
    return cmds;
  }
  const TrainingRecord& r = *engine.training;
  const int slice = ui.training_slice < static_cast<int>(r.slices.size()) ? ui.training_slice : -1;
  const float line = ImGui::GetTextLineHeightWithSpacing();
  // The checkpoints beside the curve where both keep their room (about 30 characters), else
  // under it: a narrow lessons column at a large text scale squeezed the curve's labels into
  // each other and broke the list's words letter by letter.
  if (ImGui::GetContentRegionAvail().x < ImGui::GetFontSize() * 30.0f) {
    loss_column(r, engine, ui, slice, ImGui::GetFontSize() * 6.0f, cmds);
    checkpoint_column(r, engine, ui, slice, cmds);
    return cmds;
  }
  const float list_w = std::min(ImGui::GetContentRegionAvail().x * 0.36f, ImGui::GetFontSize() * 11.0f);
  const float plot_h = std::max(ImGui::GetFontSize() * 6.0f, ImGui::GetContentRegionAvail().y - line * 2.3f);
  if (!ImGui::BeginTable("##training", 2, ImGuiTableFlags_SizingStretchProp)) return cmds;
  ImGui::TableSetupColumn("curve", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("checkpoints", ImGuiTableColumnFlags_WidthFixed, list_w);
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  loss_column(r, engine, ui, slice, plot_h, cmds);
  ImGui::TableSetColumnIndex(1);
  ImGui::BeginChild("##checkpoints", ImVec2(0, plot_h + line));
  checkpoint_column(r, engine, ui, slice, cmds);
  ImGui::EndChild();
  ImGui::EndTable();
  return cmds;
}

}  // namespace kvscope
