#include "renderer_overlay.h"

#include <glad/gl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "label_layout.h"
#include "scene_format.h"
#include "scene_spec.h"
#include "units.h"

namespace kvscope {

namespace {

constexpr float kPi = 3.14159265f;

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

// Keeps at most `max_cp` code points of UTF-8 text, adding an ellipsis.
std::string truncate_utf8(const std::string& s, int max_cp) {
  int cp = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cp == max_cp) return s.substr(0, i) + "\xE2\x80\xA6";
      ++cp;
    }
  }
  return s;
}

// The longest prefix of `s` (whole code points, then "\u2026") at most `max_w` pixels wide.
std::string fit_utf8(ImFont* font, float size, const std::string& s, float max_w) {
  if (font->CalcTextSizeA(size, 1e9f, 0.0f, s.c_str()).x <= max_w) return s;
  for (int cp = 13; cp > 0; --cp) {
    const std::string t = truncate_utf8(s, cp);
    if (font->CalcTextSizeA(size, 1e9f, 0.0f, t.c_str()).x <= max_w) return t;
  }
  return "";
}

// Rotates the vertices added since `vtx_start` around `pivot` by `angle`
// (radians, screen space with y down: negative = counter-clockwise).
void rotate_since(ImDrawList* dl, int vtx_start, ImVec2 pivot, float angle) {
  const float c = std::cos(angle), s = std::sin(angle);
  for (int i = vtx_start; i < dl->VtxBuffer.Size; ++i) {
    ImVec2& p = dl->VtxBuffer[i].pos;
    const float dx = p.x - pivot.x, dy = p.y - pivot.y;
    p = ImVec2(pivot.x + dx * c - dy * s, pivot.y + dx * s + dy * c);
  }
}

void text_with_shadow(ImDrawList* dl, ImFont* font, float size, ImVec2 pos, ImU32 col, const char* text) {
  dl->AddText(font, size, ImVec2(pos.x + 1.5f, pos.y + 1.5f), IM_COL32(0, 0, 0, 220), text);
  dl->AddText(font, size, pos, col, text);
}

ImU32 col4(const glm::vec4& c) {
  return ImGui::ColorConvertFloat4ToU32(ImVec4(c.r, c.g, c.b, c.a));
}

// The smallest "nice" step (1, 2, 5, 10, 20, 50, ...) >= x.
int nice_step(float x) {
  int base = 1;
  while (true) {
    for (int m : {1, 2, 5}) {
      if (static_cast<float>(base * m) >= x) return base * m;
    }
    base *= 10;
    if (base > 1000000) return base;
  }
}

glm::vec3 phase_colour(Phase p) {
  switch (p) {
    case Phase::kPrefill:
      return {0.95f, 0.85f, 0.45f};
    case Phase::kDecodeKV:
      return palette::kCacheHigh;
    case Phase::kDecodeNoCache:
      return palette::kRecomputed;
    case Phase::kRefill:
      return palette::kRefill;
    case Phase::kNone:
      break;
  }
  return {0.6f, 0.6f, 0.6f};
}

struct Projector {
  glm::mat4 vp;
  ImVec2 origin, size;
  bool operator()(const glm::vec3& p, ImVec2& out) const {
    glm::vec2 s;
    if (!project(vp, p, size.x, size.y, s)) return false;
    out = ImVec2(origin.x + s.x, origin.y + s.y);
    return true;
  }
};

glm::vec2 gv(ImVec2 p) {
  return glm::vec2(p.x, p.y);
}

