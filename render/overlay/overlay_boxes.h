// The overlay's boxes at the edges of the 3D view, drawn by draw_overlay:
// the phase banner (top centre), the legend (bottom left) and the counter
// HUD (bottom right). Each returns the rectangle it used (x0, y0, x1, y1).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "render/overlay/overlay.h"
#include "render/scene/label_layout.h"
#include "render/scene/scene.h"

namespace kvscope {

// Keeps at most `max_cp` code points of UTF-8 text, adding an ellipsis.
std::string truncate_utf8(const std::string& s, int max_cp);
// The longest prefix of `s` (whole code points, then "\u2026") at most `max_w` pixels wide.
std::string fit_utf8(ImFont* font, float size, const std::string& s, float max_w);

// Top centre of [origin, origin + size): the phase and what it computes, at
// `k` times the fonts' sizes, its second line wrapped to the width (at
// `*line_px` pixels when given).
ImVec4 draw_banner(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts,
                   float k = 1.0f, float* line_px = nullptr);

// Bottom left of [origin, origin + size): in a band of its own (`flow`) its
// entries in rows up to `rows_w` pixels wide at `band_k` times the small
// font's size; over the view, one per row, shrunk to keep to the corner.
// `terse`: the entries without their parenthesised notes.
ImVec4 draw_legend(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, bool flow,
                   float band_k, float rows_w, bool terse = false);

// How wide the legend's rows may run in a band `width` wide: the HUD (when
// shown) keeps its room at the right.
float legend_rows_width(const OverlayFonts& fonts, const OverlayOptions& opt, float width);

// Bottom right of [origin, origin + size), beside (or above) the legend's rectangle `avoid`.
ImVec4 draw_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const OverlayOptions& opt,
                const Palette& pal, const ImVec4& avoid);

// The text so far on one line inside the view `clip` (x0, y0, x1, y1): the
// newest tokens' text as it reads (a leading space as a space), each in its
// label's colour, the newest underlined, the older ones left out behind an
// ellipsis where the line would not fit. The token labels over the blocks
// thin out at a large text scale; this line still reads whole. Placed on a
// plate along the view's top edge (or its bottom edge where `bottom_ok`) in
// the widest stretch clear of `keep_off` (the blocks, the tags drawn),
// centred where it allows; left out where no stretch holds 40 % of the
// width (or the whole line), and for scenes that are not one sequence
// (beam lanes, drafts). Returns whether it was drawn, its plate in `*out`.
bool draw_text_line(ImDrawList* dl, const Scene& scene, const OverlayFonts& fonts, const glm::vec4& clip,
                    bool bottom_ok, const std::vector<ScreenBox>& keep_off, ScreenBox* out);

}  // namespace kvscope
