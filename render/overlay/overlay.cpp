// The overlay's text on the scene: token labels through the label layout,
// layer numbers, position ticks, the write head's and the rays' tags; the
// boxes at the view's edges are in overlay_boxes.cpp.
#include "render/overlay/overlay.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "render/overlay/overlay_boxes.h"
#include "render/overlay/overlay_tags.h"
#include "render/scene/label_layout.h"
#include "render/scene/scene_format.h"

namespace kvscope {

namespace {

// The smallest a row caption or layer number is drawn at (pixels).
constexpr float kSideLabelMinPx = 11.0f;

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
    r.faint = l.colour.a < 0.6f;
    r.minor = is_minor_text(l.text);
    ImFont* f = newest ? fonts.banner : fonts.label;
    const float size = newest ? fs * 1.25f : fs;
    r.flat = gv(f->CalcTextSizeA(size, 1e9f, 0.0f, l.text.c_str())) + glm::vec2(8.0f, 2.0f);  // with the plate
    r.flat_preferred = spacing(i) >= fonts.label->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str()).x + 6.0f;
    slanted_text[i] = truncate_utf8(l.text, 14);
    r.slanted = gv(fonts.label->CalcTextSizeA(fs, 1e9f, 0.0f, slanted_text[i].c_str())) + glm::vec2(3.5f, 1.5f);
    // A lane's band (beam search) is a ceiling where it opens room on screen
    // (seen from above: up to the next lane's blocks). Seen along the lanes
    // (FRONT) it projects to less than a line of text: the lanes lie behind
    // one another and the label sits over its own block, as in one sequence
    // (a ceiling there would leave every label out).
    ImVec2 edge;
    if (l.band > 0 && req[i].visible && proj(l.anchor - glm::vec3(0.0f, 0.0f, l.band), edge) &&
        r.anchor.y - edge.y >= r.slanted.y)
      r.ceiling = std::min(edge.y, r.anchor.y);
  }
  return req;
}

// Token labels where layout_labels puts them: flat on a plate, or slanted
// and shortened, or left out where they would overlap.
void draw_token_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                       const OverlayOptions& opt, const std::vector<ScreenBox>& taken, float top,
                       std::vector<ScreenBox>* placed) {
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
  lo.clip = glm::vec4(cmin.x, std::max(cmin.y, top), cmax.x, cmax.y);
  lo.min_slanted = fs * 2.5f;
  lo.obstacles = taken;
  const std::vector<LabelPlacement> at = layout_labels(req, lo);
  for (size_t i = 0; i < labels.size(); ++i) {
    const LabelPlacement& p = at[i];
    if (p.mode == LabelMode::kHidden) continue;
    if (placed) placed->push_back(p.box);
    const Label& l = *labels[i];
    const ImU32 col = col4(l.colour);
    // The plate fades with its text (a pruned branch's label).
    const ImU32 plate = IM_COL32(4, 6, 12, static_cast<int>(190 * std::clamp(l.colour.a, 0.0f, 1.0f)));
    if (p.mode == LabelMode::kFlat) {
      const bool newest = l.pos == scene.slot;
      ImFont* f = newest ? fonts.banner : font;
      const float size = newest ? fs * 1.25f : fs;
      const ImVec2 a(p.pos.x, p.pos.y), b(p.pos.x + req[i].flat.x, p.pos.y + req[i].flat.y);
      dl->AddRectFilled(a, b, plate, 4.0f);
      if (req[i].priority) dl->AddRect(a, b, col, 4.0f, 0, 1.5f);
      dl->AddText(f, size, ImVec2(a.x + 4, a.y + 1), col, l.text.c_str());
      continue;
    }
    // Slanted: the text shortened to the length that fits, on a plate like
    // the flat ones (it may cross the rays and the grid).
    std::string text = slanted_text[i];
    if (p.length < req[i].slanted.x) text = fit_utf8(font, fs, text, p.length - 3.5f);
    const ImVec2 c[4] = {ImVec2(p.box.c[0].x, p.box.c[0].y), ImVec2(p.box.c[1].x, p.box.c[1].y),
                         ImVec2(p.box.c[2].x, p.box.c[2].y), ImVec2(p.box.c[3].x, p.box.c[3].y)};
    dl->AddQuadFilled(c[0], c[1], c[2], c[3], plate);
    const float text_h = req[i].slanted.y - 1.5f;
    const int start = dl->VtxBuffer.Size;
    text_with_shadow(dl, font, fs, ImVec2(p.pos.x + 2.0f, p.pos.y - text_h * 0.5f), col, text.c_str());
    rotate_since(dl, start, ImVec2(p.pos.x, p.pos.y), lo.angle);
  }
}

