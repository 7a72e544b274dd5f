// Token-label layout: boxes never overlap or leave the view, at projector text
// scales, for real scenes seen through every camera preset.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "render/scene/label_layout.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"
#include "scene_fixtures.h"

namespace kvscope {
namespace {

using scene_fixtures::make_history;

constexpr float kPi = 3.14159265f;

TEST(LabelLayout, BoxOverlapIsExactForRotatedBoxes) {
  const ScreenBox a = flat_box({0, 0}, {10, 10});
  EXPECT_TRUE(boxes_overlap(a, flat_box({5, 5}, {10, 10})));
  EXPECT_FALSE(boxes_overlap(a, flat_box({11, 0}, {10, 10})));
  EXPECT_FALSE(boxes_overlap(a, flat_box({10.5f, 0}, {10, 10})));
  EXPECT_TRUE(boxes_overlap(a, flat_box({10.5f, 0}, {10, 10}), 1.0f)) << "closer than the gap";
  // Two parallel slanted labels: their axis-aligned bounds overlap, they do not.
  const float angle = -65.0f * kPi / 180.0f;
  const ScreenBox s1 = slanted_box({100, 200}, {80, 10}, angle);
  const ScreenBox s2 = slanted_box({113, 200}, {80, 10}, angle);  // 13 px apart: 11.8 px across the text
  EXPECT_FALSE(boxes_overlap(s1, s2));
  EXPECT_TRUE(boxes_overlap(s1, slanted_box({108, 200}, {80, 10}, angle)));
  // A slanted label rising into a flat one above it.
  EXPECT_TRUE(boxes_overlap(s1, flat_box({110, 140}, {40, 12})));
  EXPECT_TRUE(box_inside(a, {0, 0, 10, 10}));
  EXPECT_FALSE(box_inside(s1, {0, 150, 1000, 1000})) << "its top end is above y = 150";
}

void expect_tidy(const std::vector<LabelPlacement>& at, const LabelLayoutOptions& opt, const std::string& where) {
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i].mode == LabelMode::kHidden) continue;
    EXPECT_TRUE(box_inside(at[i].box, opt.clip)) << where << ": label " << i << " leaves the view";
    for (size_t j = i + 1; j < at.size(); ++j)
      if (at[j].mode != LabelMode::kHidden) {
        EXPECT_FALSE(boxes_overlap(at[i].box, at[j].box, opt.gap)) << where << ": labels " << i << " and " << j;
      }
  }
}

TEST(LabelLayout, CrowdedLabelsThinOutNewestAndHoveredStay) {
  // 60 labels 12 px apart with 90 px wide text: far too close for flat text.
  std::vector<LabelRequest> req(60);
  for (size_t i = 0; i < req.size(); ++i) {
    req[i].anchor = {40.0f + 12.0f * static_cast<float>(i), 600.0f};
    req[i].visible = true;
    req[i].flat = {90, 30};
    req[i].slanted = {90, 28};
  }
  req.back().priority = true;  // the newest
  req[20].priority = true;     // hovered
  LabelLayoutOptions opt;
  opt.clip = {0, 0, 800, 720};
  const std::vector<LabelPlacement> at = layout_labels(req, opt);
  expect_tidy(at, opt, "crowded");
  EXPECT_EQ(at.back().mode, LabelMode::kFlat);
  EXPECT_EQ(at[20].mode, LabelMode::kFlat);
  int slanted = 0;
  for (const LabelPlacement& p : at) slanted += p.mode == LabelMode::kSlanted;
  EXPECT_GT(slanted, 10) << "thinned, not emptied";
  EXPECT_LT(slanted, 40);
  // Invisible anchors get nothing; roomy labels go flat.
  req[5].visible = false;
  for (LabelRequest& r : req) r.flat_preferred = true;
  const std::vector<LabelPlacement> again = layout_labels(req, opt);
  EXPECT_EQ(again[5].mode, LabelMode::kHidden);
  expect_tidy(again, opt, "flat preferred");
}

TEST(LabelLayout, SlantedLabelsAreShortenedAtTheTopEdge) {
  std::vector<LabelRequest> req(1);
  req[0].anchor = {100, 60};
  req[0].visible = true;
  req[0].slanted = {300, 20};
  LabelLayoutOptions opt;
  opt.clip = {0, 0, 1280, 720};
  const std::vector<LabelPlacement> at = layout_labels(req, opt);
  ASSERT_EQ(at[0].mode, LabelMode::kSlanted);
  EXPECT_LT(at[0].length, 70.0f);
  EXPECT_TRUE(box_inside(at[0].box, opt.clip));
  opt.min_slanted = 80;  // a stub shorter than that is left out
  EXPECT_EQ(layout_labels(req, opt)[0].mode, LabelMode::kHidden);
}

