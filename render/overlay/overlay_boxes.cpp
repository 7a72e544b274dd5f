#include "render/overlay/overlay_boxes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/core/units.h"
#include "render/scene/scene_chat.h"
#include "render/scene/scene_format.h"
#include "render/scene/scene_spec.h"

namespace kvscope {

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

namespace {

glm::vec3 phase_colour(Phase p, const Palette& pal) {
  switch (p) {
    case Phase::kPrefill:
      return {0.95f, 0.85f, 0.45f};
    case Phase::kDecodeKV:
      return pal.cache_high;
    case Phase::kDecodeNoCache:
      return pal.recomputed;
    case Phase::kRefill:
      return pal.refill;
    case Phase::kNone:
      break;
  }
  return {0.6f, 0.6f, 0.6f};
}

struct LegendEntry {
  int kind;  // 0 solid, 1 gradient, 2 outline, 3 ray, 4 hollow red, 5 striped (kv_bands stripes)
  glm::vec3 c;
  std::string text;
  int bands = 0;
};

// The cache layout's entries: row format, eviction, sinks, pages.
void cache_legend_entries(const Scene& scene, std::vector<LegendEntry>& entries) {
  const Palette& pal = scene.palette;
  float bands = 0;
  bool evicting = false, evicted = false;
  for (const BlockInstance& b : scene.kv) {
    bands = std::max(bands, b.bands);
    evicting |= b.state == KvState::kEvicting;
    evicted |= b.state == KvState::kEvicted;
  }
  if (bands == 16) entries.push_back({5, pal.cache_high, "f16 rows: 16 stripes = 16 bits per value", 16});
  if (bands == 8) entries.push_back({5, pal.cache_high, "q8_0 rows: 8 stripes = 8 bits per value (+ scale)", 8});
  if (bands == 4) entries.push_back({5, pal.cache_high, "q4_0 rows: 4 stripes = 4 bits per value (+ scale)", 4});
  bool sinks = false, page = false, shared = false, scores = false;
  for (const BlockInstance& b : scene.cache_marks) {
    scores |= b.mark == CacheMark::kScore;
    sinks |= b.mark == CacheMark::kSinks;
    page |= b.mark == CacheMark::kPage;
    shared |= b.mark == CacheMark::kSharedPage;
  }
  // (eviction by score draws a score bar under every held block; each layer drops on its own)
  if (evicting)
    entries.push_back({4, pal.evicted,
                       scores ? "dropped by this layer's rule this step (bytes freed)"
                              : "evicted by the window this step (bytes freed)"});
  if (evicted) entries.push_back({2, pal.evicted, "evicted earlier: gone from the cache"});
  if (sinks) entries.push_back({2, pal.sink, "sink positions: always kept"});
  if (page) entries.push_back({2, pal.page, "page: a block of B positions (id = pool block)"});
  if (shared) entries.push_back({2, pal.shared, "page shared by branches (copied on first write)"});
}

// What is on screen in this phase, nothing more; `terse`: each entry without
// its parenthesised note ("newest token", not "newest token (just chosen)"),
// which keeps a legend at a large text scale short instead of small.
std::vector<LegendEntry> legend_entries(const Scene& scene, bool terse) {
  const Palette& pal = scene.palette;
  using Entry = LegendEntry;
  std::vector<Entry> entries = {
      {0, pal.prompt_token, "prompt token"},
      {0, pal.generated_token, "generated token"},
      {0, pal.new_token, "newest token (just chosen)"},
  };
  if (scene.chat)  // the chat view's tokens are tinted by who said them (scene_chat.h)
    entries = {{0, chat_role_colour(ChatRole::kSystem), "system prompt"},
               {0, chat_role_colour(ChatRole::kUser), "user"},
               {0, chat_role_colour(ChatRole::kAssistant), "assistant"},
               {0, chat_role_colour(ChatRole::kTemplate), "template markers (<|im_start|>, headers)"},
               {0, pal.new_token, "newest token (just chosen)"}};
  bool held = false, fresh = false, prefill = false, refill = false, recomputed = false, dropped = false;
  for (const BlockInstance& b : scene.kv) {
    held |= b.state == KvState::kResident;
    fresh |= b.state == KvState::kNew;
    prefill |= b.state == KvState::kPrefill;
    refill |= b.state == KvState::kRefill;
    recomputed |= b.state == KvState::kRecomputed;
    dropped |= b.state == KvState::kNewDropped;
  }
  bool scores = false;  // eviction by score: held blocks are coloured by their score
  for (const BlockInstance& b : scene.cache_marks) scores |= b.mark == CacheMark::kScore;
  if ((held || prefill || refill || fresh) && scores)
    entries.push_back({1, pal.ray, "K/V held: colour, bar = the score its layer keeps it by (height = |K|)"});
  else if (held || prefill || refill || fresh)
    entries.push_back({1, pal.cache_high, "K/V held in the cache (height, colour = |K|)"});
  if (prefill) entries.push_back({0, pal.prefill, "prefill: all prompt K/V in one pass"});
  if (refill) entries.push_back({0, pal.refill, "refill: cache rebuilt in one pass"});
  if (fresh || (dropped && !scene.rolled_back)) entries.push_back({0, pal.new_kv, "K/V computed for the first time"});
  if (scene.drafts) entries.push_back({0, kDraftColour, "drafted by the draft model, not yet verified"});
  if (scene.rolled_back) entries.push_back({4, pal.recomputed, "rejected draft: its K/V rolled back"});
  if (recomputed) entries.push_back({4, pal.recomputed, "recomputed, then thrown away (NO CACHE)"});
  cache_legend_entries(scene, entries);
  entries.push_back({2, pal.empty, "empty cache slot"});
  if (!scene.rays.empty()) entries.push_back({3, pal.ray, "attention of the newest token (width = weight)"});
  if (terse)
    for (LegendEntry& e : entries) e.text = e.text.substr(0, e.text.find(" ("));
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
    const float w = sw + pad + f->CalcTextSizeA(fs, 1e9f, 0.0f, e.text.c_str()).x;
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

// Over the view (not in a band of its own) the legend keeps to the
// bottom-left corner: at a large text scale or in a small view its text
// shrinks rather than covering the stacks.
float scale_over_view(const std::vector<LegendEntry>& entries, const OverlayFonts& fonts, ImVec2 size) {
  const LegendLayout full = layout_legend(entries, fonts, 0.0f);
  return std::clamp(std::min(size.x * 0.42f / full.box.x, size.y * 0.4f / full.box.y), 0.45f, 1.0f);
}

// The counter HUD's three lines for the shown step.
using HudLines = std::array<std::string, 3>;
HudLines hud_lines(const OverlayOptions& opt) {
  const StepRecord& r = *opt.record;
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.2f ms", r.ms);
  return {(opt.model_name.empty() ? std::string() : opt.model_name + "  \xC2\xB7  ") +
              (r.prefill ? std::string("prefill") : "step " + std::to_string(r.index)) + "  \xC2\xB7  " +
              std::to_string(r.seq_len) + " positions  \xC2\xB7  " +
              (r.mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE"),
          "this step " + format_flops(r.flops) + "  \xC2\xB7  so far " + format_flops(r.flops_total),
          "KV cache " + format_bytes(r.kv_bytes) + "  \xC2\xB7  recomputed " + std::to_string(r.recomputed) +
              "  \xC2\xB7  " + ms};
}

// What the HUD takes at the right of the legend's band at full size (its box
// and margins; width, height), or 0 when it is off or there is no step yet.
ImVec2 hud_room(const OverlayFonts& fonts, const OverlayOptions& opt) {
  if (!opt.hud || !opt.record) return ImVec2(0, 0);
  const float fs = fonts.small->FontSize, pad = 8.0f * fonts.scale;
  float w = 0;
  for (const std::string& l : hud_lines(opt)) w = std::max(w, fonts.small->CalcTextSizeA(fs, 1e9f, 0.0f, l.c_str()).x);
  return ImVec2(w + pad * 5, fs * 3.6f + pad * 3);
}

// The banner's text at `k` times the fonts' sizes in a view `width` wide:
// the title breaks at its dash, then shrinks, only if it is wider than the view; the line
// under it wraps (between its " \u00b7 " parts first, then between words)
// and shrinks only if a single word does not fit.
struct BannerLayout {
  float title_fs = 0, sub_fs = 0;
  std::vector<std::string> title_lines;  // the title, in two lines at its dash when too wide
  ImVec2 title;                          // the title's text size
  std::vector<std::string> sub_lines;    // the line under the title, wrapped
  ImVec2 box;                            // the box around both, with its padding
};

constexpr float kBannerMargin = 10.0f;  // above the box (and 0.6 of it below), at text scale 1

// The line under the title in lines of at most `room` pixels: between its
// " \u00b7 " parts first, then between words where one part is too wide;
// balanced, so no word is left alone on a last line (balanced_lines).
std::vector<std::string> wrap_banner_line(const std::string& text, ImFont* f, float fs, float room) {
  const auto width = [&](const std::string& t) { return f->CalcTextSizeA(fs, 1e9f, 0.0f, t.c_str()).x; };
  std::vector<std::string> lines;
  for (const std::string& part : balanced_lines(split_after(text, " \xC2\xB7 "), width, room)) {
    if (width(part) <= room) {
      lines.push_back(part);
      continue;
    }
    for (const std::string& l : balanced_lines(split_after(part, " "), width, room)) lines.push_back(l);
  }
  return lines;
}

BannerLayout layout_banner(const Scene& scene, const OverlayFonts& fonts, float width, float k) {
  BannerLayout b;
  const float sk = fonts.scale * k;
  const float room = std::max(1.0f, width - 40.0f * sk);
  b.title_fs = fonts.banner->FontSize * k;
  auto measure = [&](const std::vector<std::string>& lines) {
    ImVec2 size(0, 0);
    for (const std::string& l : lines) {
      const ImVec2 ls = fonts.banner->CalcTextSizeA(b.title_fs, 1e9f, 0.0f, l.c_str());
      size = ImVec2(std::max(size.x, ls.x), size.y + ls.y);
    }
    return size;
  };
  b.title_lines = {scene.banner};
  b.title = measure(b.title_lines);
  const std::string dash = " \xE2\x80\x94 ";  // "DECODE · NO CACHE — recomputing ...": two lines at the dash
  const size_t at = scene.banner.find(dash);
  if (b.title.x > room && at != std::string::npos) {
    b.title_lines = {scene.banner.substr(0, at), scene.banner.substr(at + dash.size())};
    b.title = measure(b.title_lines);
  }
  if (b.title.x > room) {
    b.title_fs *= room / b.title.x;
    b.title = measure(b.title_lines);
  }
  // The second line never outgrows a title shrunk to fit a narrow view (a
  // phone at text scale 2.5 drew it larger than the title above it).
  b.sub_fs = std::min(fonts.small->FontSize * 1.05f * k, b.title_fs * 0.85f);
  b.sub_lines = wrap_banner_line(scene.banner_sub, fonts.small, b.sub_fs, room);
  float sub_w = 0;
  for (const std::string& l : b.sub_lines)
    sub_w = std::max(sub_w, fonts.small->CalcTextSizeA(b.sub_fs, 1e9f, 0.0f, l.c_str()).x);
  if (sub_w > room) {  // a single word wider than the view
    b.sub_fs *= room / sub_w;
    sub_w = room;
  }
  const float line_h = fonts.small->CalcTextSizeA(b.sub_fs, 1e9f, 0.0f, "Ag").y;
  b.box = ImVec2(std::max(b.title.x, sub_w) + 36.0f * sk,
                 b.title.y + line_h * static_cast<float>(b.sub_lines.size()) + 16.0f * sk);
  return b;
}

}  // namespace

// In a band the legend's rows leave the HUD its room on the right, unless
// that would leave them less than half the width.
float legend_rows_width(const OverlayFonts& fonts, const OverlayOptions& opt, float width) {
  const float hud = hud_room(fonts, opt).x;
  return hud > 0 && width - hud >= width * 0.5f ? width - hud : width;
}

ImVec4 draw_banner(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, float k,
                   float* line_px) {
  if (scene.banner.empty()) return ImVec4(0, 0, 0, 0);
  const BannerLayout b = layout_banner(scene, fonts, size.x, k);
  const glm::vec3 c = phase_colour(scene.phase, scene.palette);
  const float sk = fonts.scale * k;
  const ImVec2 p0(origin.x + (size.x - b.box.x) * 0.5f, origin.y + kBannerMargin * sk);
  const ImVec2 p1(p0.x + b.box.x, p0.y + b.box.y);
  dl->AddRectFilled(p0, p1, to_imcolor(c * 0.16f, 0.92f), 8.0f);
  dl->AddRect(p0, p1, to_imcolor(c), 8.0f, 0, 2.5f);
  float y = p0.y + 5.0f * sk;
  for (const std::string& line : b.title_lines) {
    const ImVec2 ls = fonts.banner->CalcTextSizeA(b.title_fs, 1e9f, 0.0f, line.c_str());
    dl->AddText(fonts.banner, b.title_fs, ImVec2(p0.x + (b.box.x - ls.x) * 0.5f, y), to_imcolor(c), line.c_str());
    y += ls.y;
  }
  y += 3.0f * sk;
  for (const std::string& line : b.sub_lines) {
    const ImVec2 ls = fonts.small->CalcTextSizeA(b.sub_fs, 1e9f, 0.0f, line.c_str());
    dl->AddText(fonts.small, b.sub_fs, ImVec2(p0.x + (b.box.x - ls.x) * 0.5f, y), IM_COL32(225, 230, 240, 255),
                line.c_str());
    y += ls.y;
  }
  if (line_px) *line_px = b.sub_fs;
  return ImVec4(p0.x, p0.y, p1.x, p1.y);
}

float banner_band(const Scene& scene, const OverlayFonts& fonts, float width, float k) {
  if (scene.banner.empty()) return 0.0f;
  return layout_banner(scene, fonts, width, k).box.y + 1.6f * kBannerMargin * fonts.scale * k;
}

ImVec4 draw_legend(ImDrawList* dl, const Scene& scene, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, bool flow,
                   float band_k, float rows_w, bool terse) {
  const Palette& pal = scene.palette;
  ImFont* f = fonts.small;
  const std::vector<LegendEntry> entries = legend_entries(scene, terse);
  const int n = static_cast<int>(entries.size());
  const float k = flow ? band_k : scale_over_view(entries, fonts, size);
  const float fs = f->FontSize * k;
  const float row = fs * 1.3f;
  const float sw = fs * 1.1f;  // swatch size
  const float pad = 8.0f * fonts.scale * k;
  const LegendLayout lay = layout_legend(entries, fonts, flow ? rows_w - 2 * pad : 0.0f, k);
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
        // The gradient of held blocks: low to e.c (|K|: cache_high; a score: the rays' colour).
        dl->AddRectFilledMultiColor(a, b, to_imcolor(e.c), to_imcolor(e.c), to_imcolor(pal.cache_low),
                                    to_imcolor(pal.cache_low));
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
    dl->AddText(f, fs, ImVec2(b.x + pad, slot.y + (row - fs) * 0.5f), IM_COL32(220, 225, 235, 255), e.text.c_str());
  }
  return ImVec4(p0.x, p0.y, p0.x + box.x, p0.y + box.y);
}

ImVec4 draw_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const OverlayOptions& opt,
                const Palette& pal, const ImVec4& avoid) {
  if (!opt.record) return ImVec4(0, 0, 0, 0);
  const StepRecord& r = *opt.record;
  ImFont* f = fonts.small;
  float fs = f->FontSize;
  const HudLines lines = hud_lines(opt);
  const std::string &l1 = lines[0], &l2 = lines[1], &l3 = lines[2];
  const float pad = 8.0f * fonts.scale;
  float w = 0;
  for (const std::string* s : {&l1, &l2, &l3}) w = std::max(w, f->CalcTextSizeA(fs, 1e9f, 0.0f, s->c_str()).x);
  // Shrunk to fit beside the legend (or the width) instead of running off the
  // edge, but left out where that would take it under 70 % of its size: a
  // smear no one can read (the panels and --json carry the same numbers).
  const float room = std::max(40.0f, size.x - (avoid.z > avoid.x ? avoid.z - origin.x : 0.0f) - pad * 4);
  if (room < w * 0.7f) return ImVec4(0, 0, 0, 0);
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
              r.kv_bytes ? to_imcolor(pal.cache_high) : to_imcolor(pal.recomputed), l3.c_str());
  return ImVec4(p0.x, p0.y, p0.x + w + pad * 2, p0.y + box_h);
}