// Layer numbers and row captions; their boxes go into `drawn` (the ray
// weights keep clear of them).
// Seen from above (`from_above`) the stacks hide under the tokens: only the
// tokens' caption is drawn (the stacks' captions and the layer numbers, their
// rows one under the other, would sit on the first tokens).
void draw_side_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                      bool from_above, std::vector<ScreenBox>& drawn) {
  ImFont* font = fonts.small;
  const size_t first = drawn.size();
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  std::vector<const Label*> order;
  for (const Label& l : scene.labels) {
    const bool caption = l.kind == LabelKind::kCaption, layer = l.kind == LabelKind::kLayer;
    if ((caption || layer) && (!from_above || (caption && l.pos == -1))) order.push_back(&l);  // -1: "tokens"
  }
  for (const Label* lp : order) {
    const Label& l = *lp;
    ImVec2 p;
    if (!proj(l.anchor, p)) continue;
    // A row that starts off screen (a camera that follows the newest
    // position) gets no caption: one pushed in from the edge would sit on
    // the row's blocks, far from where the row starts.
    if (p.x < cmin.x || p.x > cmax.x || p.y < cmin.y || p.y > cmax.y) continue;
    float fs = l.kind == LabelKind::kCaption ? font->FontSize * 1.1f : font->FontSize;
    ImVec2 ts = font->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    // Right-aligned to the anchor; where the view's left edge would cut it
    // (a large text scale in a narrow view), a little smaller, down to a size
    // still read from the back row; where even that does not fit, left out
    // (never cut by the edge, never a caption too small to read).
    const float margin = 2.0f;
    const float room = p.x - cmin.x - margin;
    if (ts.x > room) {
      const float smallest = std::min(fs, std::max(kSideLabelMinPx, fs * 0.7f));
      fs = std::max(smallest, fs * room / ts.x);
      ts = font->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
      if (ts.x > room + 0.5f) continue;
    }
    const ScreenBox r = side_label_box(glm::vec2(p.x, p.y), glm::vec2(ts.x, ts.y));
    // From the top, layers coincide; two labels also keep a gap of half a
    // letter, so they never read as one word ("tokensL0").
    bool overlaps = false;
    for (size_t i = first; i < drawn.size(); ++i) overlaps |= boxes_overlap(r, drawn[i], fs * 0.5f);
    if (overlaps) continue;
    drawn.push_back(r);
    text_with_shadow(dl, font, fs, ImVec2(r.c[0].x, r.c[0].y), col4(l.colour), l.text.c_str());
  }
}

// Position numbers on the ground; one that would touch a caption or tag in
// `captions`, or come within half a letter of a layer number or row caption
// in `side` beside, above or under it (crowds_in_line: "L0" and the tick "0"
// never read as "L00" or stack in one column), is left out: the others say
// more. The ticks drawn go into `drawn`.
void draw_ticks(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                const std::vector<ScreenBox>& captions, const std::vector<ScreenBox>& side,
                std::vector<ScreenBox>& drawn) {
  if (scene.slot < 0) return;
  // An aggregated column is ticked with its first position (scenes without
  // columns, ray and speculative ones, have one per position).
  Layout L;
  L.columns = scene.columns;
  if (L.columns.n_pos <= 0) L.columns.n_pos = scene.slot + 1;
  ImVec2 a, b;
  const float z = L.block_w * 0.5f + 0.45f;
  if (!proj({0.0f, -0.07f, z}, a) || !proj({L.pitch, -0.07f, z}, b)) return;
  const float px_per_col = std::max(1e-3f, std::hypot(b.x - a.x, b.y - a.y));
  ImFont* font = fonts.small;
  // Ticks at least 44 pixels apart, more at a large text scale (two digits and a gap).
  const float min_gap = std::max(44.0f, font->FontSize * 2.6f);
  const int step = nice_step(std::max(1.0f, min_gap / px_per_col));
  const Columns& cols = L.columns;
  for (int c = 0; c < cols.count(); ++c) {
    const int p = cols.first(c);
    if ((cols.aggregated(c) ? c : p) % step != 0) continue;
    ImVec2 s;
    if (!proj({L.x(p), -0.07f, z}, s)) continue;
    const std::string t = std::to_string(p);
    const ImVec2 ts = font->CalcTextSizeA(font->FontSize, 1e9f, 0.0f, t.c_str());
    // Kept above the view's bottom edge (a short view at a large text scale).
    const float y = std::min(s.y, dl->GetClipRectMax().y - ts.y);
    const ScreenBox box = flat_box(glm::vec2(s.x - ts.x * 0.5f, y), glm::vec2(ts.x, ts.y));
    const auto touches = [&](const ScreenBox& c) { return boxes_overlap(box, c, 2.0f); };
    const auto crowds = [&](const ScreenBox& c) { return crowds_in_line(box, c, 0.5f * font->FontSize); };
    if (std::any_of(captions.begin(), captions.end(), touches) || std::any_of(side.begin(), side.end(), crowds))
      continue;
    drawn.push_back(box);
    dl->AddText(font, font->FontSize, ImVec2(s.x - ts.x * 0.5f, y), IM_COL32(140, 150, 175, 220), t.c_str());
  }
}