TEST(LabelLayout, ObstaclesAreKeptClear) {
  std::vector<LabelRequest> req(1);
  req[0].anchor = {400, 400};
  req[0].visible = true;
  req[0].flat_preferred = true;
  req[0].flat = {80, 24};
  req[0].slanted = {80, 22};
  LabelLayoutOptions opt;
  opt.clip = {0, 0, 1280, 720};
  EXPECT_EQ(layout_labels(req, opt)[0].mode, LabelMode::kFlat);
  opt.obstacles.push_back(flat_box({330, 372}, {50, 20}));  // over the flat spot's left end: slanted instead
  const LabelPlacement p = layout_labels(req, opt)[0];
  EXPECT_EQ(p.mode, LabelMode::kSlanted);
  EXPECT_FALSE(boxes_overlap(p.box, opt.obstacles[0], opt.gap));
  opt.obstacles.push_back(flat_box({400, 300}, {100, 100}));  // and over the slanted one: left out
  EXPECT_EQ(layout_labels(req, opt)[0].mode, LabelMode::kHidden);
}

TEST(LabelLayout, FaintLabelsGiveWayToTheOthers) {
  // Two labels at one spot (a pruned branch fading over a living lane): the
  // faint one is placed last, whatever its order, so the living one shows.
  std::vector<LabelRequest> req(2);
  for (LabelRequest& r : req) {
    r.anchor = {400, 400};
    r.visible = true;
    r.flat_preferred = true;
    r.flat = {80, 24};
    r.slanted = {80, 22};
  }
  req[1].faint = true;  // the newest in the list: first without the faint rank
  LabelLayoutOptions opt;
  opt.clip = {0, 0, 1280, 720};
  std::vector<LabelPlacement> at = layout_labels(req, opt);
  EXPECT_EQ(at[0].mode, LabelMode::kFlat);
  EXPECT_NE(at[1].mode, LabelMode::kFlat);
  expect_tidy(at, opt, "faint");
}

TEST(LabelLayout, PunctuationIsMinorWordsInAnyScriptAreNot) {
  for (const char* t : {".", ",", "\xC2\xB7", "\xE2\x86\xB5", "\xE2\x86\xB5\xE2\x86\xB5", ".\xE2\x86\xB5", "\xC2\xB7(",
                        "\xC2\xB7\xE2\x80\x94", "\xE2\x80\xA6", "\xC2\xBB", "\xE2\x86\x92", ""})
    EXPECT_TRUE(is_minor_text(t)) << t;
  for (const char* t : {"j",
                        "\xC2\xB7"
                        "a",
                        "\xC2\xB7there", "7",
                        "\xC2\xB7"
                        "2024",
                        "x,", "\xC3\xA9", "\xD0\xB4\xD0\xB0", "\xC2\xB7\xE4\xB8\xAD", "\\x0b"})
    EXPECT_FALSE(is_minor_text(t)) << t;
}

TEST(LabelLayout, WordsKeepTheirLabelsWherePunctuationGivesWay) {
  // 40 tokens 14 px apart, every other one a "." (narrow: it would fit flat),
  // slanted text 30 px high: only about every third label fits. Every word
  // label placed comes before any punctuation, so the thinned row shows
  // words, and a punctuation label only takes a spot no word could have.
  std::vector<LabelRequest> req(40);
  for (size_t i = 0; i < req.size(); ++i) {
    LabelRequest& r = req[i];
    r.anchor = {40.0f + 14.0f * static_cast<float>(i), 600.0f};
    r.visible = true;
    r.minor = i % 2 == 1;
    r.flat_preferred = r.minor;
    r.flat = r.minor ? glm::vec2(16, 32) : glm::vec2(90, 32);
    r.slanted = r.minor ? glm::vec2(12, 30) : glm::vec2(90, 30);
  }
  LabelLayoutOptions opt;
  opt.clip = {0, 0, 800, 720};
  const std::vector<LabelPlacement> at = layout_labels(req, opt);
  expect_tidy(at, opt, "words first");
  int words = 0, minor = 0;
  for (size_t i = 0; i < at.size(); ++i)
    if (at[i].mode != LabelMode::kHidden) (req[i].minor ? minor : words)++;
  EXPECT_GE(words, 10) << "every other word (35 px across the slanted text, words 28 px apart)";
  // The same row with the punctuation taken first (as the words' neighbours
  // in order): fewer words would show.
  std::vector<LabelRequest> flat_rank = req;
  for (LabelRequest& r : flat_rank) r.minor = false;
  int words_unranked = 0;
  const std::vector<LabelPlacement> un = layout_labels(flat_rank, opt);
  for (size_t i = 0; i < un.size(); ++i) words_unranked += un[i].mode != LabelMode::kHidden && !req[i].minor;
  EXPECT_GT(words, words_unranked);
  (void)minor;
}

