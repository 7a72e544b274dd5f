// The attention overview: every (layer, head)'s causal attention matrix as
// a small heatmap, drawn onto an ImDrawList so `kvscope render --heatmaps`
// draws the same picture.
#include "app/gui/panels/lesson_panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/gui/panels/panels.h"

namespace kvscope {

// --- attention overview ------------------------------------------------------------

namespace {

// The binned causal attention matrix of every (layer, head) up to `step`, kept in `c` per shown step.
const PanelMemo::Heat& heat_matrix(PanelMemo::Heat& c, const std::vector<RecordPtr>& records, int step, int max_bins) {
  const RecordPtr rec = step >= 0 && step < static_cast<int>(records.size()) ? records[step] : nullptr;
  if (c.rec == rec && c.count == records.size() && c.bins == std::min(max_bins, rec ? rec->seq_len : 0)) return c;
  c = PanelMemo::Heat();
  c.rec = rec;
  c.count = records.size();
  if (!rec) return c;
  c.S = rec->seq_len;
  c.L = rec->n_layer;
  c.H = rec->n_head;
  c.bins = std::min(max_bins, c.S);
  const int B = c.bins;
  c.bin_start.resize(static_cast<size_t>(B) + 1);
  for (int b = 0; b <= B; ++b) c.bin_start[b] = static_cast<int>(static_cast<int64_t>(b) * c.S / B);
  std::vector<int> bin_of(static_cast<size_t>(c.S));
  for (int b = 0; b < B; ++b)
    for (int p = c.bin_start[b]; p < c.bin_start[b + 1]; ++p) bin_of[p] = b;
  c.cell.assign(static_cast<size_t>(c.L) * c.H * B * B, 0.0f);
  c.known.assign(static_cast<size_t>(B), 0);
  // Rows of this sequence come from the record that computed them: a record
  // of records [0, step] holds query rows [seq_len - n_rows, seq_len).
  for (int i = 0; i <= step; ++i) {
    const StepRecord& r = *records[i];
    if (r.n_rows <= 0 || r.attn.empty() || r.n_layer != c.L || r.n_head != c.H) continue;
    for (int row = 0; row < r.n_rows; ++row) {
      const int q = r.seq_len - r.n_rows + row;
      if (q < 0 || q >= c.S) continue;
      const int bq = bin_of[q];
      c.known[bq] = 1;
      for (int l = 0; l < c.L; ++l)
        for (int h = 0; h < c.H; ++h) {
          float* out = &c.cell[((static_cast<size_t>(l) * c.H + h) * B + bq) * B];
          for (int k = 0; k <= q && k < r.seq_len; ++k) {
            const float w = r.attention(l, h, row, k);
            float& o = out[bin_of[k]];
            if (w > o) o = w;
          }
        }
    }
  }
  return c;
}

}  // namespace

HeatmapHit draw_heatmap_grid(ImDrawList* dl, ImVec2 p0, ImVec2 size, const std::vector<RecordPtr>& records, int step,
                             int sel_layer, int sel_head, ImVec2 mouse, const ImFont* font, float font_size,
                             const Palette& pal, PanelMemo::Heat& memo) {
  HeatmapHit hit;
  if (step < 0 || step >= static_cast<int>(records.size())) return hit;
  const StepRecord& rec = *records[step];
  const int L = rec.n_layer, H = rec.n_head;
  if (L <= 0 || H <= 0) return hit;
  const float label_w = font_size * 2.2f, label_h = font_size * 1.3f;
  const float gap = std::max(2.0f, font_size * 0.25f);
  const float cw = (size.x - label_w) / static_cast<float>(H) - gap;
  const float ch = (size.y - label_h) / static_cast<float>(L) - gap;
  const float cell = std::max(4.0f, std::min(cw, ch));
  // Bins: about one per 3 pixels, and at most ~60k rectangles for the whole grid.
  int max_bins = std::max(2, static_cast<int>(cell / 3.0f));
  max_bins = std::min(max_bins, std::max(4, static_cast<int>(std::sqrt(60000.0 / (L * H)))));
  const PanelMemo::Heat& hm = heat_matrix(memo, records, step, max_bins);
  if (hm.bins == 0) return hit;
  const int B = hm.bins;
  const float bs = cell / static_cast<float>(B);
  const ImU32 text = IM_COL32(170, 180, 205, 255);
  char buf[16];
  for (int h = 0; h < H; ++h) {
    std::snprintf(buf, sizeof(buf), "H%d", h);
    dl->AddText(font, font_size, ImVec2(p0.x + label_w + h * (cell + gap) + cell * 0.5f - font_size * 0.6f, p0.y),
                h == sel_head ? to_imcolor(pal.ray) : text, buf);
  }
  const glm::vec3 lo = pal.background, hi = pal.ray;
  for (int l = 0; l < L; ++l) {
    const float y0 = p0.y + label_h + l * (cell + gap);
    std::snprintf(buf, sizeof(buf), "L%d", l);
    dl->AddText(font, font_size, ImVec2(p0.x, y0 + cell * 0.5f - font_size * 0.5f),
                l == sel_layer ? to_imcolor(pal.ray) : text, buf);
    for (int h = 0; h < H; ++h) {
      const float x0 = p0.x + label_w + h * (cell + gap);
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + cell, y0 + cell), IM_COL32(14, 16, 26, 255));
      const float* m = &hm.cell[(static_cast<size_t>(l) * H + h) * B * B];
      for (int bq = 0; bq < B; ++bq) {
        if (!hm.known[bq]) continue;
        for (int bk = 0; bk <= bq; ++bk) {
          const float w = m[bq * B + bk];
          if (w <= 0.0f) continue;
          const glm::vec3 c = glm::mix(lo, hi, std::sqrt(std::min(1.0f, w)));
          dl->AddRectFilled(ImVec2(x0 + bk * bs, y0 + bq * bs), ImVec2(x0 + (bk + 1) * bs, y0 + (bq + 1) * bs),
                            to_imcolor(c));
        }
      }
      // The shown step's query row (the newest position).
      const float ry = y0 + (B - 1) * bs;
      dl->AddRect(ImVec2(x0, ry), ImVec2(x0 + cell, ry + bs), IM_COL32(255, 240, 120, 200));
      const bool sel =
          (sel_layer < 0 || sel_layer == l) && (sel_head < 0 || sel_head == h) && !(sel_layer < 0 && sel_head < 0);
      if (sel)
        dl->AddRect(ImVec2(x0 - 2, y0 - 2), ImVec2(x0 + cell + 2, y0 + cell + 2), to_imcolor(pal.ray), 0, 0, 2.0f);
      if (mouse.x >= x0 && mouse.x < x0 + cell && mouse.y >= y0 && mouse.y < y0 + cell) {
        hit.layer = l;
        hit.head = h;
        const int bq = std::clamp(static_cast<int>((mouse.y - y0) / bs), 0, B - 1);
        const int bk = std::clamp(static_cast<int>((mouse.x - x0) / bs), 0, B - 1);
        hit.known = hm.known[bq] != 0;
        if (bk <= bq) {
          hit.query = hm.bin_start[bq];
          hit.key = hm.bin_start[bk];
          hit.weight = m[bq * B + bk];
        }
        dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x0 + cell + 1, y0 + cell + 1), IM_COL32(255, 255, 255, 255));
      }
    }
  }
  return hit;
}