// A block's extent on screen, cut to the view; false when it is out of view.
bool block_extent(const BlockInstance& b, const Projector& proj, ImVec2 cmin, ImVec2 cmax, glm::vec2& lo,
                  glm::vec2& hi) {
  lo = glm::vec2(1e9f);
  hi = glm::vec2(-1e9f);
  for (int c = 0; c < 8; ++c) {
    const glm::vec3 corner = b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
    ImVec2 p;
    if (!proj(corner, p)) continue;
    lo = glm::min(lo, gv(p));
    hi = glm::max(hi, gv(p));
  }
  lo = glm::max(lo, gv(cmin));
  hi = glm::min(hi, gv(cmax));
  return lo.x < hi.x && lo.y < hi.y;
}

// The extent on screen of `blocks` (one box), cut to the view; far off
// screen when none is in view.
ScreenBox blocks_box(const std::vector<BlockInstance>& blocks, const Projector& proj, ImVec2 cmin, ImVec2 cmax) {
  glm::vec2 lo(1e9f), hi(-1e9f), a, b;
  for (const BlockInstance& blk : blocks) {
    if (!block_extent(blk, proj, cmin, cmax, a, b)) continue;
    lo = glm::min(lo, a);
    hi = glm::max(hi, b);
  }
  if (lo.x >= hi.x || lo.y >= hi.y) return flat_box(glm::vec2(-1e6f), glm::vec2(0.0f));
  return flat_box(lo, hi - lo);
}

// The KV blocks' extent on screen (one box).
ScreenBox stacks_box(const Scene& scene, const Projector& proj, ImVec2 cmin, ImVec2 cmax) {
  return blocks_box(scene.kv, proj, cmin, cmax);
}

// The text line (draw_text_line) clear of the blocks and of `keep_off`,
// under a banner drawn over the view and off the bottom edge where the
// legend or the HUD is drawn over it.
bool place_text_line(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                     const OverlayOptions& opt, const std::vector<ScreenBox>& keep_off, ScreenBox* line) {
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  std::vector<ScreenBox> off = keep_off;
  off.push_back(stacks_box(scene, proj, cmin, cmax));
  off.push_back(blocks_box(scene.tokens, proj, cmin, cmax));
  off.push_back(blocks_box(scene.markers, proj, cmin, cmax));
  const float top = cmin.y + (opt.banner && opt.top <= 0 ? banner_band(scene, fonts, cmax.x - cmin.x) : 0.0f);
  const bool bottom_ok = opt.band > 0 || (!opt.legend && !opt.hud);
  return draw_text_line(dl, scene, fonts, glm::vec4(cmin.x, top, cmax.x, cmax.y), bottom_ok, off, line);
}

// Where the newest token's label goes flat above its block (as
// label_requests measures it), for the head's tag to keep clear of: seen from
// above, the head sits at the row's end and its tag would take that spot.
ImVec4 newest_label_room(const Scene& scene, const Projector& proj, const OverlayFonts& fonts) {
  for (const Label& l : scene.labels) {
    ImVec2 a;
    if (l.kind != LabelKind::kToken || l.pos != scene.slot || !proj(l.anchor, a)) continue;
    const ImVec2 ts = fonts.banner->CalcTextSizeA(fonts.label->FontSize * 1.25f, 1e9f, 0.0f, l.text.c_str());
    return ImVec4(a.x - ts.x * 0.5f - 4.0f, a.y - ts.y - 6.0f, a.x + ts.x * 0.5f + 4.0f, a.y);
  }
  return ImVec4(0, 0, 0, 0);
}

