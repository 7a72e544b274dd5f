// The presentation-mode HUD (F5): the card with the next token and its
// candidates, the step strip and the keys, sized to fit at any text scale.
#include "panel_teach.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "units.h"

namespace kvscope {

// --- presentation HUD ----------------------------------------------------------------

namespace {

// The step line and the keys of the presentation strip.
std::string hud_line(const HudInfo& hud) {
  const StepRecord* r = hud.record;
  if (!r) return hud.model_name;
  char line[320];
  std::snprintf(line, sizeof(line), "%s   step %d / %d%s   %s   %d positions   %s this step   cache %s",
                hud.model_name.c_str(), hud.step, std::max(0, hud.n_steps - 1), hud.live ? "" : " (past)",
                r->mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE", r->seq_len, format_flops(r->flops).c_str(),
                format_bytes(r->kv_bytes).c_str());
  return line;
}
const char* const kHudKeys =
    "PgDn / \xE2\x86\x92 next   PgUp / \xE2\x86\x90 back   Space play   C cache   P predict   Enter reveal   "
    "F5 panels";

}  // namespace

HudGeometry presentation_hud_geometry(ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  HudGeometry g;
  const float bs = big->FontSize, ss = small->FontSize * 1.15f;
  // The card: as wide as its title needs, at most 30 % of the width and 45 % of the height.
  if (hud.record) {
    char title[160];
    std::snprintf(title, sizeof(title), "next: %s  %.0f%%", visible_piece(hud.record->piece).c_str(),
                  100.0 * hud.record->prob);
    const float natural_w = std::max(big->CalcTextSizeA(bs, 1e9f, 0, title).x, ss * 16.0f) + ss * 1.6f;
    const float natural_h = ss * 1.6f + bs * 1.3f + ss * 1.25f * 5;
    g.card_k = std::min({1.0f, size.x * 0.3f / natural_w, size.y * 0.45f / natural_h});
    g.card_w = natural_w * g.card_k + ss * 0.8f * g.card_k;
  }
  // The strip: two lines that fit the width.
  const float text_w = std::max(small->CalcTextSizeA(ss, 1e9f, 0, hud_line(hud).c_str()).x,
                                small->CalcTextSizeA(ss, 1e9f, 0, kHudKeys).x);
  g.strip_k = std::min(1.0f, (size.x - ss * 1.6f) / std::max(1.0f, text_w));
  g.strip_h = ss * 2.6f * g.strip_k;
  return g;
}

void draw_presentation_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const HudGeometry g = presentation_hud_geometry(size, fonts, hud);
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  const StepRecord* r = hud.record;
  // The card in the right column (the 3D view is drawn left of it): the next token and its candidates.
  if (r) {
    const float k = g.card_k;
    const float bs = big->FontSize * k, ss = small->FontSize * 1.15f * k, pad = ss * 0.8f;
    const float w = g.card_w - pad;
    const size_t n = std::min<size_t>(5, std::min(r->top.size(), hud.top_pieces.size()));
    const float h = pad * 2 + bs * 1.3f + ss * 1.25f * static_cast<float>(n);
    const ImVec2 a(origin.x + size.x - w - pad, origin.y + pad), b(a.x + w, a.y + h);
    dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 215), 8.0f);
    char buf[160];
    if (hud.hidden) {
      dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(palette::kNewToken), "next token: ?");
      dl->AddText(small, ss, ImVec2(a.x + pad, a.y + pad + bs * 1.4f), IM_COL32(200, 205, 220, 255),
                  "guess first - Enter reveals");
    } else {
      std::snprintf(buf, sizeof(buf), "next: %s  %.0f%%", visible_piece(r->piece).c_str(), 100.0 * r->prob);
      dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(palette::kNewToken), buf);
      const float bar_x = a.x + pad + ss * 6.5f, bar_w = std::max(ss, w - pad * 2 - ss * 9.5f);
      for (size_t i = 0; i < n; ++i) {
        const float y = a.y + pad + bs * 1.3f + ss * 1.25f * static_cast<float>(i);
        const bool chosen = r->top[i].token == r->token;
        const ImU32 col = chosen ? to_imcolor(palette::kNewToken) : IM_COL32(205, 210, 225, 255);
        dl->PushClipRect(ImVec2(a.x + pad, y), ImVec2(bar_x - 4, y + ss * 1.2f), true);
        dl->AddText(small, ss, ImVec2(a.x + pad, y), col, hud.top_pieces[i].c_str());
        dl->PopClipRect();
        dl->AddRectFilled(ImVec2(bar_x, y + 2), ImVec2(bar_x + std::max(2.0f, bar_w * r->top[i].prob), y + ss - 1),
                          chosen ? to_imcolor(palette::kNewToken) : to_imcolor(palette::kPromptToken), 2.0f);
        std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * r->top[i].prob);
        dl->AddText(small, ss, ImVec2(bar_x + bar_w + 6, y), col, buf);
      }
    }
  }
  // Bottom strip: step, mode, counters; keys.
  const float ss = small->FontSize * 1.15f * g.strip_k, pad = small->FontSize * 0.9f;
  const ImVec2 a(origin.x, origin.y + size.y - g.strip_h), b(origin.x + size.x, origin.y + size.y);
  dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 200));
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 0.2f), IM_COL32(225, 230, 240, 255), hud_line(hud).c_str());
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 1.35f), IM_COL32(150, 160, 185, 255), kHudKeys);
}

}  // namespace kvscope
