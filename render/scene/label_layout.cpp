#include "render/scene/label_layout.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace kvscope {

ScreenBox flat_box(glm::vec2 p, glm::vec2 s) {
  return ScreenBox{{p, glm::vec2(p.x + s.x, p.y), p + s, glm::vec2(p.x, p.y + s.y)}};
}

ScreenBox slanted_box(glm::vec2 pivot, glm::vec2 s, float angle) {
  const float c = std::cos(angle), sn = std::sin(angle);
  auto rot = [&](float x, float y) { return pivot + glm::vec2(x * c - y * sn, x * sn + y * c); };
  const float h = s.y * 0.5f;
  return ScreenBox{{rot(0, -h), rot(s.x, -h), rot(s.x, h), rot(0, h)}};
}

namespace {

// The interval of the box's corners projected on `axis`.
glm::vec2 project(const ScreenBox& b, glm::vec2 axis) {
  float lo = 1e30f, hi = -1e30f;
  for (const glm::vec2& p : b.c) {
    const float d = glm::dot(p, axis);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  return {lo, hi};
}

}  // namespace

bool boxes_overlap(const ScreenBox& a, const ScreenBox& b, float gap) {
  // Two rectangles are disjoint iff one of their 4 edge normals separates them.
  for (const ScreenBox* box : {&a, &b}) {
    for (int e = 0; e < 2; ++e) {
      glm::vec2 edge = box->c[static_cast<size_t>(e + 1)] - box->c[static_cast<size_t>(e)];
      const float len = glm::length(edge);
      if (len <= 0) continue;
      const glm::vec2 axis(-edge.y / len, edge.x / len);
      const glm::vec2 pa = project(a, axis), pb = project(b, axis);
      if (pa.y + gap <= pb.x || pb.y + gap <= pa.x) return false;
    }
  }
  return true;
}

bool box_inside(const ScreenBox& a, const glm::vec4& clip) {
  for (const glm::vec2& p : a.c)
    if (p.x < clip.x || p.x > clip.z || p.y < clip.y || p.y > clip.w) return false;
  return true;
}

bool crowds_in_line(const ScreenBox& a, const ScreenBox& b, float gap) {
  glm::vec2 alo(1e9f), ahi(-1e9f), blo(1e9f), bhi(-1e9f);
  for (int i = 0; i < 4; ++i) {
    alo = glm::min(alo, a.c[i]);
    ahi = glm::max(ahi, a.c[i]);
    blo = glm::min(blo, b.c[i]);
    bhi = glm::max(bhi, b.c[i]);
  }
  for (int axis = 0; axis < 2; ++axis) {  // 0: side by side, 1: one above the other
    const int across = 1 - axis;
    const float shared = std::min(ahi[across], bhi[across]) - std::max(alo[across], blo[across]);
    const float smaller = std::min(ahi[across] - alo[across], bhi[across] - blo[across]);
    const float apart = std::max(alo[axis] - bhi[axis], blo[axis] - ahi[axis]);
    if (shared >= 0.5f * smaller && apart < gap) return true;
  }
  return false;
}

ScreenBox side_label_box(glm::vec2 anchor, glm::vec2 size) {
  return flat_box(glm::vec2(anchor.x - size.x, anchor.y - size.y * 0.5f), size);
}

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

bool place_caption(glm::vec2 anchor, glm::vec2 size, const std::vector<ScreenBox>& keep_off, const glm::vec4& clip,
                   float gap, ScreenBox* out) {
  const float y = std::min(anchor.y, clip.w - size.y - 1.0f);
  // Centred, else slid sideways by up to half its width (still under what it names).
  for (float dx : {0.0f, 0.25f, -0.25f, 0.5f, -0.5f}) {
    const ScreenBox b = flat_box(glm::vec2(anchor.x - size.x * (0.5f - dx), y), size);
    if (!box_inside(b, clip)) continue;
    if (std::any_of(keep_off.begin(), keep_off.end(), [&](const ScreenBox& o) { return boxes_overlap(b, o, gap); }))
      continue;
    *out = b;
    return true;
  }
  return false;
}

CaptionPlacement place_captions(const std::vector<CaptionRequest>& req, const std::vector<ScreenBox>& keep_off,
                                const glm::vec4& clip, float gap) {
  size_t n_variants = 0;
  for (const CaptionRequest& r : req) n_variants = std::max(n_variants, r.sizes.size());
  CaptionPlacement best;
  best.form.assign(req.size(), -1);
  best.box.assign(req.size(), ScreenBox{});
  int best_count = 0;
  // Each font size twice: each caption's first form that has room, then
  // every caption in its last (shortest) form, where a long one would crowd
  // out a neighbour.
  for (size_t t = 0; t < 2 * n_variants; ++t) {
    const size_t v = t / 2;
    const bool shortest = t % 2 == 1;
    CaptionPlacement p;
    p.variant = static_cast<int>(v);
    p.form.assign(req.size(), -1);
    p.box.assign(req.size(), ScreenBox{});
    std::vector<ScreenBox> taken = keep_off;
    int count = 0;
    for (size_t i = 0; i < req.size(); ++i) {
      if (v >= req[i].sizes.size()) continue;
      const std::vector<glm::vec2>& forms = req[i].sizes[v];
      for (size_t f = shortest && !forms.empty() ? forms.size() - 1 : 0; f < forms.size() && p.form[i] < 0; ++f)
        if (place_caption(req[i].anchor, forms[f], taken, clip, gap, &p.box[i])) p.form[i] = static_cast<int>(f);
      if (p.form[i] < 0) continue;
      taken.push_back(p.box[i]);
      ++count;
    }
    if (count > best_count) {
      best = p;
      best_count = count;
    }
    if (count == static_cast<int>(req.size())) break;  // all shown: no need for a smaller font
  }
  return best;
}

int place_at_spots(const std::vector<glm::vec2>& spots, glm::vec2 size, const std::vector<ScreenBox>& keep_off,
                   const glm::vec4& clip, float gap, ScreenBox* out) {
  for (size_t i = 0; i < spots.size(); ++i) {
    const ScreenBox b = flat_box(spots[i] - size * 0.5f, size);
    if (!box_inside(b, clip)) continue;
    if (std::any_of(keep_off.begin(), keep_off.end(), [&](const ScreenBox& o) { return boxes_overlap(b, o, gap); }))
      continue;
    *out = b;
    return static_cast<int>(i);
  }
  return -1;
}

size_t tail_that_fits(const std::vector<float>& widths, float room, float lead) {
  float total = 0;
  for (float w : widths) total += w;
  if (total <= room) return 0;
  float w = lead;
  size_t i = widths.size();
  while (i > 0 && w + widths[i - 1] <= room) w += widths[--i];
  return i;
}

glm::vec2 widest_free_span(const std::vector<ScreenBox>& keep_off, glm::vec2 x_range, glm::vec2 y_range, float gap) {
  // The covered intervals in the band, sorted; the widest gap between them.
  std::vector<glm::vec2> covered;
  for (const ScreenBox& b : keep_off) {
    glm::vec2 lo(1e30f), hi(-1e30f);
    for (const glm::vec2& p : b.c) {
      lo = glm::min(lo, p);
      hi = glm::max(hi, p);
    }
    if (hi.y + gap <= y_range.x || lo.y - gap >= y_range.y) continue;
    covered.emplace_back(lo.x - gap, hi.x + gap);
  }
  std::sort(covered.begin(), covered.end(), [](glm::vec2 a, glm::vec2 b) { return a.x < b.x; });
  glm::vec2 best(x_range.x, x_range.x);
  float from = x_range.x;
  for (const glm::vec2& c : covered) {
    const float to = std::min(c.x, x_range.y);
    if (to - from > best.y - best.x) best = glm::vec2(from, to);
    from = std::max(from, c.y);
  }
  if (x_range.y - from > best.y - best.x) best = glm::vec2(from, x_range.y);
  return best;
}

namespace {

bool free_at(const ScreenBox& b, const std::vector<LabelPlacement>& out, const LabelLayoutOptions& opt) {
  if (!box_inside(b, opt.clip)) return false;
  for (const ScreenBox& o : opt.obstacles)
    if (boxes_overlap(b, o, opt.gap)) return false;
  for (const LabelPlacement& o : out)
    if (o.mode != LabelMode::kHidden && boxes_overlap(b, o.box, opt.gap)) return false;
  return true;
}

// Flat, centred above the anchor, kept inside the view horizontally (the
// newest token sits at the view's right edge).
bool try_flat(const LabelRequest& r, const LabelLayoutOptions& opt, const std::vector<LabelPlacement>& out,
              LabelPlacement& p) {
  const float x0 = opt.clip.x + 2, x1 = std::max(x0, opt.clip.z - r.flat.x - 2);
  // Centred, else slid a quarter of its width to either side (still over
  // its token) where that clears a tag or a neighbour.
  for (float dx : {0.0f, -0.25f, 0.25f}) {
    const glm::vec2 at(std::clamp(r.anchor.x - r.flat.x * (0.5f - dx), x0, x1), r.anchor.y - r.flat.y - 2.0f);
    const ScreenBox b = flat_box(at, r.flat);
    if (at.y < r.ceiling || !free_at(b, out, opt)) continue;
    p.mode = LabelMode::kFlat;
    p.pos = at;
    p.box = b;
    return true;
  }
  return false;
}

// Slanted from the anchor, shortened to what fits before the view's top and
// right edges.
bool try_slanted(const LabelRequest& r, const LabelLayoutOptions& opt, const std::vector<LabelPlacement>& out,
                 LabelPlacement& p) {
  const float c = std::cos(opt.angle), s = std::sin(opt.angle), h = r.slanted.y;
  float len = r.slanted.x;
  const float top = std::max(opt.clip.y, r.ceiling);
  if (s < 0) len = std::min(len, (r.anchor.y - top - h * c * 0.5f - 1.0f) / -s);
  if (c > 0) len = std::min(len, (opt.clip.z - r.anchor.x - h * std::fabs(s) * 0.5f - 1.0f) / c);
  if (len <= 0 || len < std::min(opt.min_slanted, r.slanted.x)) return false;
  const ScreenBox b = slanted_box(r.anchor, glm::vec2(len, h), opt.angle);
  if (!free_at(b, out, opt)) return false;
  p.mode = LabelMode::kSlanted;
  p.pos = r.anchor;
  p.length = len;
  p.box = b;
  return true;
}

}  // namespace

bool is_minor_text(const std::string& text) {
  const auto byte = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  for (size_t i = 0; i < text.size();) {
    const unsigned c = byte(i);
    if (c < 0x80) {
      if (std::isalnum(static_cast<int>(c))) return false;
      ++i;
    } else if (c == 0xC2 && byte(i + 1) >= 0xA0) {
      i += 2;  // Latin-1 punctuation and signs (U+00A0..U+00BF), the space marker U+00B7 among them
    } else if (c == 0xE2 && (byte(i + 1) == 0x80 || byte(i + 1) == 0x81 || byte(i + 1) == 0x86)) {
      i += 3;  // general punctuation (dashes, quotes, U+2026) and arrows (the line-break and tab markers)
    } else {
      return false;  // a letter of another script
    }
  }
  return true;
}

std::vector<LabelPlacement> layout_labels(const std::vector<LabelRequest>& req, const LabelLayoutOptions& opt) {
  std::vector<LabelPlacement> out(req.size());
  std::vector<size_t> order;
  for (int pass = 0; pass < 4; ++pass) {
    for (size_t i = req.size(); i-- > 0;) {
      const LabelRequest& r = req[i];
      const int rank = r.priority ? 0 : (r.faint ? 3 : (r.minor ? 2 : 1));
      if (r.visible && rank == pass) order.push_back(i);
    }
  }
  for (size_t i : order) {
    const LabelRequest& r = req[i];
    LabelPlacement p;
    // Only the placed ones are compared (`out` holds hidden entries for the rest).
    if ((r.priority || r.flat_preferred) && try_flat(r, opt, out, p)) {
      out[i] = p;
    } else if (try_slanted(r, opt, out, p)) {
      out[i] = p;
    } else if (r.ceiling > opt.clip.y && !r.priority && !r.flat_preferred && try_flat(r, opt, out, p)) {
      out[i] = p;  // too little room under the ceiling to slant: flat, where it clears its neighbours
    }
  }
  return out;
}

}  // namespace kvscope