// The write head's tag and the drafted tokens' tags (place_tags). A tag that
// would be pushed under the banner, out of the view or onto the tokens makes
// them all smaller, from 1.1 times the small font down to half of it (never
// under 11 pixels): at a projector's text scale they stay as large as the
// room above the row allows, in proportion to the other labels. At each
// size, a tag with a wide form (short_text: fewer, longer lines) tries it
// where its tall form does not fit. `from_above`: the camera looks down on
// the row, where the head projects onto the tokens (its tag then keeps off
// them). Each tag's box goes into `taken`; `zone` receives, for the rays'
// weights to keep well clear of, each tag with a margin and the line from it
// down to its anchor. Returns the font size drawn.
float draw_head_label(ImDrawList* dl, const Scene& scene, const Projector& proj, const OverlayFonts& fonts,
                      bool banner_over_view, bool from_above, std::vector<ScreenBox>& taken,
                      std::vector<ScreenBox>& zone) {
  ImFont* f = fonts.small;
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  // Under a banner over the view nothing can be read.
  const float top = cmin.y + 4.0f + (banner_over_view ? banner_band(scene, fonts, cmax.x - cmin.x) : 0.0f);
  // A score beside its ray's tip reads as that ray's while it stays on
  // the tip's row and off every token (close lanes at a large text scale).
  std::vector<ScreenBox> tokens;
  std::vector<ImVec4> token_rects;
  glm::vec2 lo, hi;
  for (const BlockInstance& b : scene.tokens) {
    if (!block_extent(b, proj, cmin, cmax, lo, hi)) continue;
    tokens.push_back(flat_box(lo, hi - lo));
    if (from_above) token_rects.emplace_back(lo.x, lo.y, hi.x, hi.y);
  }
  if (from_above) token_rects.push_back(newest_label_room(scene, proj, fonts));
  std::vector<TagAnchor> anchors;
  bool wide = false;
  for (const Label& l : scene.labels) {
    ImVec2 p;
    if (l.kind != LabelKind::kHead || !proj(l.anchor, p)) continue;
    anchors.push_back({&l, p});
    wide |= !l.short_text.empty();
  }
  auto off_tokens = [&](const Tag& t) {
    const ScreenBox box = flat_box(glm::vec2(t.at.x - 5, t.at.y - 2), glm::vec2(t.size.x + 10, t.size.y + 4));
    return std::none_of(tokens.begin(), tokens.end(), [&](const ScreenBox& o) { return boxes_overlap(box, o); });
  };
  // Beside its anchor: on the tip's row. Above it: not pushed down over it
  // by the view's top. Either way off every token.
  auto readable = [&](const Tag& t) {
    const bool placed = t.label->beside ? std::fabs(t.at.y + t.size.y * 0.5f - t.anchor.y) <= t.size.y * 0.5f + 2.0f
                                        : t.at.y + t.size.y <= t.anchor.y;
    return (t.at.y >= top || t.at.y >= t.anchor.y - t.size.y - 5.0f) && t.at.x + t.size.x <= cmax.x - 1.0f && placed &&
           off_tokens(t);
  };
  const float smallest = std::max(11.0f, f->FontSize * 0.5f);
  // Drafted tokens' tags are their tokens' labels: the largest size that
  // fits, in steps of 10 %. The head's tag shares the row's top with the
  // token labels: steps of a quarter (a larger tag would cost labels).
  const float step = wide ? 0.9f : 0.75f;
  float fs = f->FontSize * 1.1f;
  std::vector<Tag> tags;
  bool ok = false;
  for (;; fs *= step) {
    for (int form = 0; form < (wide ? 2 : 1) && !ok; ++form) {
      tags = place_tags(anchors, f, fs, form, cmin, cmax, token_rects);
      ok = std::all_of(tags.begin(), tags.end(), readable);
    }
    if (ok || fs * step < smallest) break;
  }
  for (const Tag& t : tags) {
    const ImVec2 q = t.at, ts = t.size, p = t.anchor;
    const ImU32 col = col4(t.label->colour);
    const float m = fs * 0.4f;
    zone.push_back(flat_box(glm::vec2(q.x - 5 - m, q.y - 2 - m), glm::vec2(ts.x + 10 + 2 * m, ts.y + 4 + 2 * m)));
    if (!t.label->beside && (q.y + ts.y + 2 < p.y - 6.0f || p.x < q.x - 5 || p.x > q.x + ts.x + 5)) {
      const ImVec2 foot(std::clamp(p.x, q.x, q.x + ts.x), q.y + ts.y + 2);
      dl->AddLine(foot, p, col4(t.label->colour * glm::vec4(1, 1, 1, 0.6f)), 1.0f);
      zone.push_back(flat_box(glm::vec2(std::min(foot.x, p.x) - 3, foot.y),
                              glm::vec2(std::fabs(p.x - foot.x) + 6, std::max(0.0f, p.y - foot.y))));
    }
    taken.push_back(flat_box(glm::vec2(q.x - 5, q.y - 2), glm::vec2(ts.x + 10, ts.y + 4)));
    dl->AddRectFilled(ImVec2(q.x - 5, q.y - 2), ImVec2(q.x + ts.x + 5, q.y + ts.y + 2), IM_COL32(30, 6, 28, 210), 5.0f);
    dl->AddRect(ImVec2(q.x - 5, q.y - 2), ImVec2(q.x + ts.x + 5, q.y + ts.y + 2), col, 5.0f, 0, 1.5f);
    dl->AddText(f, fs, q, col, t.text->c_str());
  }
  return tags.empty() ? 0.0f : fs;
}