TEST(LabelLayout, ALineKeepsItsNewestPiecesThatFit) {
  const std::vector<float> w = {40, 10, 30, 20, 25};  // 125 in all
  EXPECT_EQ(tail_that_fits(w, 125, 8), 0u) << "all fit: no ellipsis";
  EXPECT_EQ(tail_that_fits(w, 124, 8), 1u) << "8 + 10 + 30 + 20 + 25 = 93 fits, the 40 more does not";
  EXPECT_EQ(tail_that_fits(w, 92, 8), 2u);
  EXPECT_EQ(tail_that_fits(w, 93, 8), 1u);
  EXPECT_EQ(tail_that_fits(w, 33, 8), 4u) << "only the newest";
  EXPECT_EQ(tail_that_fits(w, 32, 8), 5u) << "not even the newest";
  EXPECT_EQ(tail_that_fits({}, 10, 8), 0u);
}

TEST(LabelLayout, TheWidestFreeStretchAlongAnEdge) {
  const glm::vec2 x(0, 1000), band(0, 30);
  EXPECT_EQ(widest_free_span({}, x, band, 3), glm::vec2(0, 1000));
  // A tag at the right, a box below the band (ignored), one at the left.
  const std::vector<ScreenBox> boxes = {flat_box({700, 20}, {250, 40}), flat_box({0, 40}, {1000, 100}),
                                        flat_box({0, 0}, {100, 25})};
  EXPECT_EQ(widest_free_span(boxes, x, band, 3), glm::vec2(103, 697));
  // Rotated boxes count by their bounds; a box covering the band leaves nothing.
  EXPECT_EQ(widest_free_span({slanted_box({500, 60}, {100, 20}, -1.2f)}, x, band, 0).x, 0.0f);
  const glm::vec2 none = widest_free_span({flat_box({-10, -10}, {1020, 60})}, x, band, 3);
  EXPECT_LE(none.y - none.x, 0.0f);
}

TEST(LabelLayout, CaptionsStayWholeInsideTheViewAndClearOrAreLeftOut) {
  const glm::vec4 clip(0, 0, 800, 400);
  const glm::vec2 size(180, 34);
  ScreenBox b;
  // Room under the anchor: centred under it.
  ASSERT_TRUE(place_caption({300, 200}, size, {}, clip, 2.0f, &b));
  EXPECT_FLOAT_EQ(b.c[0].x, 210.0f);
  EXPECT_FLOAT_EQ(b.c[0].y, 200.0f);
  // Under the view's bottom edge (a short view at a large text scale): lifted just inside, never cut.
  ASSERT_TRUE(place_caption({300, 390}, size, {}, clip, 2.0f, &b));
  EXPECT_TRUE(box_inside(b, clip));
  EXPECT_GE(b.c[2].y, 395.0f);
  // Lifted onto the stacks, or onto a label already drawn: left out.
  const std::vector<ScreenBox> stacks = {flat_box({100, 120}, {600, 250})};
  EXPECT_FALSE(place_caption({300, 390}, size, stacks, clip, 2.0f, &b));
  EXPECT_TRUE(place_caption({300, 372}, {180, 20}, stacks, clip, 2.0f, &b)) << "a smaller caption fits under them";
  const std::vector<ScreenBox> both_ends = {flat_box({200, 210}, {20, 10}), flat_box({380, 210}, {20, 10})};
  EXPECT_FALSE(place_caption({300, 200}, size, both_ends, clip, 2.0f, &b));
  // A label over its left end only: slid right, still under its anchor.
  ASSERT_TRUE(place_caption({300, 200}, size, {flat_box({200, 210}, {20, 10})}, clip, 2.0f, &b));
  EXPECT_GT(b.c[0].x, 222.0f);
  EXPECT_LT(b.c[0].x, 300.0f);
  // Cut by the side edges wherever it slides: left out.
  EXPECT_FALSE(place_caption({-5, 200}, size, {}, clip, 2.0f, &b));
  ASSERT_TRUE(place_caption({40, 200}, size, {}, clip, 2.0f, &b)) << "slid in";
  EXPECT_FLOAT_EQ(b.c[0].x, 40.0f);
}