// What each token label would need, measured with the label font; `text`
// receives the shortened text a slanted label shows.
std::vector<LabelRequest> label_requests(const std::vector<const Label*>& labels, const Scene& scene,
                                         const Projector& proj, const OverlayFonts& fonts, const OverlayOptions& opt,
                                         std::vector<std::string>& slanted_text) {
  const size_t n = labels.size();
  const float fs = fonts.label->FontSize;
  std::vector<LabelRequest> req(n);
  std::vector<ImVec2> at(n);
  for (size_t i = 0; i < n; ++i) req[i].visible = proj(labels[i]->anchor, at[i]);
  // Pixel spacing between neighbouring positions (perspective varies it).
  auto spacing = [&](size_t i) {
    const size_t j = i + 1 < n ? i + 1 : (i > 0 ? i - 1 : i);
    if (j == i || !req[i].visible || !req[j].visible) return 1e6f;
    const float dx = at[j].x - at[i].x, dy = at[j].y - at[i].y;
    return std::sqrt(dx * dx + dy * dy);
  };
  slanted_text.assign(n, std::string());
  for (size_t i = 0; i < n; ++i) {
    const Label& l = *labels[i];
    LabelRequest& r = req[i];
    r.anchor = gv(at[i]);
    const bool newest = l.pos == scene.slot;
    r.priority = newest || l.pos == opt.hover_pos;
    ImFont* f = newest ? fonts.banner : fonts.label;
    const float size = newest ? fs * 1.25f : fs;
    r.flat = gv(f->CalcTextSizeA(size, 1e9f, 0.0f, l.text.c_str())) + glm::vec2(8.0f, 2.0f);  // with the plate
    r.flat_preferred = spacing(i) >= fonts.label->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str()).x + 6.0f;
    slanted_text[i] = truncate_utf8(l.text, 14);
    r.slanted = gv(fonts.label->CalcTextSizeA(fs, 1e9f, 0.0f, slanted_text[i].c_str())) + glm::vec2(3.5f, 1.5f);
  }
  return req;
}

// Token labels where layout_labels puts them: flat on a plate, or slanted
// and shortened, or left out where they would overlap.
void draw_token_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                       const OverlayOptions& opt, const std::vector<ScreenBox>& taken, std::vector<ScreenBox>* placed) {
  ImFont* font = fonts.label;
  const float fs = font->FontSize;
  std::vector<const Label*> labels;
  for (const Label& l : scene.labels)
    if (l.kind == LabelKind::kToken) labels.push_back(&l);
  if (labels.empty()) return;
  std::vector<std::string> slanted_text;
  const std::vector<LabelRequest> req = label_requests(labels, scene, proj, fonts, opt, slanted_text);
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  LabelLayoutOptions lo;
  lo.clip = glm::vec4(cmin.x, cmin.y, cmax.x, cmax.y);
  lo.min_slanted = fs * 2.5f;
  lo.obstacles = taken;
  const std::vector<LabelPlacement> at = layout_labels(req, lo);
  for (size_t i = 0; i < labels.size(); ++i) {
    const LabelPlacement& p = at[i];
    if (p.mode == LabelMode::kHidden) continue;
    if (placed) placed->push_back(p.box);
    const Label& l = *labels[i];
    const ImU32 col = col4(l.colour);
    if (p.mode == LabelMode::kFlat) {
      const bool newest = l.pos == scene.slot;
      ImFont* f = newest ? fonts.banner : font;
      const float size = newest ? fs * 1.25f : fs;
      const ImVec2 a(p.pos.x, p.pos.y), b(p.pos.x + req[i].flat.x, p.pos.y + req[i].flat.y);
      dl->AddRectFilled(a, b, IM_COL32(4, 6, 12, 190), 4.0f);
      if (req[i].priority) dl->AddRect(a, b, col, 4.0f, 0, 1.5f);
      dl->AddText(f, size, ImVec2(a.x + 4, a.y + 1), col, l.text.c_str());
      continue;
    }
    // Slanted: the text shortened to the length that fits.
    std::string text = slanted_text[i];
    if (p.length < req[i].slanted.x) text = fit_utf8(font, fs, text, p.length - 3.5f);
    const float angle = lo.angle;
    const int start = dl->VtxBuffer.Size;
    text_with_shadow(dl, font, fs, ImVec2(p.pos.x + 2.0f, p.pos.y - fs * 0.5f), col, text.c_str());
    rotate_since(dl, start, ImVec2(p.pos.x, p.pos.y), angle);
  }
}