// Sink / window bars' and pages' captions, on the ground in front of them,
// in the scene's order (the most telling first): whole inside the view and
// clear of the stacks and of every label, tag and earlier caption, or left
// out (place_captions). A caption whose full text has no room takes its
// short text; where that leaves captions out, the row takes a smaller font
// (never under 11 pixels). Returns their boxes.
std::vector<ScreenBox> draw_cache_mark_labels(ImDrawList* dl, const Scene& scene, const Projector& proj,
                                              const OverlayFonts& fonts, std::vector<ScreenBox> keep_off) {
  ImFont* f = fonts.small;
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  keep_off.push_back(stacks_box(scene, proj, cmin, cmax));
  std::vector<float> font_sizes = {f->FontSize};
  if (f->FontSize * 0.8f >= 11.0f) font_sizes.push_back(f->FontSize * 0.8f);
  auto text_of = [](const Label& l, int form) -> const std::string& {
    return form == 1 && !l.short_text.empty() ? l.short_text : l.text;
  };
  std::vector<const Label*> labels;
  std::vector<CaptionRequest> req;
  for (const Label& l : scene.labels) {
    ImVec2 p;
    if (l.kind != LabelKind::kCacheMark || !proj(l.anchor, p)) continue;
    CaptionRequest r;
    r.anchor = gv(p);
    for (float size : font_sizes) {
      r.sizes.emplace_back();
      for (int form : {0, 1})
        r.sizes.back().push_back(gv(f->CalcTextSizeA(size, 1e9f, 0.0f, text_of(l, form).c_str())) + glm::vec2(6, 2));
    }
    labels.push_back(&l);
    req.push_back(r);
  }
  const CaptionPlacement at = place_captions(req, keep_off, glm::vec4(cmin.x, cmin.y, cmax.x, cmax.y), 2.0f);
  std::vector<ScreenBox> drawn;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (at.form[i] < 0) continue;
    const float size = font_sizes[static_cast<size_t>(at.variant)];
    drawn.push_back(at.box[i]);
    const ImVec2 a(at.box[i].c[0].x, at.box[i].c[0].y), b(at.box[i].c[2].x, at.box[i].c[2].y);
    dl->AddRectFilled(a, b, IM_COL32(4, 6, 12, 190), 3.0f);
    dl->AddText(f, size, ImVec2(a.x + 3, a.y + 1), col4(labels[i]->colour), text_of(*labels[i], at.form[i]).c_str());
  }
  return drawn;
}