TEST(LabelLayout, ACaptionRowKeepsFullTextsWhereTheyFitAndOneFontSize) {
  // Three captions 250 px apart, full texts 180 px wide, short ones 70 px;
  // two small marks beside the middle anchor leave room for its short text
  // only: the others keep their full texts.
  std::vector<CaptionRequest> req(3);
  for (size_t i = 0; i < req.size(); ++i) {
    req[i].anchor = {150.0f + 250.0f * static_cast<float>(i), 300};
    req[i].sizes = {{{180, 30}, {70, 30}}, {{144, 24}, {56, 24}}};
  }
  const std::vector<ScreenBox> marks = {flat_box({330, 300}, {20, 30}), flat_box({450, 300}, {20, 30})};
  const glm::vec4 clip(0, 0, 800, 400);
  CaptionPlacement at = place_captions(req, marks, clip, 2.0f);
  EXPECT_EQ(at.variant, 0);
  ASSERT_EQ(at.form.size(), 3u);
  EXPECT_EQ(at.form[0], 0);
  EXPECT_EQ(at.form[1], 1);
  EXPECT_EQ(at.form[2], 0);
  // Room for 24 px plates only (a short view): the whole row in the smaller font.
  for (CaptionRequest& r : req) r.anchor.y = 374;
  at = place_captions(req, {flat_box({0, 0}, {800, 372})}, clip, 2.0f);
  EXPECT_EQ(at.variant, 1);
  for (size_t i = 0; i < req.size(); ++i) EXPECT_GE(at.form[i], 0) << i;
  // No room at all: nothing shown.
  at = place_captions(req, {flat_box({0, 250}, {800, 150})}, clip, 2.0f);
  EXPECT_EQ(at.variant, -1);
  for (int form : at.form) EXPECT_EQ(form, -1);
}

// The scene's token labels through a camera preset onto a view of w x h
// pixels, sized as the overlay's DejaVu Sans 18 px x scale would be (about
// 0.6 em per character, the plate adding 8 x 2 px).
std::vector<LabelRequest> scene_requests(const Scene& s, CameraPreset preset, float w, float h, float scale) {
  const Camera cam = preset_camera(preset, s, w / h);
  const glm::mat4 vp = cam.proj(w / h) * cam.view();
  const float fs = 18.0f * scale;
  std::vector<LabelRequest> req;
  for (const Label& l : s.labels) {
    if (l.kind != LabelKind::kToken) continue;
    LabelRequest r;
    glm::vec2 p;
    r.visible = project(vp, l.anchor, w, h, p);
    r.anchor = p;
    const float chars = static_cast<float>(l.text.size());
    const bool newest = l.pos == s.slot;
    r.priority = newest;
    r.flat = {chars * fs * (newest ? 1.25f : 1.0f) * 0.6f + 8, fs * (newest ? 1.25f : 1.0f) * 1.2f + 2};
    r.slanted = {std::min(chars, 15.0f) * fs * 0.6f + 3.5f, fs * 1.2f + 1.5f};
    req.push_back(r);
  }
  // Flat where the neighbour leaves room (as the overlay decides).
  for (size_t i = 0; i + 1 < req.size(); ++i)
    req[i].flat_preferred = glm::length(req[i + 1].anchor - req[i].anchor) >= req[i].flat.x - 2;
  return req;
}

