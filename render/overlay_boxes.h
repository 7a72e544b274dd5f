// The overlay's boxes at the edges of the 3D view, drawn by draw_overlay:
// the phase banner (top centre), the legend (bottom left) and the counter
// HUD (bottom right). Each returns the rectangle it used (x0, y0, x1, y1).
#pragma once

#include <imgui.h>

#include "renderer_overlay.h"
#include "scene.h"

namespace kvscope {

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
                const ImVec4& avoid);

}  // namespace kvscope