// The points a ray's weight (a plate `h` pixels high) may sit at, best
// first: along its arc from the middle outwards, then right under where the
// ray lands, below the stacks' position numbers (`ticks` pixels high) or,
// in a short view, in their row (they give way); the first `on_arc` are on
// the arc.
std::vector<glm::vec2> ray_tag_spots(const RayInstance& ray, const Projector& proj, const Camera& camera,
                                     const ScreenBox& stacks, float ticks, float h, size_t& on_arc) {
  std::vector<glm::vec2> spots;
  for (float t : {0.55f, 0.45f, 0.65f, 0.35f, 0.75f, 0.25f, 0.85f, 0.15f}) {
    ImVec2 p;
    if (proj(ray_arc_point(ray, t, kRayArc, camera.stretch_y), p)) spots.push_back(gv(p));
  }
  on_arc = spots.size();
  ImVec2 end;
  if (proj(ray.to, end))
    for (float below : {ticks + 5.0f, 5.0f}) spots.push_back(glm::vec2(end.x, stacks.c[2].y + below + h * 0.5f));
  return spots;
}

// The strongest rays' weights (two at a large text scale), each small, on
// a translucent plate on its own ray's arc, clear of the stacks, the tokens
// and `keep_off` (the labels and tags drawn before), so no weight hides a
// K/V column or a token; where the arc has no room (the front camera, whose
// arcs run over the stacks), under the stacks with a thin line up to where
// the ray lands; else left out. Their boxes go into `taken`.
void draw_ray_labels(ImDrawList* dl, const Scene& scene, const Projector& proj, const Camera& camera,
                     const OverlayFonts& fonts, std::vector<ScreenBox> keep_off, std::vector<ScreenBox>& taken) {
  ImFont* f = fonts.small;
  const float fs = std::max(11.0f, f->FontSize * 0.85f);
  const ImVec2 cmin = dl->GetClipRectMin(), cmax = dl->GetClipRectMax();
  const ScreenBox stacks = stacks_box(scene, proj, cmin, cmax);
  keep_off.push_back(stacks);
  keep_off.push_back(blocks_box(scene.tokens, proj, cmin, cmax));
  const int most = fonts.scale >= 1.75f ? 2 : 3;
  int shown = 0;
  for (const Label& l : scene.labels) {
    if (l.kind != LabelKind::kRay || shown >= most) continue;
    const auto ray =
        std::find_if(scene.rays.begin(), scene.rays.end(), [&](const RayInstance& b) { return b.key == l.pos; });
    if (ray == scene.rays.end()) continue;
    const ImVec2 ts = f->CalcTextSizeA(fs, 1e9f, 0.0f, l.text.c_str());
    size_t on_arc = 0;
    const std::vector<glm::vec2> spots =
        ray_tag_spots(*ray, proj, camera, stacks, f->FontSize * 1.2f, ts.y + 2, on_arc);
    ScreenBox box;
    const int at = place_at_spots(spots, glm::vec2(ts.x + 8, ts.y + 2), keep_off,
                                  glm::vec4(cmin.x, cmin.y, cmax.x, cmax.y), 3.0f, &box);
    if (at < 0) continue;
    keep_off.push_back(box);
    taken.push_back(box);
    ++shown;
    const ImVec2 a(box.c[0].x, box.c[0].y), b(box.c[2].x, box.c[2].y);
    ImVec2 end;
    if (static_cast<size_t>(at) >= on_arc && proj(ray->to, end))
      dl->AddLine(ImVec2((a.x + b.x) * 0.5f, a.y), end, col4(l.colour * glm::vec4(1, 1, 1, 0.55f)), 1.0f);
    dl->AddRectFilled(a, b, IM_COL32(30, 6, 28, 140), 4.0f);
    dl->AddRect(a, b, col4(l.colour * glm::vec4(1, 1, 1, 0.7f)), 4.0f, 0, 1.0f);
    dl->AddText(f, fs, ImVec2(a.x + 4, a.y + 1), col4(l.colour), l.text.c_str());
  }
}

}  // namespace