void draw_side_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts) {
  ImFont* font = fonts.small;
  std::vector<ImVec4> drawn;  // rectangles already used: from the top, layers coincide
  for (const Label& l : scene.labels) {
    if (l.kind != LabelKind::kLayer && l.kind != LabelKind::kCaption) continue;
    ImVec2 p;
    if (!proj(l.anchor, p)) continue;
    const float fs = l.kind == LabelKind::kCaption ? font->FontSize * 1.1f : font->FontSize;
    const ImVec2 ts = font->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    const ImVec4 r(p.x - ts.x, p.y - ts.y * 0.5f, p.x, p.y + ts.y * 0.5f);
    bool overlaps = false;
    for (const ImVec4& o : drawn) overlaps |= r.x < o.z && o.x < r.z && r.y < o.w && o.y < r.w;
    if (overlaps) continue;
    drawn.push_back(r);
    text_with_shadow(dl, font, fs, ImVec2(r.x, r.y), col4(l.colour), l.text.c_str());
  }
}

void draw_ticks(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts) {
  if (scene.slot < 0) return;
  // An aggregated column is ticked with its first position (scenes without
  // columns, beam and speculative ones, have one per position).
  Layout L;
  L.columns = scene.columns;
  if (L.columns.n_pos <= 0) L.columns.n_pos = scene.slot + 1;
  ImVec2 a, b;
  const float z = L.block_w * 0.5f + 0.45f;
  if (!proj({0.0f, -0.07f, z}, a) || !proj({L.pitch, -0.07f, z}, b)) return;
  const float px_per_col = std::max(1e-3f, std::hypot(b.x - a.x, b.y - a.y));
  const int step = nice_step(std::max(1.0f, 44.0f / px_per_col));
  ImFont* font = fonts.small;
  const Columns& cols = L.columns;
  for (int c = 0; c < cols.count(); ++c) {
    const int p = cols.first(c);
    if ((cols.aggregated(c) ? c : p) % step != 0) continue;
    ImVec2 s;
    if (!proj({L.x(p), -0.07f, z}, s)) continue;
    const std::string t = std::to_string(p);
    const ImVec2 ts = font->CalcTextSizeA(font->FontSize, 1e9f, 0.0f, t.c_str());
    dl->AddText(font, font->FontSize, ImVec2(s.x - ts.x * 0.5f, s.y), IM_COL32(140, 150, 175, 220), t.c_str());
  }
}

// Tags on plates: the write head's "next:", beam scores, drafted tokens' p
// and q. A tag that would cover an earlier one is lifted above it, with a
// thin line down to its anchor, so every tag stays readable; when lifting
// would push one under the banner or out of the view (large text, close
// tokens), all tags shrink instead. Their boxes go into `taken`.
struct Tag {
  const Label* label;
  ImVec2 anchor, at, size;  // projected anchor, text's top-left, text size
};

std::vector<Tag> place_tags(const Scene& scene, const Projector& proj, ImFont* f, float fs, ImVec2 cmin, ImVec2 cmax) {
  std::vector<Tag> tags;
  std::vector<ImVec4> drawn;
  for (const Label& l : scene.labels) {
    if (l.kind != LabelKind::kHead) continue;
    ImVec2 p;
    if (!proj(l.anchor, p)) continue;
    const ImVec2 ts = f->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    // Kept inside the view: the head writes the last slot, at the right edge.
    const ImVec2 want = l.beside ? ImVec2(p.x + 6.0f, p.y - ts.y * 0.5f) : ImVec2(p.x - ts.x * 0.5f, p.y - ts.y - 4.0f);
    ImVec2 q(std::clamp(want.x, cmin.x + 6, std::max(cmin.x + 6, cmax.x - ts.x - 6)), std::max(cmin.y + 4, want.y));
    auto covers = [&](const ImVec4& o) {
      return q.x - 6 < o.z && o.x < q.x + ts.x + 6 && q.y - 4 < o.w && o.y < q.y + ts.y + 4;
    };
    for (int tries = 0; tries < 16; ++tries) {
      const auto hit = std::find_if(drawn.begin(), drawn.end(), covers);
      if (hit == drawn.end()) break;
      q.y = hit->y - ts.y - 6.0f;
    }
    drawn.push_back(ImVec4(q.x - 5, q.y - 2, q.x + ts.x + 5, q.y + ts.y + 2));
    tags.push_back({&l, p, q, ts});
  }
  return tags;
}