float legend_band(const Scene& scene, const OverlayFonts& fonts, const OverlayOptions& opt, float width) {
  if (!opt.legend) return 0.0f;
  const float k = opt.legend_scale;
  const float pad = 8.0f * fonts.scale * k;
  const float rows =
      layout_legend(legend_entries(scene, opt.legend_terse), fonts, legend_rows_width(fonts, opt, width) - 2 * pad, k)
          .box.y;
  const ImVec2 hud = hud_room(fonts, opt);
  return std::max(rows + 2 * pad, hud.x > 0 && width - hud.x >= width * 0.5f ? hud.y : 0.0f);
}

bool legend_fits_width(const Scene& scene, const OverlayFonts& fonts, const OverlayOptions& opt, float width) {
  if (!opt.legend) return true;
  const float k = opt.legend_scale;
  const float rows_w = legend_rows_width(fonts, opt, width) - 2 * 8.0f * fonts.scale * k;
  // layout_legend gives an entry wider than the rows a row of its own, as wide as it is.
  return layout_legend(legend_entries(scene, opt.legend_terse), fonts, rows_w, k).box.x <= rows_w;
}

namespace {

struct LinePiece {
  std::string text;
  ImU32 colour;
  bool newest;
};

// The token labels' texts in order as running text (visible_piece's leading
// U+00B7 back to spaces); empty for a scene that is not one sequence.
std::vector<LinePiece> line_pieces(const Scene& scene) {
  std::vector<LinePiece> out;
  if (scene.drafts) return out;
  // Beam search repeats positions, one lane each (z = -lane * pitch): the
  // line is the front lane's, the best running beam's path, in order.
  std::map<int, const Label*> front;
  bool lanes = false;
  for (const Label& l : scene.labels)
    if (l.kind == LabelKind::kToken) lanes |= !front.emplace(l.pos, &l).second;
  std::vector<const Label*> tokens;
  if (lanes) {
    front.clear();
    for (const Label& l : scene.labels)
      if (l.kind == LabelKind::kToken && std::fabs(l.anchor.z) < 1e-3f) front.emplace(l.pos, &l);
    for (const auto& [pos, l] : front) tokens.push_back(l);
  } else {
    for (const Label& l : scene.labels)
      if (l.kind == LabelKind::kToken) tokens.push_back(&l);
  }
  int last = -1;
  for (const Label* lp : tokens) {
    const Label& l = *lp;
    if (l.pos <= last) return {};
    std::string t;
    size_t i = 0;
    for (; l.text.compare(i, 2, "\xC2\xB7") == 0; i += 2) t += ' ';
    t += l.text.substr(i);
    if (last >= 0 && l.pos > last + 1) t = " \xE2\x80\xA6" + t;  // columns without labels between
    out.push_back({t, to_imcolor(glm::vec3(l.colour), std::clamp(l.colour.a, 0.0f, 1.0f)), l.pos == scene.slot});
    last = l.pos;
  }
  return out;
}

// Where the line goes: its first piece shown and its plate. Along the top
// edge in its widest free stretch, else along the bottom edge where
// `bottom_ok` (where the rays' weights go); only in a stretch of at least
// 40 % of the width, or that holds the whole line.
bool line_spot(const std::vector<float>& widths, float lead, float h, float pad, const glm::vec4& clip, bool bottom_ok,
               const std::vector<ScreenBox>& keep_off, size_t* first, ScreenBox* out) {
  float total = 2.0f * pad;
  for (float w : widths) total += w;
  for (int edge = 0; edge < (bottom_ok ? 2 : 1); ++edge) {
    const float y0 = edge == 0 ? clip.y + 2.0f : clip.w - 2.0f - h;
    const glm::vec2 span =
        widest_free_span(keep_off, glm::vec2(clip.x + 3.0f, clip.z - 3.0f), glm::vec2(y0, y0 + h), 3.0f);
    const float room = span.y - span.x;
    if (room < std::min(total, 0.4f * (clip.z - clip.x))) continue;
    *first = tail_that_fits(widths, room - 2.0f * pad, lead);
    if (*first >= widths.size()) continue;
    float w = 2.0f * pad + (*first > 0 ? lead : 0.0f);
    for (size_t i = *first; i < widths.size(); ++i) w += widths[i];
    // Centred on the view where the stretch allows, else at its nearer end.
    const float mid = 0.5f * (clip.x + clip.z);
    const float x = std::clamp(mid - 0.5f * w, span.x, span.y - w);
    *out = flat_box(glm::vec2(x, y0), glm::vec2(w, h));
    return true;
  }
  return false;
}

}  // namespace

