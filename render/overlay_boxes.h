// The overlay's boxes at the edges of the 3D view, drawn by draw_overlay:
// the phase banner (top centre), the legend (bottom left) and the counter
// HUD (bottom right). Each returns the rectangle it used (x0, y0, x1, y1).
#pragma once

#include <imgui.h>

#include "renderer_overlay.h"
#include "scene.h"

namespace kvscope {

// Top centre of [origin, origin + size): the phase and what it computes.
void draw_banner(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts);

// Bottom left of [origin, origin + size), its entries in rows when `flow`.
ImVec4 draw_legend(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts,
                   bool flow);

// Bottom right of [origin, origin + size), beside (or above) the legend's rectangle `avoid`.
ImVec4 draw_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const OverlayOptions& opt,
                const ImVec4& avoid);

}  // namespace kvscope