void draw_head_label(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                     std::vector<ScreenBox>& taken) {
  ImFont* f = fonts.small;
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  // Under the banner (draw_banner's box, at most this tall) nothing can be read.
  const float top =
      cmin.y + 4.0f +
      (scene.banner.empty() ? 0.0f : 26.0f * fonts.scale + fonts.banner->FontSize + fonts.small->FontSize * 1.05f);
  // Full size, then by 3/4 while the text stays at least 11 pixels high:
  // smaller would not be read from the back row.
  float fs = f->FontSize * 1.1f;
  std::vector<Tag> tags = place_tags(scene, proj, f, fs, cmin, cmax);
  auto readable = [&](const Tag& t) { return t.at.y >= top || t.at.y >= t.anchor.y - t.size.y - 5.0f; };
  while (fs * 0.75f >= 11.0f && !std::all_of(tags.begin(), tags.end(), readable)) {
    fs *= 0.75f;
    tags = place_tags(scene, proj, f, fs, cmin, cmax);
  }
  for (const Tag& t : tags) {
    const ImVec2 q = t.at, ts = t.size, p = t.anchor;
    const ImU32 col = col4(t.label->colour);
    if (!t.label->beside && q.y + ts.y + 2 < p.y - 6.0f)
      dl->AddLine(ImVec2(p.x, q.y + ts.y + 2), ImVec2(p.x, p.y), col4(t.label->colour * glm::vec4(1, 1, 1, 0.6f)),
                  1.0f);
    taken.push_back(flat_box(glm::vec2(q.x - 5, q.y - 2), glm::vec2(ts.x + 10, ts.y + 4)));
    dl->AddRectFilled(ImVec2(q.x - 5, q.y - 2), ImVec2(q.x + ts.x + 5, q.y + ts.y + 2), IM_COL32(30, 6, 28, 210), 5.0f);
    dl->AddRect(ImVec2(q.x - 5, q.y - 2), ImVec2(q.x + ts.x + 5, q.y + ts.y + 2), col, 5.0f, 0, 1.5f);
    dl->AddText(f, fs, q, col, t.label->text.c_str());
  }
}

// Sink / window bars' and pages' labels, centred on the ground in front of
// them; one that would overlap an earlier one is left out.
void draw_cache_mark_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts) {
  ImFont* f = fonts.small;
  const float fs = f->FontSize;
  std::vector<ImVec4> drawn;
  for (const Label& l : scene.labels) {
    if (l.kind != LabelKind::kCacheMark) continue;
    ImVec2 p;
    if (!proj(l.anchor, p)) continue;
    const ImVec2 ts = f->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    const ImVec4 r(p.x - ts.x * 0.5f - 3, p.y - 1, p.x + ts.x * 0.5f + 3, p.y + ts.y + 1);
    bool overlaps = false;
    for (const ImVec4& o : drawn) overlaps |= r.x < o.z && o.x < r.z && r.y < o.w && o.y < r.w;
    if (overlaps) continue;
    drawn.push_back(r);
    dl->AddRectFilled(ImVec2(r.x, r.y), ImVec2(r.z, r.w), IM_COL32(4, 6, 12, 190), 3.0f);
    dl->AddText(f, fs, ImVec2(r.x + 3, r.y + 1), col4(l.colour), l.text.c_str());
  }
}

// The strongest beams' weights, on small plates where they land.
// The strongest beams' weights; one that would cover the head's tag or an
// earlier weight is left out. Their boxes go into `taken`.
void draw_beam_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                      std::vector<ScreenBox>& taken) {
  ImFont* f = fonts.small;
  const float fs = f->FontSize;
  for (const Label& l : scene.labels) {
    if (l.kind != LabelKind::kBeam) continue;
    ImVec2 p;
    if (!proj(l.anchor, p)) continue;
    const ImVec2 ts = f->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    const ImVec2 q(p.x - ts.x * 0.5f, p.y - ts.y * 0.5f);
    const ScreenBox box = flat_box(glm::vec2(q.x - 3, q.y - 1), glm::vec2(ts.x + 6, ts.y + 2));
    bool covered = false;
    for (const ScreenBox& o : taken) covered |= boxes_overlap(box, o, 1.0f);
    if (covered) continue;
    taken.push_back(box);
    dl->AddRectFilled(ImVec2(q.x - 3, q.y - 1), ImVec2(q.x + ts.x + 3, q.y + ts.y + 1), IM_COL32(30, 6, 28, 200), 3.0f);
    dl->AddText(f, fs, q, col4(l.colour), l.text.c_str());
  }
}

