// Where the overlay's tags go (overlay_tags.h).
#include "render/overlay/overlay_tags.h"

#include <algorithm>

namespace kvscope {

namespace {

// A row of tags pushed aside one after another (no room to lift them: the
// drafted tokens' at a large text scale) is centred over its anchors, so it
// spreads both ways instead of drifting off to the right; each keeps a line
// to its token.
void centre_aside_runs(std::vector<Tag>& tags, ImVec2 cmin, ImVec2 cmax) {
  for (size_t i = 0; i < tags.size();) {
    size_t j = i + 1;
    while (j < tags.size() && tags[j].aside && !tags[j].label->beside) ++j;
    if (j - i > 1 && !tags[i].label->beside) {
      const float lo = tags[i].at.x - 5, hi = tags[j - 1].at.x + tags[j - 1].size.x + 5;
      float mean = 0;
      for (size_t k = i; k < j; ++k) mean += tags[k].anchor.x / static_cast<float>(j - i);
      const float dx = std::clamp(mean - (lo + hi) * 0.5f, cmin.x + 1 - lo, std::max(cmin.x + 1 - lo, cmax.x - 1 - hi));
      for (size_t k = i; k < j; ++k) tags[k].at.x += dx;
    }
    i = j;
  }
}

}  // namespace

std::vector<Tag> place_tags(const std::vector<TagAnchor>& anchors, ImFont* f, float fs, int form, ImVec2 cmin,
                            ImVec2 cmax, const std::vector<ImVec4>& tokens) {
  std::vector<Tag> tags;
  std::vector<ImVec4> drawn;
  for (const TagAnchor& a : anchors) {
    const Label& l = *a.label;
    const ImVec2 p = a.at;
    const std::string* text = form == 1 && !l.short_text.empty() ? &l.short_text : &l.text;
    const ImVec2 ts = f->CalcTextSizeA(fs, 1e9f, 0.0f, text->c_str());
    // Kept inside the view: the head writes the last slot, at the right edge.
    const ImVec2 want = l.beside ? ImVec2(p.x + 6.0f, p.y - ts.y * 0.5f) : ImVec2(p.x - ts.x * 0.5f, p.y - ts.y - 4.0f);
    ImVec2 q(std::clamp(want.x, cmin.x + 6, std::max(cmin.x + 6, cmax.x - ts.x - 6)), std::max(cmin.y + 4, want.y));
    bool aside = false;
    auto covers = [&](const ImVec4& o) {
      return q.x - 6 < o.z && o.x < q.x + ts.x + 6 && q.y - 4 < o.w && o.y < q.y + ts.y + 4;
    };
    for (int tries = 0; tries < 16; ++tries) {
      const ImVec4* hit = nullptr;
      for (const ImVec4& o : drawn) hit = hit ? hit : (covers(o) ? &o : nullptr);
      for (const ImVec4& o : tokens) hit = hit || l.beside ? hit : (covers(o) ? &o : nullptr);
      if (!hit) break;
      const float lifted = hit->y - ts.y - 6.0f;
      if (lifted >= cmin.y + 4)
        q.y = lifted;
      else
        q.x = hit->z + 10.0f;  // no room above it: beside it, the plates 5 px apart
      aside |= lifted < cmin.y + 4;
    }
    drawn.push_back(ImVec4(q.x - 5, q.y - 2, q.x + ts.x + 5, q.y + ts.y + 2));
    tags.push_back({&l, p, q, ts, aside, text});
  }
  centre_aside_runs(tags, cmin, cmax);
  return tags;
}

}  // namespace kvscope