Commands panel_heatmaps(const EngineState& engine, UiState& ui) {
  Commands cmds;
  const int s = shown_step_or_note(engine, ui);
  if (s < 0) return cmds;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The maps first, at least two text lines tall each (so their head labels stay apart), the
  // explanation under them: in a short lesson strip (a large text scale) the lesson scrolls to it.
  const float fs = ImGui::GetFontSize();
  const float rows = static_cast<size_t>(s) < engine.records().size()
                         ? static_cast<float>(engine.records()[static_cast<size_t>(s)]->n_layer)
                         : 1.0f;
  const ImVec2 size(
      avail.x, std::max({60.0f, avail.y - 2 * ImGui::GetTextLineHeightWithSpacing(), fs * 1.3f + rows * fs * 2.3f}));
  ImGui::InvisibleButton("##heat", size);
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = hovered ? ImGui::GetIO().MousePos : ImVec2(-1e9f, -1e9f);
  const HeatmapHit hit =
      draw_heatmap_grid(ImGui::GetWindowDrawList(), p0, size, engine.records(), s, ui.layer, ui.head, mouse,
                        ImGui::GetFont(), ImGui::GetFontSize(), palette_for(ui.colour_blind), ui.memo.heat);
  if (hit.layer >= 0) {
    begin_wrapped_tooltip();
    ImGui::Text("layer %d, head %d (click: show its rays)", hit.layer, hit.head);
    if (hit.query >= 0 && hit.known) {
      auto piece = [&](int p) {
        return p >= 0 && p < static_cast<int>(engine.seq.tokens.size()) ? visible_piece(engine.seq.tokens[p].piece)
                                                                        : std::string("?");
      };
      ImGui::Text("query %d \"%s\" -> key %d \"%s\": weight %.4f", hit.query, piece(hit.query).c_str(), hit.key,
                  piece(hit.key).c_str(), hit.weight);
    } else if (hit.query >= 0) {
      ImGui::TextUnformatted("(this row's attention was dropped by the history's memory budget)");
    }
    end_wrapped_tooltip();
    if (ImGui::IsItemClicked()) {
      cmds.push_back(cmd::SelectHead{hit.layer, hit.head});
    }
  }
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        "Attention of every layer (rows) and head (columns) up to the shown step: row = query "
                        "position, column = key; brightness = sqrt(weight). Click one to show its rays.");
  return cmds;
}

}  // namespace kvscope