void draw_banner(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts) {
  if (scene.banner.empty()) return;
  ImFont* big = fonts.banner;
  ImFont* small = fonts.small;
  const glm::vec3 c = phase_colour(scene.phase);
  // Shrunk to fit a narrow view rather than clipped.
  float big_fs = big->FontSize, small_fs = small->FontSize * 1.05f;
  ImVec2 ts = big->CalcTextSizeA(big_fs, 1e9f, 0.0f, scene.banner.c_str());
  ImVec2 ss = small->CalcTextSizeA(small_fs, 1e9f, 0.0f, scene.banner_sub.c_str());
  const float room = size.x - 40.0f * fonts.scale;
  const float fit = std::min(1.0f, room / std::max(1.0f, std::max(ts.x, ss.x)));
  if (fit < 1.0f) {
    big_fs *= fit;
    small_fs *= fit;
    ts = big->CalcTextSizeA(big_fs, 1e9f, 0.0f, scene.banner.c_str());
    ss = small->CalcTextSizeA(small_fs, 1e9f, 0.0f, scene.banner_sub.c_str());
  }
  const float w = std::max(ts.x, ss.x) + 36.0f * fonts.scale;
  const float h = ts.y + ss.y + 16.0f * fonts.scale;
  const ImVec2 p0(origin.x + (size.x - w) * 0.5f, origin.y + 10.0f * fonts.scale);
  const ImVec2 p1(p0.x + w, p0.y + h);
  dl->AddRectFilled(p0, p1, to_imcolor(c * 0.16f, 0.92f), 8.0f);
  dl->AddRect(p0, p1, to_imcolor(c), 8.0f, 0, 2.5f);
  dl->AddText(big, big_fs, ImVec2(p0.x + (w - ts.x) * 0.5f, p0.y + 5.0f * fonts.scale), to_imcolor(c),
              scene.banner.c_str());
  dl->AddText(small, small_fs, ImVec2(p0.x + (w - ss.x) * 0.5f, p0.y + 8.0f * fonts.scale + ts.y),
              IM_COL32(225, 230, 240, 255), scene.banner_sub.c_str());
}

struct LegendEntry {
  int kind;  // 0 solid, 1 gradient, 2 outline, 3 beam, 4 hollow red, 5 striped (kv_bands stripes)
  glm::vec3 c;
  const char* text;
  int bands = 0;
};

// The cache layout's entries: row format, eviction, sinks, pages.
void cache_legend_entries(const Scene& scene, std::vector<LegendEntry>& entries) {
  float bands = 0;
  bool evicting = false, evicted = false;
  for (const BlockInstance& b : scene.kv) {
    bands = std::max(bands, b.bands);
    evicting |= b.state == KvState::kEvicting;
    evicted |= b.state == KvState::kEvicted;
  }
  if (bands == 16) entries.push_back({5, palette::kCacheHigh, "f16 rows: 16 stripes = 16 bits per value", 16});
  if (bands == 8) entries.push_back({5, palette::kCacheHigh, "q8_0 rows: 8 stripes = 8 bits per value (+ scale)", 8});
  if (bands == 4) entries.push_back({5, palette::kCacheHigh, "q4_0 rows: 4 stripes = 4 bits per value (+ scale)", 4});
  if (evicting) entries.push_back({4, palette::kEvicted, "evicted by the window this step (bytes freed)"});
  if (evicted) entries.push_back({2, palette::kEvicted, "evicted earlier: gone from the cache"});
  bool sinks = false, page = false, shared = false;
  for (const BlockInstance& b : scene.cache_marks) {
    sinks |= b.mark == CacheMark::kSinks;
    page |= b.mark == CacheMark::kPage;
    shared |= b.mark == CacheMark::kSharedPage;
  }
  if (sinks) entries.push_back({2, palette::kSink, "sink positions: always kept"});
  if (page) entries.push_back({2, palette::kPage, "page: a block of B positions (id = pool block)"});
  if (shared) entries.push_back({2, palette::kShared, "page shared by branches (copied on first write)"});
}