void draw_overlay(ImDrawList* dl, const Scene& scene, const Camera& camera, ImVec2 origin, ImVec2 size,
                  const OverlayFonts& fonts, const OverlayOptions& opt, OverlayLayout* layout) {
  dl->PushClipRect(origin, ImVec2(origin.x + size.x, origin.y + size.y), true);
  Projector proj{camera.proj(size.x / std::max(1.0f, size.y)) * camera.view(), origin, size};
  std::vector<ScreenBox> side;
  draw_side_labels(dl, scene, proj, fonts, camera.pitch > 1.0f, side);
  // The head's tag first: the token labels keep clear of it and of the side
  // labels; the rays' weights then find room on their arcs around them all.
  std::vector<ScreenBox> taken, head_zone;
  const float tag_px =
      draw_head_label(dl, scene, proj, fonts, opt.banner && opt.top <= 0, camera.pitch > 1.0f, taken, head_zone);
  std::vector<ScreenBox> keep_off = taken, labels;
  keep_off.insert(keep_off.end(), side.begin(), side.end());
  ScreenBox line{};
  const bool has_line = opt.text_line && place_text_line(dl, scene, proj, fonts, opt, keep_off, &line);
  if (has_line) keep_off.push_back(line);
  // The labels rise no higher than a line along the view's top.
  const float labels_top =
      has_line && line.c[0].y < dl->GetClipRectMin().y + 0.5f * (dl->GetClipRectMax().y - dl->GetClipRectMin().y)
          ? line.c[2].y + 2.0f
          : -1e9f;
  if (opt.labels) draw_token_labels(dl, scene, proj, fonts, opt, keep_off, labels_top, &labels);
  keep_off.insert(keep_off.end(), labels.begin(), labels.end());
  const size_t head_tags = taken.size();
  // The weights also keep well clear of the head's tag and the glowing head
  // itself, where every ray starts: a number there reads as the tag's.
  std::vector<ScreenBox> ray_keep_off = keep_off;
  ray_keep_off.insert(ray_keep_off.end(), head_zone.begin(), head_zone.end());
  for (const BlockInstance& m : scene.markers)  // the head (not the flat plate on the ground under its slot)
    if (m.size.y > 0.1f) ray_keep_off.push_back(blocks_box({m}, proj, dl->GetClipRectMin(), dl->GetClipRectMax()));
  draw_ray_labels(dl, scene, proj, camera, fonts, ray_keep_off, taken);
  keep_off.insert(keep_off.end(), taken.begin() + static_cast<long>(head_tags), taken.end());
  const std::vector<ScreenBox> captions = draw_cache_mark_labels(dl, scene, proj, fonts, keep_off);
  std::vector<ScreenBox> tick_keep_off = captions;  // the ticks say least: they give way to captions and tags
  tick_keep_off.insert(tick_keep_off.end(), taken.begin(), taken.end());
  if (has_line) tick_keep_off.push_back(line);
  std::vector<ScreenBox> ticks;
  draw_ticks(dl, scene, proj, fonts, tick_keep_off, side, ticks);
  if (layout) {
    layout->labels = labels;
    layout->tags = taken;
    layout->head_tags = head_tags;
    layout->tag_px = tag_px;
    layout->side = side;
    layout->captions = captions;
    layout->ticks = ticks;
    layout->text_line = has_line ? line : ScreenBox{};
    layout->has_text_line = has_line;
  }
  ImVec4 banner(0, 0, 0, 0);
  float banner_px = 0;
  if (opt.banner && opt.top <= 0) banner = draw_banner(dl, scene, origin, size, fonts, 1.0f, &banner_px);
  dl->PopClipRect();
  if (opt.banner && opt.top > 0) {  // in its band above the view
    const ImVec2 at(origin.x, origin.y - opt.top);
    dl->PushClipRect(at, ImVec2(origin.x + size.x, origin.y), true);
    banner = draw_banner(dl, scene, at, ImVec2(size.x, opt.top), fonts, opt.banner_scale, &banner_px);
    dl->PopClipRect();
  }
  // Legend and HUD: over the bottom of the view, or in the band under it.
  const ImVec2 all(size.x, size.y + std::max(0.0f, opt.band));
  dl->PushClipRect(origin, ImVec2(origin.x + all.x, origin.y + all.y), true);
  ImVec4 legend(0, 0, 0, 0);
  if (opt.legend)
    legend = draw_legend(dl, scene, origin, all, fonts, opt.band > 0, opt.legend_scale,
                         legend_rows_width(fonts, opt, all.x), opt.legend_terse);
  ImVec4 hud(0, 0, 0, 0);
  if (opt.hud) hud = draw_hud(dl, origin, all, fonts, opt, scene.palette, legend);
  dl->PopClipRect();
  if (layout) {
    layout->legend = glm::vec4(legend.x, legend.y, legend.z, legend.w);
    layout->hud = glm::vec4(hud.x, hud.y, hud.z, hud.w);
    layout->banner = glm::vec4(banner.x, banner.y, banner.z, banner.w);
    layout->banner_line_px = banner_px;
  }
}

}  // namespace kvscope
