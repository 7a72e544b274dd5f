// Where the token labels go on screen, so that they never overlap each other
// or leave the view (pure, no GL or ImGui: the overlay measures the text and
// draws what this decides; tests check the placements of real scenes).
//
// Each label is a box of text above its token's projected anchor: flat
// (horizontal, centred or slid a quarter of its width aside, on a plate)
// when its neighbours leave room, else
// slanted (rotated about the anchor, rising to the right). Labels are placed
// one by one, the newest and the hovered first, then the words from the
// newest backwards, then the punctuation (a ",", a line break: little to
// read, so it gives way to a word); a label whose box would touch one
// already placed falls back from flat to slanted, and from slanted to hidden.
// So at a large text scale the labels thin out instead of piling up, and
// what stays is words a student can read.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <glm/glm.hpp>

namespace kvscope {

// A rectangle on screen, possibly rotated: its 4 corners in order.
struct ScreenBox {
  std::array<glm::vec2, 4> c;
};
// An axis-aligned box from its top-left corner and size.
ScreenBox flat_box(glm::vec2 top_left, glm::vec2 size);
// A box of `size` whose left end sits at `pivot` (its vertical middle on the
// pivot), rotated by `angle` radians (negative = rising to the right on screen,
// y pointing down).
ScreenBox slanted_box(glm::vec2 pivot, glm::vec2 size, float angle);
// Whether two boxes overlap once each is grown by `gap` / 2 on every side
// (separating axes: exact for rotated boxes too).
bool boxes_overlap(const ScreenBox& a, const ScreenBox& b, float gap = 0.0f);
// Whether every corner lies in clip (x0, y0, x1, y1).
bool box_inside(const ScreenBox& a, const glm::vec4& clip);

// Whether box `a` comes within `gap` of box `b` (or overlaps it) beside it
// (sharing at least half the lower one's height: they would read as one
// word, "L0" and "0" as "L00") or above or under it (sharing half the
// narrower one's width: one column). Offset corner to corner they read
// apart: their corners may come closer, even overlap a little (a line of
// text's box has room above and below its glyphs). Measured on their
// axis-aligned bounds.
bool crowds_in_line(const ScreenBox& a, const ScreenBox& b, float gap);

// A side label (a layer number, a row caption): its right end at the
// anchor, vertically centred on it.
ScreenBox side_label_box(glm::vec2 anchor, glm::vec2 size);

// The smallest "nice" step (1, 2, 5, 10, 20, 50, ...) >= x: how many
// positions apart the position numbers on the ground are.
int nice_step(float x);

// A caption on the ground (a page's or a window bar's name): its plate of
// `size` centred under `anchor`, lifted just inside the view where the
// view's bottom edge would cut it, and slid sideways by up to half its width
// where that clears it. Left out (returns false) where every such spot
// leaves `clip` or comes within `gap` of a box in `keep_off` (the stacks,
// the labels and tags already drawn, the captions placed before it): a
// caption is drawn whole and clear, or not at all.
bool place_caption(glm::vec2 anchor, glm::vec2 size, const std::vector<ScreenBox>& keep_off, const glm::vec4& clip,
                   float gap, ScreenBox* out);

// A row of captions, each with its plate's size for every font size the
// overlay can draw the row in (full size first, then smaller) and, within
// one font size, every form of its text (full, then short: "p3 \u00d72").
// The row takes one font size, so it reads alike; each caption takes the
// first form of its text that has room, or all take their shortest where
// that shows more of them.
struct CaptionRequest {
  glm::vec2 anchor{0.0f};
  std::vector<std::vector<glm::vec2>> sizes;  // [font size][text form]
};

struct CaptionPlacement {
  int variant = -1;            // the font size drawn; -1: none places any caption
  std::vector<int> form;       // per request: the text form drawn, -1 where left out
  std::vector<ScreenBox> box;  // per request (where shown)
};

// Places the captions in their order (the most telling first, each through
// place_caption, clear of `keep_off` and of the ones placed before it) at
// the first font size that shows the most of them.
CaptionPlacement place_captions(const std::vector<CaptionRequest>& req, const std::vector<ScreenBox>& keep_off,
                                const glm::vec4& clip, float gap);

// A tag at the first free one of `spots` (a ray's weight: points along its
// arc, then spots under the stacks; in order of preference): centred where
// its plate of `size` lies inside `clip` and clear by `gap` of every box in
// `keep_off` (the stacks, the tokens, the labels and tags already drawn).
// Returns the spot's index, or -1 (the tag is left out) when none is free.
int place_at_spots(const std::vector<glm::vec2>& spots, glm::vec2 size, const std::vector<ScreenBox>& keep_off,
                   const glm::vec4& clip, float gap, ScreenBox* out);

// Where a line of pieces (their widths in pixels, oldest first) starts so
// that its newest ones fit in `room` pixels: the first index whose pieces to
// the end, after `lead` pixels (an ellipsis for the ones left out), fit;
// 0 when all fit without it; widths.size() when not even the last one fits.
size_t tail_that_fits(const std::vector<float>& widths, float room, float lead);

// The widest stretch of x in `x_range` (x0, x1) that no box of `keep_off`
// covers (each widened by `gap`) between heights y_range (y0, y1): where a
// line of text can run along the view's edge. (x0, x0) when none is free.
glm::vec2 widest_free_span(const std::vector<ScreenBox>& keep_off, glm::vec2 x_range, glm::vec2 y_range, float gap);

struct LabelRequest {
  glm::vec2 anchor{0.0f};       // projected point above the token's block
  bool visible = false;         // the anchor projects in front of the camera
  glm::vec2 flat{0.0f};         // size of the horizontal text with its plate
  glm::vec2 slanted{0.0f};      // size of the (shortened) text drawn slanted
  bool priority = false;        // the newest or the hovered token: placed first, flat
  bool flat_preferred = false;  // its neighbours leave room for flat text
  bool faint = false;           // fading out (a pruned branch): placed after all the others
  bool minor = false;           // no letter or digit (is_minor_text): placed after the words
  // The screen y no part of the label may rise above (another lane's blocks
  // there); where slanted text would be cut below opt.min_slanted by it, the
  // label is tried flat.
  float ceiling = -1e9f;
};

// Whether a token's visible text (visible_piece: a leading space as
// U+00B7, a line break as U+21B5, a tab as U+2192) holds no letter or digit:
// ASCII punctuation, Latin-1 signs (U+00A0..U+00BF), general punctuation
// (U+2000..U+206F: dashes, quotes, the ellipsis) and arrows. Any other
// non-ASCII character counts as a letter (a word in another script).
bool is_minor_text(const std::string& text);

enum class LabelMode { kHidden, kFlat, kSlanted };

struct LabelPlacement {
  LabelMode mode = LabelMode::kHidden;
  glm::vec2 pos{0.0f};  // flat: the plate's top-left; slanted: the pivot
  float length = 0;     // slanted: the text's length that fits (<= request.slanted.x)
  ScreenBox box{};      // what it covers
};

struct LabelLayoutOptions {
  glm::vec4 clip{0.0f};                         // the view (x0, y0, x1, y1)
  float angle = -65.0f * 3.14159265f / 180.0f;  // slanted labels
  float gap = 2.0f;                             // pixels kept between two labels
  float min_slanted = 0;  // a slanted label shorter than this (it would be cut to a stub) is hidden
  // Already on screen (the tags, ray weights, layer numbers): kept clear.
  std::vector<ScreenBox> obstacles;
};

// One placement per request, in the same order; no two non-hidden boxes
// overlap (with opt.gap) and each lies inside opt.clip. Requests are taken in
// reverse order (the newest last in the list first): the priority ones, then
// the words, then the minor ones, then the faint ones.
std::vector<LabelPlacement> layout_labels(const std::vector<LabelRequest>& req, const LabelLayoutOptions& opt);

}  // namespace kvscope