// What is on screen in this phase, nothing more.
std::vector<LegendEntry> legend_entries(const Scene& scene) {
  using Entry = LegendEntry;
  std::vector<Entry> entries = {
      {0, palette::kPromptToken, "prompt token"},
      {0, palette::kGeneratedToken, "generated token"},
      {0, palette::kNewToken, "newest token (just chosen)"},
  };
  bool held = false, fresh = false, prefill = false, refill = false, recomputed = false, dropped = false;
  for (const BlockInstance& b : scene.kv) {
    held |= b.state == KvState::kResident;
    fresh |= b.state == KvState::kNew;
    prefill |= b.state == KvState::kPrefill;
    refill |= b.state == KvState::kRefill;
    recomputed |= b.state == KvState::kRecomputed;
    dropped |= b.state == KvState::kNewDropped;
  }
  if (held || prefill || refill || fresh)
    entries.push_back({1, palette::kCacheHigh, "K/V held in the cache (height, colour = |K|)"});
  if (prefill) entries.push_back({0, palette::kPrefill, "prefill: all prompt K/V in one pass"});
  if (refill) entries.push_back({0, palette::kRefill, "refill: cache rebuilt in one pass"});
  if (fresh || (dropped && !scene.rolled_back))
    entries.push_back({0, palette::kNewKV, "K/V computed for the first time"});
  if (scene.drafts) entries.push_back({0, kDraftColour, "drafted by the draft model, not yet verified"});
  if (scene.rolled_back) entries.push_back({4, palette::kRecomputed, "rejected draft: its K/V rolled back"});
  if (recomputed) entries.push_back({4, palette::kRecomputed, "recomputed, then thrown away (NO CACHE)"});
  cache_legend_entries(scene, entries);
  entries.push_back({2, palette::kEmpty, "empty cache slot"});
  if (!scene.beams.empty()) entries.push_back({3, palette::kBeam, "attention of the newest token (width = weight)"});
  return entries;
}

// Where each entry goes inside the legend's box, and the box's size: one
// entry per row, or (max_w > 0) rows filled left to right up to max_w pixels
// wide, which keeps the legend short under a wide, low view.
struct LegendLayout {
  std::vector<ImVec2> at;  // top-left of each entry's row slot, relative to the box
  ImVec2 box;
};

LegendLayout layout_legend(const std::vector<LegendEntry>& entries, const OverlayFonts& fonts, float max_w,
                           float k = 1.0f) {
  ImFont* f = fonts.small;
  const float fs = f->FontSize * k;
  const float row = fs * 1.3f, sw = fs * 1.1f, pad = 8.0f * fonts.scale * k;
  LegendLayout l;
  float x = pad, y = pad;
  for (const LegendEntry& e : entries) {
    const float w = sw + pad + f->CalcTextSizeA(fs, 1e9f, 0.0f, e.text).x;
    if (x > pad && (max_w <= 0 || x + w + pad > max_w)) {
      x = pad;
      y += row;
    }
    l.at.emplace_back(x, y);
    l.box.x = std::max(l.box.x, x + w + pad);
    x += w + 3 * pad;
  }
  l.box.y = y + row + pad;
  return l;
}

