// The Q·K·V inspector panel: the shown step's attention for one layer and
// head, every number from the engine's records (app/lessons/qkv.h).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app/gui/panels/panels.h"
#include "app/lessons/qkv.h"

namespace kvscope {

namespace {

// A vector as a strip of cells, blue for negative, orange for positive,
// brightness by magnitude relative to the largest.
void vector_strip(const char* id, const std::vector<float>& x) {
  const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetFrameHeight() * 0.7f;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  float mx = 1e-12f;
  for (float v : x) mx = std::max(mx, std::abs(v));
  const float cw = w / static_cast<float>(std::max<size_t>(1, x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = std::sqrt(std::abs(x[i]) / mx);
    const ImU32 c = x[i] >= 0 ? ImGui::ColorConvertFloat4ToU32(ImVec4(1.0f * a, 0.6f * a, 0.15f * a, 1))
                              : ImGui::ColorConvertFloat4ToU32(ImVec4(0.2f * a, 0.55f * a, 1.0f * a, 1));
    dl->AddRectFilled(ImVec2(p0.x + cw * i, p0.y), ImVec2(p0.x + cw * (i + 1), p0.y + h), c);
  }
  ImGui::InvisibleButton(id, ImVec2(w, h));
  if (ImGui::IsItemHovered() && !x.empty()) {
    const int i =
        std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - p0.x) / cw), 0, static_cast<int>(x.size()) - 1);
    ImGui::SetTooltip("[%d] = %.5f", i, x[static_cast<size_t>(i)]);
  }
}

std::string first_values(const float* x, int n, int shown = 6) {
  std::string s = "[";
  char buf[32];
  for (int i = 0; i < std::min(n, shown); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.3f", i ? ", " : "", x[i]);
    s += buf;
  }
  return s + (n > shown ? ", \xE2\x80\xA6]" : "]");
}

void score_table(const EngineState& engine, const QkvInspection& in, const Palette& pal) {
  const float rows = std::min(10.0f, static_cast<float>(in.n()) + 1.5f);
  if (!ImGui::BeginTable("qkv", 4,
                         ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX | ImGuiTableFlags_RowBg |
                             ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit,
                         ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * rows)))
    return;
  // Fixed columns sized to their numbers; a narrow sidebar (text scale 2.5)
  // scrolls them sideways with the key column frozen, rather than cutting
  // them. The weight (what the rays draw) comes first, so it stays in view.
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("key");
  ImGui::TableSetupColumn("weight");
  ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("0.0000").x);
  ImGui::TableSetupColumn("score");
  ImGui::TableHeadersRow();
  float wmax = 1e-9f;
  for (float w : in.weights) wmax = std::max(wmax, w);
  std::vector<int> order(static_cast<size_t>(in.n()));
  for (int j = 0; j < in.n(); ++j) order[static_cast<size_t>(j)] = j;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return in.weights[a] > in.weights[b]; });
  for (const int j : order) {
    const int pos = in.positions[static_cast<size_t>(j)];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const std::string piece =
        pos < static_cast<int>(engine.seq.tokens.size()) ? visible_piece(engine.seq.tokens[pos].piece) : "";
    ImGui::Text("%d %s", pos, piece.c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("k = %s\nv = %s", first_values(in.k_row(j), in.head_dim, 8).c_str(),
                        first_values(in.v_row(j), in.head_dim, 8).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.4f", in.weights[static_cast<size_t>(j)]);
    ImGui::TableNextColumn();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x * in.weights[static_cast<size_t>(j)] / wmax;
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + std::max(1.0f, w), p.y + ImGui::GetTextLineHeight()),
                                              to_imcolor(pal.ray));
    ImGui::Dummy(ImVec2(1, ImGui::GetTextLineHeight()));
    ImGui::TableNextColumn();
    ImGui::Text("%.3f", in.scores[static_cast<size_t>(j)]);
  }
  ImGui::EndTable();
}

}  // namespace

Commands panel_qkv(const EngineState& engine, UiState& ui) {
  Commands cmds;
  if (ui.layer < 0 || ui.head < 0) {
    ImGui::TextWrapped("The attention rays show a mean. Pick one layer and one head to open its arithmetic:");
    if (ImGui::Button("inspect layer 0, head 0", ImVec2(-1, 0)))
      cmds.push_back(cmd::SelectHead{std::max(0, ui.layer), std::max(0, ui.head)});
    return cmds;
  }
  const QkvInspection in = inspect_qkv(engine.records(), shown_step(engine, ui), ui.layer, ui.head);
  if (!in.ok) {
    text_wrapped_words(in.missing);
    return cmds;
  }
  // (its own key and those before it: the banner's "reads N cached K/V rows" counts only the earlier ones)
  if (in.n() > 1)
    text_wrapped_wordsf(
        "layer %d, head %d: the query of position %d against %d keys, its own and %d before it (d = %d)", in.layer,
        in.head, in.query_pos, in.n(), in.n() - 1, in.head_dim);
  else
    text_wrapped_wordsf("layer %d, head %d: the query of position %d against its own key alone (d = %d)", in.layer,
                        in.head, in.query_pos, in.head_dim);
  const ImVec4 dim = ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled);
  text_wrapped_coloured(dim, "q (the new token's query)");
  vector_strip("##q", in.q);
  text_wrapped_wordsf("scores = q\xC2\xB7K^T / \xE2\x88\x9A%d, weights = softmax(scores) (the rays); strongest first:",
                      in.head_dim);
  score_table(engine, in, palette_for(ui.colour_blind));
  text_wrapped_coloured(dim, "output = \xCE\xA3 weight \xC3\x97 v (this head's share, before the projection)");
  vector_strip("##out", in.output);
  text_wrapped_coloured(dim, first_values(in.output.data(), in.head_dim));
  char diff[96];
  std::snprintf(diff, sizeof(diff), "softmax(scores) vs the engine's weights: max difference %.1e",
                static_cast<double>(in.max_weight_diff));
  text_wrapped_coloured(dim, diff);
  return cmds;
}

void kv_rows_tooltip(const EngineState& engine, int layer, int head, int pos, int step) {
  std::vector<float> k, v;
  const int h = std::max(0, head);
  if (!kv_rows_of(engine.records(), step, layer, h, pos, k, v)) return;
  ImGui::Text("head %d: k = %s", h, first_values(k.data(), static_cast<int>(k.size()), 8).c_str());
  ImGui::Text("        v = %s", first_values(v.data(), static_cast<int>(v.size()), 8).c_str());
}

}  // namespace kvscope