bool draw_text_line(ImDrawList* dl, const Scene& scene, const OverlayFonts& fonts, const glm::vec4& clip,
                    bool bottom_ok, const std::vector<ScreenBox>& keep_off, ScreenBox* out) {
  const std::vector<LinePiece> pieces = line_pieces(scene);
  if (pieces.size() < 2) return false;
  ImFont* f = fonts.small;
  // The small font's size at text scale 1, a little under it at a projector's
  // 2.5 (still larger than the labels' at 1.5), where the view is short.
  const float fs = f->FontSize * std::clamp(1.1f - 0.1f * fonts.scale, 0.85f, 1.0f), pad = 6.0f * fonts.scale;
  auto width = [&](const std::string& t) { return f->CalcTextSizeA(fs, 1e9f, 0.0f, t.c_str()).x; };
  std::vector<float> widths;
  for (const LinePiece& p : pieces) widths.push_back(width(p.text));
  const char* ellipsis = "\xE2\x80\xA6";
  const float lead = width(ellipsis), h = f->CalcTextSizeA(fs, 1e9f, 0.0f, "Ag").y + 2.0f;
  size_t first = 0;
  if (!line_spot(widths, lead, h, pad, clip, bottom_ok, keep_off, &first, out)) return false;
  const ImVec2 a(out->c[0].x, out->c[0].y), b(out->c[2].x, out->c[2].y);
  dl->AddRectFilled(a, b, IM_COL32(4, 6, 12, 200), 5.0f);
  dl->AddRect(a, b, IM_COL32(90, 100, 130, 160), 5.0f, 0, 1.0f);
  float x = a.x + pad;
  if (first > 0) {
    dl->AddText(f, fs, ImVec2(x, a.y + 1.0f), IM_COL32(150, 160, 185, 255), ellipsis);
    x += lead;
  }
  for (size_t i = first; i < pieces.size(); ++i) {
    const std::string& t = pieces[i].text;
    dl->AddText(f, fs, ImVec2(x, a.y + 1.0f), pieces[i].colour, t.c_str());
    if (pieces[i].newest) {  // underlined from its first letter (after a leading space)
      const float x0 = x + width(t.substr(0, std::min(t.find_first_not_of(' '), t.size())));
      dl->AddLine(ImVec2(x0, b.y - 3.0f), ImVec2(x + widths[i], b.y - 3.0f), pieces[i].colour, 2.0f);
    }
    x += widths[i];
  }
  return true;
}

}  // namespace kvscope