// Bottom-left of [origin, origin + size), in rows when `flow`; returns the
// rectangle it used (x0, y0, x1, y1).
ImVec4 draw_legend(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts,
                   bool flow) {
  ImFont* f = fonts.small;
  const std::vector<LegendEntry> entries = legend_entries(scene);
  const int n = static_cast<int>(entries.size());
  // Over the view (not in a band of its own) the legend keeps to the
  // bottom-left corner: at a large text scale or in a small view its text
  // shrinks rather than covering the stacks.
  float k = 1.0f;
  if (!flow) {
    const LegendLayout full = layout_legend(entries, fonts, 0.0f);
    k = std::clamp(std::min(size.x * 0.42f / full.box.x, size.y * 0.4f / full.box.y), 0.45f, 1.0f);
  }
  const float fs = f->FontSize * k;
  const float row = fs * 1.3f;
  const float sw = fs * 1.1f;  // swatch size
  const float pad = 8.0f * fonts.scale * k;
  const LegendLayout lay = layout_legend(entries, fonts, flow ? size.x - 2 * pad : 0.0f, k);
  const ImVec2 box = lay.box;
  const ImVec2 p0(origin.x + pad, origin.y + size.y - box.y - pad);
  dl->AddRectFilled(p0, ImVec2(p0.x + box.x, p0.y + box.y), IM_COL32(8, 10, 18, 200), 6.0f);
  dl->AddRect(p0, ImVec2(p0.x + box.x, p0.y + box.y), IM_COL32(70, 80, 100, 200), 6.0f);
  for (int i = 0; i < n; ++i) {
    const LegendEntry& e = entries[static_cast<size_t>(i)];
    const ImVec2 slot(p0.x + lay.at[static_cast<size_t>(i)].x, p0.y + lay.at[static_cast<size_t>(i)].y);
    const ImVec2 a(slot.x, slot.y + (row - sw) * 0.5f);
    const ImVec2 b(a.x + sw, a.y + sw);
    switch (e.kind) {
      case 0:
        dl->AddRectFilled(a, b, to_imcolor(e.c), 2.0f);
        break;
      case 1:
        dl->AddRectFilledMultiColor(a, b, to_imcolor(palette::kCacheHigh), to_imcolor(palette::kCacheHigh),
                                    to_imcolor(palette::kCacheLow), to_imcolor(palette::kCacheLow));
        break;
      case 2:
        dl->AddRect(a, b, to_imcolor(e.c), 0.0f, 0, 1.5f);
        break;
      case 3:
        dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y), to_imcolor(e.c), 3.0f);
        dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y + sw * 0.6f), to_imcolor(e.c, 0.5f), 1.0f);
        break;
      case 4:
        dl->AddRectFilled(a, b, to_imcolor(e.c * 0.35f), 0.0f);
        dl->AddRect(a, b, to_imcolor(e.c), 0.0f, 0, 1.5f);
        break;
      case 5:
        dl->AddRectFilled(a, b, to_imcolor(e.c), 0.0f);
        for (int j = 1; j <= e.bands; ++j) {
          const float y = a.y + sw * static_cast<float>(j) / static_cast<float>(e.bands) - 0.5f;
          dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), to_imcolor(e.c * 0.45f), e.bands > 8 ? 0.7f : 1.2f);
        }
        break;
    }
    dl->AddText(f, fs, ImVec2(b.x + pad, slot.y + (row - fs) * 0.5f), IM_COL32(220, 225, 235, 255), e.text);
  }
  return ImVec4(p0.x, p0.y, p0.x + box.x, p0.y + box.y);
}

