// The presentation-mode HUD (F5): the card with the next token and its
// candidates, the step strip and the keys, sized to fit at any text scale.
#include "app/gui/panels/lesson_panels.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "app/session/fitting.h"
#include "model/core/units.h"
#include "render/scene/scene_format.h"

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

// `text` in font `f` at `size` cut to `width` with an ellipsis where it is
// wider (on a UTF-8 boundary): a long piece reads "·underst…", not a cut glyph.
std::string fit_piece(const ImFont* f, float size, const std::string& text, float width) {
  auto w = [&](const std::string& s) { return f->CalcTextSizeA(size, 1e9f, 0.0f, s.c_str()).x; };
  if (w(text) <= width) return text;
  size_t cut = text.size();
  while (cut > 0) {
    --cut;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    const std::string s = text.substr(0, cut) + "\xE2\x80\xA6";
    if (w(s) <= width) return s;
  }
  return "\xE2\x80\xA6";
}

std::string card_title(const StepRecord& r) {
  return "next: " + visible_piece(r.piece) + "  " + percent_text(r.prob, 0);
}

// The card in the right column (the 3D view is drawn left of it): the next
// token and its candidates, each a row of piece, bar and percentage.
void draw_card(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud,
               const HudGeometry& g) {
  const Palette& pal = hud.palette;
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  const StepRecord* r = hud.record;
  const float bs = big->FontSize * g.title_k, ss = small->FontSize * 1.15f * g.rows_k, pad = ss * 0.8f;
  const float w = g.card_w - pad;
  const size_t n = std::min<size_t>(5, std::min(r->top.size(), hud.top_pieces.size()));
  const float h = pad * 2 + bs * 1.3f + ss * 1.25f * static_cast<float>(n);
  const ImVec2 a(origin.x + size.x - w - pad, origin.y + pad), b(a.x + w, a.y + h);
  dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 215), 8.0f);
  if (hud.hidden) {
    dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(pal.new_token), "next token: ?");
    dl->AddText(small, ss, ImVec2(a.x + pad, a.y + pad + bs * 1.4f), IM_COL32(200, 205, 220, 255),
                "guess first - Enter reveals");
    return;
  }
  dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(pal.new_token), card_title(*r).c_str());
  const float piece_w = g.piece_w * g.rows_k, percent_w = g.percent_w * g.rows_k;
  const float bar_x = a.x + pad + piece_w, bar_w = std::max(ss, w - pad * 2 - piece_w - percent_w);
  for (size_t i = 0; i < n; ++i) {
    const float y = a.y + pad + bs * 1.3f + ss * 1.25f * static_cast<float>(i);
    const bool chosen = r->top[i].token == r->token;
    const ImU32 col = chosen ? to_imcolor(pal.new_token) : IM_COL32(205, 210, 225, 255);
    dl->AddText(small, ss, ImVec2(a.x + pad, y), col,
                fit_piece(small, ss, hud.top_pieces[i], bar_x - ss * 0.2f - (a.x + pad)).c_str());
    dl->AddRectFilled(ImVec2(bar_x, y + ss * 0.1f),
                      ImVec2(bar_x + std::max(2.0f, bar_w * r->top[i].prob), y + ss * 0.95f),
                      chosen ? to_imcolor(pal.new_token) : to_imcolor(pal.prompt_token), 2.0f);
    dl->AddText(small, ss, ImVec2(bar_x + bar_w + ss * 0.4f, y), col, percent_text(r->top[i].prob, 1).c_str());
  }
}

}  // namespace

HudGeometry presentation_hud_geometry(ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  HudGeometry g;
  const float bs = big->FontSize, ss = small->FontSize * 1.15f;
  // The strip: two lines that fit the width.
  const float text_w = std::max(small->CalcTextSizeA(ss, 1e9f, 0, hud_line(hud).c_str()).x,
                                small->CalcTextSizeA(ss, 1e9f, 0, kHudKeys).x);
  g.strip_k = std::min(1.0f, (size.x - ss * 1.6f) / std::max(1.0f, text_w));
  g.strip_h = ss * 2.6f * g.strip_k;
  if (!hud.record) return g;
  // The card: a row is its piece (3 to 6 characters' room), a bar of at least 3 and the percentage.
  const std::string title = card_title(*hud.record);
  float piece = 0;
  for (const std::string& p : hud.top_pieces) piece = std::max(piece, small->CalcTextSizeA(ss, 1e9f, 0, p.c_str()).x);
  g.piece_w = std::clamp(piece + ss * 0.4f, ss * 3, ss * 6);
  g.percent_w = small->CalcTextSizeA(ss, 1e9f, 0, "100.0%").x + ss * 0.4f;
  HudCardSize full;
  // (widths with the card's padding and its margin to the window's edge)
  full.title_w = big->CalcTextSizeA(bs, 1e9f, 0, title.c_str()).x + ss * 2.4f;
  full.title_h = bs * 1.3f;
  full.rows_w = g.piece_w + ss * 3 + g.percent_w + ss * 2.4f;
  full.rows_h = ss * 1.6f + ss * 1.25f * 5;
  // Under the card stays the room of the strip and a margin.
  const HudCardFit fit = fit_hud_card(full, size.x, size.y - g.strip_h - ss);
  g.title_k = fit.title_k;
  g.rows_k = fit.rows_k;
  g.card_w = fit.w;
  return g;
}

void draw_presentation_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const HudGeometry g = presentation_hud_geometry(size, fonts, hud);
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  if (hud.record) draw_card(dl, origin, size, fonts, hud, g);
  // Bottom strip: step, mode, counters; keys.
  const float ss = small->FontSize * 1.15f * g.strip_k, pad = small->FontSize * 0.9f;
  const ImVec2 a(origin.x, origin.y + size.y - g.strip_h), b(origin.x + size.x, origin.y + size.y);
  dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 200));
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 0.2f), IM_COL32(225, 230, 240, 255), hud_line(hud).c_str());
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 1.35f), IM_COL32(150, 160, 185, 255), kHudKeys);
}

}  // namespace kvscope
