// Tags on plates over the 3D view, placed by draw_overlay: the write head's
// "next:" tag, ray scores, the drafted tokens' p and q. Placement only (the
// text measured with the overlay's font); render/overlay/overlay.cpp draws them.
#pragma once

#include <imgui.h>

#include <vector>

#include "render/scene/scene.h"

namespace kvscope {

struct Tag {
  const Label* label;
  ImVec2 anchor, at, size;  // projected anchor, text's top-left, text size
  bool aside = false;       // pushed beside an earlier tag (no room above it)
  const std::string* text;  // the form drawn: the label's text or its short_text
};

// A head-kind label on screen: the label and its projected anchor.
struct TagAnchor {
  const Label* label;
  ImVec2 at;
};

// Places `anchors`' tags at font size `fs` (`f` measures them), in the
// form `form` (0: the label's text; 1: its short_text where it has one, a
// wider and lower form). A tag that would cover an earlier one is lifted
// above it (or, at the top of the view, put beside it), and a tag above its
// anchor keeps off `tokens` (their rectangles: from the top camera the head
// projects onto the row), all inside [cmin, cmax].
std::vector<Tag> place_tags(const std::vector<TagAnchor>& anchors, ImFont* f, float fs, int form, ImVec2 cmin,
                            ImVec2 cmax, const std::vector<ImVec4>& tokens);

}  // namespace kvscope