TEST(LabelLayout, RealScenesAtProjectorScalesStayReadable) {
  // A 1280x720 window with its sidebars open leaves the 3D view about
  // 700 x 470 pixels; presentation mode about 900 x 560. Text scale 1.5-2.5.
  const std::vector<CacheMode> modes(40, CacheMode::kKV);
  const struct { float w, h; } views[] = {{700, 470}, {900, 560}, {1280, 720}};
  for (bool no_cache : {false, true}) {
    std::vector<CacheMode> m = modes;
    if (no_cache) m.assign(40, CacheMode::kNoCache);
    const auto hist = make_history(12, m);
    for (size_t count : {size_t{1}, size_t{8}, hist.size()}) {
      const Scene s = build_scene(hist, count, ViewOptions{}, 1.0f);
      for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
        for (const auto& v : views) {
          for (float scale : {1.0f, 1.5f, 2.0f, 2.5f}) {
            const std::string where = std::string(to_string(p)) + (no_cache ? " no-cache " : " kv ") +
                                      std::to_string(count) + " steps " + std::to_string(static_cast<int>(v.w)) + "x" +
                                      std::to_string(static_cast<int>(v.h)) + " scale " + std::to_string(scale);
            const std::vector<LabelRequest> req = scene_requests(s, p, v.w, v.h, scale);
            LabelLayoutOptions opt;
            opt.clip = {0, 0, v.w, v.h};
            opt.min_slanted = 18.0f * scale * 2.5f;
            const std::vector<LabelPlacement> at = layout_labels(req, opt);
            expect_tidy(at, opt, where);
            // The newest token's label is always there.
            for (size_t i = 0; i < req.size(); ++i)
              if (req[i].priority && req[i].visible && p != CameraPreset::kSide) {
                EXPECT_NE(at[i].mode, LabelMode::kHidden) << where << ": the newest label is missing";
              }
          }
        }
      }
    }
  }
}

TEST(LabelLayout, CrowdingInLineIsBesideOrAboveNotCornerToCorner) {
  const ScreenBox caption = flat_box({100, 100}, {40, 30});  // "L0"
  EXPECT_TRUE(crowds_in_line(flat_box({145, 105}, {20, 30}), caption, 10.0f)) << "beside: L00";
  EXPECT_FALSE(crowds_in_line(flat_box({151, 105}, {20, 30}), caption, 10.0f)) << "beside, past the gap";
  EXPECT_TRUE(crowds_in_line(flat_box({120, 135}, {20, 30}), caption, 10.0f)) << "under it";
  EXPECT_TRUE(crowds_in_line(flat_box({90, 60}, {20, 30}), caption, 20.0f)) << "above it";
  EXPECT_FALSE(crowds_in_line(flat_box({145, 135}, {20, 30}), caption, 10.0f)) << "corner to corner";
  EXPECT_FALSE(crowds_in_line(flat_box({142, 127}, {20, 30}), caption, 10.0f)) << "below and right, barely level";
  EXPECT_TRUE(crowds_in_line(flat_box({142, 112}, {20, 30}), caption, 10.0f)) << "level enough to read as one";
  EXPECT_TRUE(crowds_in_line(flat_box({130, 120}, {20, 30}), caption, 0.0f)) << "overlapping";
  EXPECT_FALSE(crowds_in_line(flat_box({138, 124}, {20, 30}), caption, 10.0f)) << "corners overlapping a little";
}

TEST(LabelLayout, TicksStepByNiceNumbers) {
  EXPECT_EQ(nice_step(0.3f), 1);
  EXPECT_EQ(nice_step(1.0f), 1);
  EXPECT_EQ(nice_step(1.5f), 2);
  EXPECT_EQ(nice_step(3.0f), 5);
  EXPECT_EQ(nice_step(7.0f), 10);
  EXPECT_EQ(nice_step(11.0f), 20);
  EXPECT_EQ(nice_step(48.0f), 50);
}

TEST(LabelLayout, TagTakesTheFirstFreeSpot) {
  const glm::vec4 clip(0, 0, 1280, 720);
  const glm::vec2 size(60, 20);
  const std::vector<glm::vec2> spots = {{400, 300}, {500, 250}, {600, 200}};
  ScreenBox b;
  // Free: centred on the first spot.
  ASSERT_EQ(place_at_spots(spots, size, {}, clip, 3.0f, &b), 0);
  EXPECT_EQ(b.c[0], glm::vec2(370, 290));
  // The first spot on the stacks: the next one, clear of them by the gap.
  const ScreenBox stacks = flat_box({300, 230}, {200, 150});
  ASSERT_EQ(place_at_spots(spots, size, {stacks}, clip, 3.0f, &b), 2);
  EXPECT_EQ(b.c[0], glm::vec2(570, 190));
  EXPECT_FALSE(boxes_overlap(b, stacks, 3.0f));
  // A spot whose plate would leave the view is skipped; none free: left out.
  EXPECT_EQ(place_at_spots({{10, 300}}, size, {}, clip, 3.0f, &b), -1);
  EXPECT_EQ(place_at_spots(spots, size, {flat_box({0, 0}, {1280, 720})}, clip, 3.0f, &b), -1);
}