// Returns the rectangle it used (x0, y0, x1, y1).
ImVec4 draw_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const OverlayOptions& opt,
                const ImVec4& avoid) {
  if (!opt.record) return ImVec4(0, 0, 0, 0);
  const StepRecord& r = *opt.record;
  ImFont* f = fonts.small;
  float fs = f->FontSize;
  std::string l1 = (opt.model_name.empty() ? std::string() : opt.model_name + "  \xC2\xB7  ") +
                   (r.prefill ? std::string("prefill") : "step " + std::to_string(r.index)) + "  \xC2\xB7  " +
                   std::to_string(r.seq_len) + " positions  \xC2\xB7  " +
                   (r.mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.2f ms", r.ms);
  std::string l2 = "this step " + format_flops(r.flops) + "  \xC2\xB7  so far " + format_flops(r.flops_total);
  std::string l3 = "KV cache " + format_bytes(r.kv_bytes) + "  \xC2\xB7  recomputed " + std::to_string(r.recomputed) +
                   "  \xC2\xB7  " + ms;
  const float pad = 8.0f * fonts.scale;
  float w = 0;
  for (const std::string* s : {&l1, &l2, &l3}) w = std::max(w, f->CalcTextSizeA(fs, 1e9f, 0.0f, s->c_str()).x);
  // Shrunk to fit beside the legend (or the width) instead of running off the edge.
  const float room = std::max(40.0f, size.x - (avoid.z > avoid.x ? avoid.z - origin.x : 0.0f) - pad * 4);
  if (w > room) {
    fs *= room / w;
    w = room;
  }
  // Bottom-right: the banner owns the top, the legend the bottom-left.
  const float box_h = fs * 3.6f + pad * 2;
  ImVec2 p0(origin.x + size.x - w - pad * 3, origin.y + size.y - box_h - pad);
  if (p0.x < avoid.z + pad && avoid.z > avoid.x) p0.y = avoid.y - box_h - pad;  // narrow view: above the legend
  dl->AddRectFilled(p0, ImVec2(p0.x + w + pad * 2, p0.y + box_h), IM_COL32(8, 10, 18, 190), 6.0f);
  dl->AddText(f, fs, ImVec2(p0.x + pad, p0.y + pad), IM_COL32(235, 238, 245, 255), l1.c_str());
  dl->AddText(f, fs, ImVec2(p0.x + pad, p0.y + pad + fs * 1.2f), IM_COL32(200, 210, 225, 255), l2.c_str());
  dl->AddText(f, fs, ImVec2(p0.x + pad, p0.y + pad + fs * 2.4f),
              r.kv_bytes ? to_imcolor(palette::kCacheHigh) : to_imcolor(palette::kRecomputed), l3.c_str());
  return ImVec4(p0.x, p0.y, p0.x + w + pad * 2, p0.y + box_h);
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

float legend_band(const Scene& scene, const OverlayFonts& fonts, const OverlayOptions& opt, float width) {
  if (!opt.legend) return 0.0f;
  const float pad = 8.0f * fonts.scale;
  return layout_legend(legend_entries(scene), fonts, width - 2 * pad).box.y + 2 * pad;
}

void draw_overlay(ImDrawList* dl, const Scene& scene, const Camera& camera, ImVec2 origin, ImVec2 size,
                  const OverlayFonts& fonts, const OverlayOptions& opt, OverlayLayout* layout) {
  dl->PushClipRect(origin, ImVec2(origin.x + size.x, origin.y + size.y), true);
  Projector proj{camera.proj(size.x / std::max(1.0f, size.y)) * camera.view(), origin, size};
  draw_ticks(dl, scene, proj, fonts);
  draw_side_labels(dl, scene, proj, fonts);
  // The head's tag and the beams' weights first: the token labels keep clear of them.
  std::vector<ScreenBox> taken;
  draw_head_label(dl, scene, proj, fonts, taken);
  draw_beam_labels(dl, scene, proj, fonts, taken);
  if (opt.labels) draw_token_labels(dl, scene, proj, fonts, opt, taken, layout ? &layout->labels : nullptr);
  draw_cache_mark_labels(dl, scene, proj, fonts);
  if (layout) layout->tags = taken;
  if (opt.banner) draw_banner(dl, scene, origin, size, fonts);
  dl->PopClipRect();
  // Legend and HUD: over the bottom of the view, or in the band under it.
  const ImVec2 all(size.x, size.y + std::max(0.0f, opt.band));
  dl->PushClipRect(origin, ImVec2(origin.x + all.x, origin.y + all.y), true);
  ImVec4 legend(0, 0, 0, 0);
  if (opt.legend) legend = draw_legend(dl, scene, origin, all, fonts, opt.band > 0);
  ImVec4 hud(0, 0, 0, 0);
  if (opt.hud) hud = draw_hud(dl, origin, all, fonts, opt, legend);
  dl->PopClipRect();
  if (layout) {
    layout->legend = glm::vec4(legend.x, legend.y, legend.z, legend.w);
    layout->hud = glm::vec4(hud.x, hud.y, hud.z, hud.w);
  }
}

}  // namespace kvscope
