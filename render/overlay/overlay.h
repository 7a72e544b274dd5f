// Text and 2D annotations over the 3D view, drawn with an ImGui draw list so
// the window and the headless renderer produce the same picture: token
// labels projected above their blocks, layer numbers, position ticks, the
// phase banner, a legend and a small counter HUD.
#pragma once

#include <imgui.h>

#include <string>

#include "model/decoding/generator.h"
#include "render/scene/label_layout.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"

namespace kvscope {

struct OverlayFonts {
  ImFont* ui = nullptr;      // panels
  ImFont* label = nullptr;   // token labels
  ImFont* banner = nullptr;  // the phase banner
  ImFont* small = nullptr;   // legend, ticks, HUD
  float scale = 1.0f;
};

// Adds the fonts to the current ImGui context's atlas (clearing it first):
// DejaVu Sans when installed (Latin, Greek, Cyrillic, arrows, '·', '↵'),
// else ImGui's built-in font. Call before the atlas texture is built.
OverlayFonts load_fonts(float text_scale);

struct OverlayOptions {
  bool labels = true;
  bool text_line = true;  // the text so far on one line at the view's edge (draw_text_line)
  bool legend = true;
  bool banner = true;
  bool hud = true;
  int hover_pos = -1;  // token position to highlight
  std::string model_name;
  const StepRecord* record = nullptr;  // counters for the HUD (the shown step)
  float text_scale = 1.0f;
  // Pixels under the 3D view's rectangle reserved for the legend and the HUD
  // (0: they are drawn over the bottom of the view). A short view, e.g. a
  // 1280x720 window with its panels, gives them a band of their own so they
  // do not cover the KV stacks; legend_band() says how tall.
  float band = 0;
  // The legend's text size in its band, relative to the small font: a band
  // at a large text scale shrinks it so the scene keeps most of the height.
  float legend_scale = 1.0f;
  bool legend_terse = false;  // its entries without their parenthesised notes (shorter rows)
  // Pixels above the 3D view's rectangle kept for the banner (0: it is
  // drawn over the top of the view), and its text size relative to the
  // fonts'; banner_band() says how tall.
  float top = 0;
  float banner_scale = 1.0f;
};

// Height the legend needs below a 3D view `width` pixels wide (its entries in
// rows across that width, with margins, at opt.legend_scale) for this
// scene; 0 when opt.legend is off.
float legend_band(const Scene& scene, const OverlayFonts& fonts, const OverlayOptions& opt, float width);

// Whether every entry of the legend (at opt.legend_scale, terse where
// opt.legend_terse) fits in its rows below a view `width` pixels wide, so
// none runs past the view's right edge (or into the HUD's room); true when
// opt.legend is off.
bool legend_fits_width(const Scene& scene, const OverlayFonts& fonts, const OverlayOptions& opt, float width);

// Height the banner needs above a 3D view `width` pixels wide (its second
// line wrapped to the width, with margins) at `k` times the fonts' sizes;
// 0 when the scene has no banner.
float banner_band(const Scene& scene, const OverlayFonts& fonts, float width, float k = 1.0f);

// Where the overlay put its parts (pixels), for the layout tests.
struct OverlayLayout {
  std::vector<ScreenBox> labels;    // every token label drawn
  std::vector<ScreenBox> tags;      // the head's (or drafted tokens') tags, then the rays' weights drawn
  size_t head_tags = 0;             // how many of `tags` are the head's or drafted tokens'
  float tag_px = 0;                 // those tags' font size
  std::vector<ScreenBox> side;      // the layer numbers and row captions drawn
  std::vector<ScreenBox> captions;  // the pages' and the window bar's captions on the ground drawn
  std::vector<ScreenBox> ticks;     // the position numbers on the ground drawn
  ScreenBox text_line{};            // the text so far, where has_text_line
  bool has_text_line = false;
  glm::vec4 legend{0.0f};  // (x0, y0, x1, y1); all 0 when not drawn
  glm::vec4 hud{0.0f};
  glm::vec4 banner{0.0f};
  float banner_line_px = 0;  // the font size of the banner's second line
};

// Draws onto `dl` in the rectangle [origin, origin + size) (pixels), the
// legend and HUD in the opt.band pixels under it when opt.band > 0, the
// banner in the opt.top pixels above it when opt.top > 0.
void draw_overlay(ImDrawList* dl, const Scene& scene, const Camera& camera, ImVec2 origin, ImVec2 size,
                  const OverlayFonts& fonts, const OverlayOptions& opt, OverlayLayout* layout = nullptr);

// The one conversion of a palette colour for ImGui (packed, and as a vector for widgets).
inline ImVec4 v4(const glm::vec3& c, float a = 1.0f) {
  return ImVec4(c.r, c.g, c.b, a);
}
inline ImU32 to_imcolor(const glm::vec3& c, float a = 1.0f) {
  return ImGui::ColorConvertFloat4ToU32(v4(c, a));
}

}  // namespace kvscope