// The extent of `blocks` on a `view`-sized screen (one box).
ScreenBox projected_extent(const std::vector<BlockInstance>& blocks, const glm::mat4& vp, glm::vec2 view) {
  glm::vec2 lo(1e9f), hi(-1e9f);
  for (const BlockInstance& b : blocks)
    for (int c = 0; c < 8; ++c) {
      glm::vec2 at;
      const glm::vec3 corner = b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
      if (!project(vp, corner, view.x, view.y, at)) continue;
      lo = glm::min(lo, glm::clamp(at, glm::vec2(0.0f), view));
      hi = glm::max(hi, glm::clamp(at, glm::vec2(0.0f), view));
    }
  return flat_box(lo, hi - lo);
}

// A long sequence's scene (binned columns, whose beams are labelled with
// their summed weight) through the camera presets at projector scales: the
// strongest beams' weights are laid out on their arcs (else under the
// stacks) as the overlay lays them out (DejaVu Sans 15 px x scale x 0.85, about 0.6 em per character)
// and never cover the K/V stacks, the tokens or the layer numbers; in the
// default view every scale shows some.
TEST(LabelLayout, BeamWeightsSitOnTheirArcsOffTheStacksAndTokens) {
  const auto hist = make_history(400, std::vector<CacheMode>(4, CacheMode::kKV));
  const Scene s = build_scene(hist, hist.size(), ViewOptions{}, 1.0f);
  ASSERT_LT(s.columns.n_binned, s.slot) << "the scene is binned";
  for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
    for (const glm::vec2 view : {glm::vec2(820, 300), glm::vec2(1280, 720)}) {
      for (float scale : {1.0f, 2.5f}) {
        const Camera cam = preset_camera(p, s, view.x / view.y);
        const glm::mat4 vp = cam.proj(view.x / view.y) * cam.view();
        const float fs = 15.0f * scale;
        std::vector<ScreenBox> keep_off = {projected_extent(s.kv, vp, view), projected_extent(s.tokens, vp, view)};
        const size_t fixed = keep_off.size();
        for (const Label& l : s.labels) {
          glm::vec2 at;
          if (l.kind == LabelKind::kLayer && project(vp, l.anchor, view.x, view.y, at))
            keep_off.push_back(side_label_box(at, glm::vec2(2 * fs * 0.6f, fs * 1.2f)));
        }
        int shown = 0;
        for (const Label& l : s.labels) {
          if (l.kind != LabelKind::kRay) continue;
          const RayInstance* beam = nullptr;
          for (const RayInstance& b : s.rays)
            if (b.key == l.pos) beam = &b;
          ASSERT_NE(beam, nullptr) << l.text;
          std::vector<glm::vec2> spots;
          for (float t : {0.55f, 0.45f, 0.65f, 0.35f, 0.75f, 0.25f, 0.85f, 0.15f}) {
            glm::vec2 at;
            if (project(vp, ray_arc_point(*beam, t, kRayArc, cam.stretch_y), view.x, view.y, at)) spots.push_back(at);
          }
          const glm::vec2 size(static_cast<float>(l.text.size()) * fs * 0.85f * 0.6f + 8, fs * 0.85f * 1.2f + 2);
          // Then under the stacks, below the position numbers or in their row.
          glm::vec2 end;
          if (project(vp, beam->to, view.x, view.y, end))
            for (float below : {fs * 1.2f + 5.0f, 5.0f})
              spots.emplace_back(end.x, keep_off[0].c[2].y + below + size.y * 0.5f);
          ScreenBox b;
          if (place_at_spots(spots, size, keep_off, glm::vec4(0, 0, view.x, view.y), 3.0f, &b) < 0) continue;
          for (size_t i = 0; i < keep_off.size(); ++i)
            EXPECT_FALSE(boxes_overlap(b, keep_off[i]))
                << to_string(p) << " scale " << scale << ": " << l.text << (i < fixed ? " on the blocks" : "");
          keep_off.push_back(b);
          ++shown;
        }
        if (p == CameraPreset::kFront) {
          EXPECT_GT(shown, 0) << "FRONT " << view.x << " scale " << scale;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvscope
