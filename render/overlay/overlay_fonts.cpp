// The overlay's fonts: DejaVu Sans at the text scale, in one ImGui atlas
// that fits the GL driver's largest texture.
#include <glad/gl.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "render/overlay/overlay.h"

namespace kvscope {

namespace {

const ImWchar* glyph_ranges() {
  // Latin + Latin-1 + Latin Extended-A/B, Greek, Cyrillic, general
  // punctuation, currency, arrows (↵ →), math, box drawing, geometric shapes.
  static const ImWchar ranges[] = {
      0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x052F, 0x2000, 0x206F, 0x20A0, 0x20CF, 0x2100,
      0x214F, 0x2190, 0x21FF, 0x2200, 0x22FF, 0x2500, 0x25FF, 0xFFFD, 0xFFFD, 0,
  };
  return ranges;
}

std::string font_path(const char* file) {
#ifdef KVSCOPE_FONT_DIR
  std::filesystem::path p = std::filesystem::path(KVSCOPE_FONT_DIR) / file;
  std::error_code ec;
  if (std::filesystem::exists(p, ec)) return p.string();
#endif
  (void)file;
  return {};
}

ImFont* add_font(const char* file, float size) {
  ImGuiIO& io = ImGui::GetIO();
  const std::string path = font_path(file);
  if (!path.empty()) {
    ImFontConfig cfg;
    cfg.OversampleH = 2;
    cfg.OversampleV = 1;
    cfg.PixelSnapH = false;
    if (ImFont* f = io.Fonts->AddFontFromFileTTF(path.c_str(), size, &cfg, glyph_ranges())) return f;
  }
  ImFontConfig cfg;
  cfg.SizePixels = std::round(size);
  return io.Fonts->AddFontDefault(&cfg);
}

}  // namespace

OverlayFonts load_fonts(float text_scale) {
  // ImGui packs every font's glyphs into one texture, 4096 wide by default.
  // At large scales (a 4K-high render) it grew taller than the driver's
  // maximum texture size: widen it towards a square first, and only if that
  // is not enough draw the text smaller.
  GLint max_texture = 0;
  if (glad_glGetIntegerv) glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_texture);  // 0 without a GL context
  ImFontAtlas* atlas = ImGui::GetIO().Fonts;
  atlas->TexDesiredWidth = 0;
  for (int attempt = 0;; ++attempt) {
    atlas->Clear();
    OverlayFonts f;
    f.scale = text_scale;
    f.ui = add_font("DejaVuSans.ttf", 16.0f * text_scale);  // first = ImGui's default
    f.label = add_font("DejaVuSans.ttf", 18.0f * text_scale);
    f.banner = add_font("DejaVuSans-Bold.ttf", 30.0f * text_scale);
    f.small = add_font("DejaVuSans.ttf", 15.0f * text_scale);
    if (max_texture <= 0 || attempt == 12 || !atlas->Build()) return f;
    if (atlas->TexWidth <= max_texture && atlas->TexHeight <= max_texture) return f;
    if (atlas->TexHeight > 2 * atlas->TexWidth && atlas->TexWidth * 2 <= max_texture)
      atlas->TexDesiredWidth = atlas->TexWidth * 2;
    else
      text_scale *= 0.8f;
  }
}

}  // namespace kvscope
