// Headless render tests of the text over the scene (the real fonts at
// projector text scales, every camera preset): token labels, row captions,
// beam weights, page captions and the text line keep inside the view and
// off each other and the blocks. Built into kvscope_render_tests.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <imgui_internal.h>

#include "app/gui/frame.h"
#include "app/gui/panels/panels.h"
#include "app/session/state.h"
#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "render/scene/label_layout.h"
#include "render/scene/scene_beams.h"
#include "render_pixels_fixture.h"

namespace kvscope {
namespace {

using namespace pixel_tests;

TEST_F(TeachPixels, LabelsNeverOverlapAtProjectorTextScales) {
  // The real fonts at text scale 1.5 and 2.5 on the view a 1280x720 window
  // leaves with its sidebars open (about 580 x 400) and without them: token
  // labels never overlap each other, the write head's tag, the beam weights
  // or the layer numbers, and they stay inside the view, through every
  // camera preset.
  const auto h = make_history(12, std::vector<CacheMode>(40, CacheMode::kKV));
  const Scene s = build_scene(h, h.size(), ViewOptions{}, 1.0f);
  const ImVec2 full(static_cast<float>(kW), static_cast<float>(kH));
  for_each_overlay(
      s, {1.5f, 2.5f}, {ImVec2(580, 400), full},
      [&](CameraPreset p, float scale, ImVec2 view, const Camera&, const OverlayLayout& lay, const std::string& where) {
        // Side: edge-on, crowded; top at 2.5 in the small view: the layer number keeps the first
        // token's spot.
        const bool crowded = p == CameraPreset::kSide || (p == CameraPreset::kTop && scale > 2 && view.x < 600);
        EXPECT_GE(lay.labels.size(), crowded ? 2u : 3u) << where;
        std::vector<ScreenBox> all = lay.labels;
        all.insert(all.end(), lay.tags.begin(), lay.tags.end());
        all.insert(all.end(), lay.side.begin(), lay.side.end());
        for (size_t i = 0; i < lay.labels.size(); ++i) {  // tags and layer numbers among themselves:
                                                          // checked elsewhere
          EXPECT_TRUE(box_inside(all[i], glm::vec4(0, 0, view.x, view.y))) << where << ": label " << i;
          for (size_t j = i + 1; j < all.size(); ++j)
            EXPECT_FALSE(boxes_overlap(all[i], all[j])) << where << ": boxes " << i << " and " << j;
        }
      });
}

TEST_F(TeachPixels, RowCaptionsAreWholeInsideTheViewAndReadableOrLeftOut) {
  // Text scale 1 and 2.5, every camera preset, a narrow view and a wide one:
  // a row caption or layer number is drawn whole inside the view and at
  // least 11 pixels tall, never cut by the edge or shrunk below that (where
  // its row starts off screen, as with the following camera, it is left out).
  const auto h = make_history(12, std::vector<CacheMode>(40, CacheMode::kKV));
  const Scene s = build_scene(h, h.size(), ViewOptions{}, 1.0f);
  const ImVec2 full(static_cast<float>(kW), static_cast<float>(kH));
  for_each_overlay(
      s, {1.0f, 2.5f}, {ImVec2(580, 400), full},
      [&](CameraPreset, float, ImVec2 view, const Camera&, const OverlayLayout& lay, const std::string& where) {
        for (const ScreenBox& b : lay.side) {
          EXPECT_TRUE(box_inside(b, glm::vec4(0, 0, view.x, view.y))) << where;
          EXPECT_GE(b.c[2].y - b.c[0].y, 11.0f) << where;
        }
      });
}

TEST_F(TeachPixels, BeamWeightsStayOffTheStacksAndTokens) {
  // The real fonts at text scale 1 and 2.5, every camera preset, a 1280x720
  // window's view with its sidebars (about 820 x 300), one beside the
  // lessons column (about 640 x 250) and a wide one: every tag drawn (the
  // head's and the beams' weights) keeps off every K/V block and token on
  // screen, every weight keeps off the glowing head (where the beams start)
  // and a third of a line clear of the head's tag (so it does not read as
  // the tag's), and the default view shows some weight.
  const auto h = make_history(12, std::vector<CacheMode>(22, CacheMode::kKV));
  const Scene s = build_scene(h, h.size(), ViewOptions{}, 1.0f);
  const ImVec2 full(static_cast<float>(kW), static_cast<float>(kH));
  for_each_overlay(
      s, {1.0f, 2.5f}, {ImVec2(820, 300), ImVec2(640, 250), full},
      [&](CameraPreset p, float, ImVec2 view, const Camera& cam, const OverlayLayout& lay, const std::string& where) {
        const glm::mat4 vp = cam.proj(view.x / view.y) * cam.view();
        auto extent = [&](const BlockInstance& b, glm::vec2& lo, glm::vec2& hi) {
          glm::vec2 at;
          lo = glm::vec2(1e9f);
          hi = glm::vec2(-1e9f);
          for (int c = 0; c < 8; ++c) {
            const glm::vec3 corner =
                b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
            if (!project(vp, corner, view.x, view.y, at)) continue;
            lo = glm::min(lo, at);
            hi = glm::max(hi, at);
          }
          return lo.x < hi.x;
        };
        size_t blocks = 0;
        glm::vec2 lo, hi;
        for (const auto* list : {&s.kv, &s.tokens})
          for (const BlockInstance& b : *list) {
            if (!extent(b, lo, hi)) continue;
            ++blocks;
            for (const ScreenBox& t : lay.tags)
              EXPECT_FALSE(boxes_overlap(t, flat_box(lo, hi - lo), -2.0f)) << where << ": a tag covers a block";
          }
        EXPECT_GT(blocks, 0u) << where;
        ASSERT_EQ(lay.head_tags, 1u) << where;
        ASSERT_FALSE(s.markers.empty());
        const bool head_seen = extent(s.markers[0], lo, hi);  // the glowing head
        for (size_t i = lay.head_tags; i < lay.tags.size(); ++i) {
          EXPECT_FALSE(boxes_overlap(lay.tags[i], lay.tags[0], lay.tag_px / 3))
              << where << ": a weight on the head's tag";
          if (head_seen) {
            EXPECT_FALSE(boxes_overlap(lay.tags[i], flat_box(lo, hi - lo))) << where << ": a weight on the head";
          }
        }
        if (p == CameraPreset::kFront) {
          EXPECT_GE(lay.tags.size(), 2u) << where << ": the head's tag and a weight";
        }
      });
}

TEST_F(TeachPixels, BeamTokenLabelsKeepToTheirLane) {
  // The beam tree of "Once upon a time" (4 beams, step 8) seen from above at
  // text scale 1 and 2.5, in the view a 1280x720 window leaves beside its
  // sidebars and a wide one: no token label covers a block (token or K/V) of
  // another lane, and the lane at the bottom still shows some of its words.
  const BeamRun run = beam_run(12);
  ASSERT_GE(run.recs.size(), 9u);
  const Scene s = build_beam_scene(run.recs, 9, run.model->config.n_layer);
  const ImVec2 full(static_cast<float>(kW), static_cast<float>(kH));
  int checked = 0;
  for_each_overlay(
      s, {1.0f, 2.5f}, {ImVec2(800, 330), full},
      [&](CameraPreset p, float, ImVec2 view, const Camera& cam, const OverlayLayout& lay, const std::string& where) {
        if (p != CameraPreset::kTop) return;
        ++checked;
        const glm::mat4 vp = cam.proj(view.x / view.y) * cam.view();
        // Each label's lane: that of the token whose anchor is nearest where the label starts.
        std::vector<std::pair<glm::vec2, float>> anchors;
        for (const Label& l : s.labels) {
          glm::vec2 at;
          if (l.kind == LabelKind::kToken && project(vp, l.anchor, view.x, view.y, at))
            anchors.emplace_back(at, l.anchor.z);
        }
        float bottom_z = -1e9f;
        for (const BlockInstance& b : s.tokens) bottom_z = std::max(bottom_z, b.center.z);
        int bottom_labels = 0;
        for (const ScreenBox& box : lay.labels) {
          const bool flat = std::fabs(box.c[0].y - box.c[1].y) < 0.5f;
          const glm::vec2 start =
              flat ? 0.5f * (box.c[2] + box.c[3]) + glm::vec2(0.0f, 2.0f) : 0.5f * (box.c[0] + box.c[3]);
          float best = 1e9f, lane_z = 0;
          for (const auto& [at, z] : anchors) {
            const float d = glm::length(at - start);
            if (d < best) {
              best = d;
              lane_z = z;
            }
          }
          if (std::fabs(lane_z - bottom_z) < 0.01f) ++bottom_labels;
          for (const auto* list : {&s.kv, &s.tokens})
            for (const BlockInstance& b : *list) {
              if (std::fabs(b.center.z - lane_z) < 0.01f) continue;
              glm::vec2 lo(1e9f), hi(-1e9f), at;
              for (int c = 0; c < 8; ++c) {
                const glm::vec3 corner =
                    b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
                if (!project(vp, corner, view.x, view.y, at)) continue;
                lo = glm::min(lo, at);
                hi = glm::max(hi, at);
              }
              if (lo.x >= hi.x) continue;
              EXPECT_FALSE(boxes_overlap(box, flat_box(lo, hi - lo), -2.0f))
                  << where << ": a label covers another lane's block at position " << b.pos;
            }
        }
        EXPECT_GE(bottom_labels, 2) << where << ": the bottom lane's words";
      });
  EXPECT_EQ(checked, 4);
}

// The same beam tree from the FRONT camera (the window's and `render`'s
// camera unless TOP is chosen), at 1280x720 and a narrower view, text scale 1
// and 2.5: the lanes lie behind one another, and the tokens still carry
// their words (each label clear of every other, as everywhere) and the text
// line reads the best beam's path (the front lane), prompt first.
TEST_F(TeachPixels, BeamTokenLabelsAndTextLineFromTheFront) {
  const BeamRun run = beam_run(12);
  ASSERT_GE(run.recs.size(), 9u);
  const Scene s = build_beam_scene(run.recs, 9, run.model->config.n_layer);
  int checked = 0;
  for_each_overlay(
      s, {1.0f, 2.5f}, {ImVec2(800, 330), ImVec2(static_cast<float>(kW), static_cast<float>(kH))},
      [&](CameraPreset p, float, ImVec2 view, const Camera&, const OverlayLayout& lay, const std::string& where) {
        if (p != CameraPreset::kFront) return;
        ++checked;
        EXPECT_GE(lay.labels.size(), 4u) << where << ": the tokens' words";
        for (size_t i = 0; i < lay.labels.size(); ++i)
          for (size_t j = i + 1; j < lay.labels.size(); ++j)
            EXPECT_FALSE(boxes_overlap(lay.labels[i], lay.labels[j], 0.0f)) << where;
        if (view.x >= kW) {
          EXPECT_TRUE(lay.has_text_line) << where << ": the best beam's text";
        }
      });
  EXPECT_EQ(checked, 4);
}

// An early training checkpoint's weights are named on the banner's second
// line (so its odd text reads as the lesson); the Serving view's own banner
// is left as it is.
TEST_F(TeachPixels, AnEarlyCheckpointIsNamedOnTheBanner) {
  const auto h = make_history(6, std::vector<CacheMode>(6, CacheMode::kKV));
  const SequenceState seq = build_sequence(h, h.size());
  FrameSpec spec;
  spec.seq = &seq;
  const std::string plain = frame_scene(spec).banner_sub;
  ASSERT_FALSE(plain.empty());
  spec.weights_note = "weights from training step 300 of 7200";
  EXPECT_EQ(frame_scene(spec).banner_sub, plain + " \xC2\xB7 weights from training step 300 of 7200");
  spec.banner = "REQUEST q2";
  spec.banner_sub = "its place in the batch";
  EXPECT_EQ(frame_scene(spec).banner_sub, "its place in the batch");
}

TEST_F(TeachPixels, PageCaptionsStayWholeInsideTheViewAndClearOfOtherText) {
  auto h = make_history(12, std::vector<CacheMode>(30, CacheMode::kKV));
  for (RecordPtr& r : h) {  // pages of 4 positions, every other one shared by two sequences
    auto paged = std::make_shared<StepRecord>(*r);
    paged->kv_layout.block = 4;
    paged->kv_held.clear();
    paged->kv_page_runs.clear();
    for (int p = 0; p < paged->seq_len; ++p) paged->kv_held.push_back(p);
    for (int p = 0; p < paged->seq_len; p += 4)
      paged->kv_page_runs.push_back({p, std::min(4, paged->seq_len - p), p / 4, p / 4 % 2 == 0 ? 2 : 1});
    r = paged;
  }
  const SequenceState seq = build_sequence(h, h.size());
  FrameSpec spec;
  spec.seq = &seq;
  int drawn = 0, views = 0;
  for_each_scale([&](float scale) {
    for_each_window_view(spec, fonts_, scale, {ImVec2(1280, 720), ImVec2(1366, 768)},
                         [&](const ComposedFrame& fr, float w, float, float view_h, const std::string& at) {
                           for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide,
                                                  CameraPreset::kFollow}) {
                             const std::string where = std::string(to_string(p)) + " " + at;
                             const float top = fr.overlay.top;
                             OverlayLayout lay;
                             draw2d([&](ImDrawList* dl) {
                               draw_overlay(dl, fr.scene, preset_camera(p, fr.scene, w / view_h), ImVec2(0, top),
                                            ImVec2(w, view_h), fonts_, fr.overlay, &lay);
                             });
                             std::vector<ScreenBox> others = lay.labels;
                             others.insert(others.end(), lay.tags.begin(), lay.tags.end());
                             others.insert(others.end(), lay.side.begin(), lay.side.end());
                             for (size_t i = 0; i < lay.captions.size(); ++i) {
                               const ScreenBox& c = lay.captions[i];
                               EXPECT_TRUE(box_inside(c, glm::vec4(0, top, w, top + view_h))) << where;
                               for (const ScreenBox& o : others) EXPECT_FALSE(boxes_overlap(c, o)) << where;
                               for (size_t j = 0; j < i; ++j) EXPECT_FALSE(boxes_overlap(c, lay.captions[j])) << where;
                             }
                             drawn += static_cast<int>(lay.captions.size());
                             ++views;
                           }
                         });
  });
  EXPECT_EQ(views, 3 * 2 * 2 * 4);
  EXPECT_GT(drawn, views) << "most views keep some captions";
}

// The text so far, on its line at the view's edge, in the window's 3D view
// (composed as the window does: the banner's band above, the legend's
// under) at text scale 1 and 2.5 on 1280x720 and 1366x768, each camera
// preset: inside the view, clear of every label, tag, caption and block;
// drawn by the front and top cameras, whose row leaves the top edge free.
TEST_F(TeachPixels, TextLineStaysInsideTheViewOffTheLabelsAndBlocks) {
  const auto h = make_history(12, std::vector<CacheMode>(30, CacheMode::kKV));
  const SequenceState seq = build_sequence(h, h.size());
  FrameSpec spec;
  spec.seq = &seq;
  int views = 0, lines = 0;
  for (float scale : {1.0f, 2.5f}) {
    reload_fonts(scale);
    for_each_window_view(
        spec, fonts_, scale, {ImVec2(1280, 720), ImVec2(1366, 768)},
        [&](const ComposedFrame& fr, float w, float, float view_h, const std::string& at) {
          for (CameraPreset p :
               {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
            const std::string where = std::string(to_string(p)) + " " + at;
            const float top = fr.overlay.top;
            const Camera cam = preset_camera(p, fr.scene, w / view_h);
            OverlayLayout lay;
            draw2d([&](ImDrawList* dl) {
              draw_overlay(dl, fr.scene, cam, ImVec2(0, top), ImVec2(w, view_h), fonts_, fr.overlay, &lay);
            });
            ++views;
            if (p == CameraPreset::kFront || p == CameraPreset::kTop) {
              EXPECT_TRUE(lay.has_text_line) << where;
            }
            if (!lay.has_text_line) continue;
            ++lines;
            const ScreenBox& line = lay.text_line;
            EXPECT_TRUE(box_inside(line, glm::vec4(0, top, w, top + view_h))) << where;
            std::vector<ScreenBox> others = lay.labels;
            for (const auto* v : {&lay.tags, &lay.side, &lay.captions})
              others.insert(others.end(), v->begin(), v->end());
            for (const ScreenBox& o : others) EXPECT_FALSE(boxes_overlap(line, o)) << where;
            const glm::mat4 vp = cam.proj(w / view_h) * cam.view();
            for (const auto* list : {&fr.scene.kv, &fr.scene.tokens})
              for (const BlockInstance& b : *list) {
                glm::vec2 lo(1e9f), hi(-1e9f), q;
                for (int c = 0; c < 8; ++c) {
                  const glm::vec3 corner =
                      b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
                  if (!project(vp, corner, w, view_h, q)) continue;
                  lo = glm::min(lo, q + glm::vec2(0, top));
                  hi = glm::max(hi, q + glm::vec2(0, top));
                }
                if (lo.x < hi.x) {
                  EXPECT_FALSE(boxes_overlap(line, flat_box(lo, hi - lo))) << where << ": over a block";
                }
              }
          }
        });
  }
  reload_fonts(1.0f);
  EXPECT_EQ(views, 2 * 2 * 2 * 4);
  EXPECT_GT(lines, views / 2);
}

TEST_F(TeachPixels, PositionTicksKeepClearOfTheRowCaptions) {
  // Small pictures (a 1280x720 window with the lessons open) to a wide one,
  // text scale 1 and 2.5, every camera: a position number on the ground
  // keeps half a letter from every layer number and row caption beside,
  // above or under it, so "L0" and the tick "0" never run together ("L00")
  // or stack on each other; the ticks still number the axis.
  const auto h = make_history(12, std::vector<CacheMode>(40, CacheMode::kKV));
  const Scene s = build_scene(h, h.size(), ViewOptions{}, 1.0f);
  size_t ticks = 0;
  for_each_overlay(s, {1.0f, 2.5f},
                   {ImVec2(420, 200), ImVec2(580, 400), ImVec2(static_cast<float>(kW), static_cast<float>(kH))},
                   [&](CameraPreset, float, ImVec2, const Camera&, const OverlayLayout& lay, const std::string& where) {
                     ticks += lay.ticks.size();
                     const float gap = 0.5f * fonts_.small->FontSize - 0.5f;
                     for (const ScreenBox& t : lay.ticks)
                       for (const ScreenBox& c : lay.side)
                         EXPECT_FALSE(crowds_in_line(t, c, gap))
                             << where << ": tick at x " << t.c[0].x << " crowds a caption at x " << c.c[0].x;
                   });
  EXPECT_GT(ticks, 2u * 4u * 3u);
}

TEST_F(TeachPixels, LegendStaysInsideATallNarrowView) {
  // The window's 3D view in tall, narrow windows (a portrait screen, the
  // sidebars open) at text scale 1.0 to 2.5, composed by compose_frame: the
  // legend keeps inside the view's width (smaller, or terse, or left out
  // where not even that fits), not only within its share of the height.
  int drawn = 0, cases = 0;
  for_each_scale_and_mode([&](const FrameSpec& spec, float scale) {
    for (float w : {180.0f, 260.0f, 340.0f, 460.0f, 590.0f, 765.0f}) {
      for (float avail_h : {700.0f, 2300.0f}) {
        const ComposedFrame fr = compose_frame(spec, fonts_, w, avail_h);
        const float view_h = avail_h - fr.overlay.top - fr.overlay.band;
        OverlayLayout lay;
        draw2d([&](ImDrawList* dl) {
          draw_overlay(dl, fr.scene, preset_camera(CameraPreset::kFront, fr.scene, w / view_h),
                       ImVec2(0, fr.overlay.top), ImVec2(w, view_h), fonts_, fr.overlay, &lay);
        });
        const std::string where = "scale " + std::to_string(scale) + " view " + std::to_string(static_cast<int>(w)) +
                                  "x" + std::to_string(static_cast<int>(avail_h));
        ++cases;
        if (w >= 460.0f) {
          EXPECT_TRUE(fr.overlay.legend) << where << ": a legend fits here, terse or smaller";
        }
        if (!fr.overlay.legend) {
          EXPECT_EQ(lay.legend.z, 0.0f) << where;
          continue;
        }
        ++drawn;
        EXPECT_GE(lay.legend.x, 0.0f) << where;
        EXPECT_LE(lay.legend.z, w) << where << ": the legend runs past the view's right edge";
        EXPECT_LE(lay.legend.w, avail_h) << where;
      }
    }
  });
  EXPECT_EQ(cases, 3 * 2 * 6 * 2);
  EXPECT_GT(drawn, cases * 2 / 3);
}

// The message over a view with no step yet ("no model: open a model
// folder ...") at text scale 1 and 2.5 in short views: drawn, and never past
// the view's bottom edge (the legend's band is drawn under it), however
// large the banner's font.
TEST_F(TeachPixels, MessageWithoutAStepStaysInsideAShortView) {
  SequenceState seq;
  FrameSpec f;
  f.seq = &seq;
  f.labels = f.legend = f.hud = false;
  f.message = "no model: open a model folder (GPT-2, Llama, Mistral, Qwen2) in the Model panel";
  int checked = 0;
  for (const float scale : {1.0f, 2.5f}) {
    reload_fonts(scale);
    for (const float view_h : {400.0f, 260.0f, 160.0f}) {
      const ComposedFrame fr = compose_frame(f, fonts_, static_cast<float>(kW), view_h);
      const ImVec2 size(static_cast<float>(kW), view_h - fr.overlay.top - fr.overlay.band);
      const std::vector<uint8_t> img = draw2d(
          [&](ImDrawList* dl) { draw_frame_text(dl, fr, f, Camera(), ImVec2(0, fr.overlay.top), size, fonts_); });
      int inside = 0, below = 0;
      for (int y = 0; y < kH; ++y)
        for (int x = 0; x < kW; x += 2) {
          const Rgb c = at(img, x, y);
          if (c.r + c.g + c.b < 0.05f) continue;
          (y < static_cast<int>(fr.overlay.top + size.y) ? inside : below)++;
        }
      const std::string where = "scale " + std::to_string(scale) + " view " + std::to_string(view_h);
      EXPECT_GT(inside, 100) << where;
      EXPECT_EQ(below, 0) << where << ": the message runs past the view's bottom edge";
      ++checked;
    }
  }
  reload_fonts(1.0f);
  EXPECT_EQ(checked, 6);
}

// The error panel at text scale 2.5 in short and narrow windows: the panel
// stays inside the window and its text wraps inside the panel (its content
// is no wider than the panel less its padding), however long the message.
TEST_F(TeachPixels, ErrorPanelTextWrapsInsideThePanelAtProjectorScale) {
  reload_fonts(2.5f);
  ImGuiIO& io = ImGui::GetIO();
  UiState ui;
  ui.errors.push_back(
      "KV cache: cannot roll sequence 0 back to 15 positions (it holds 19; a window may have evicted what the next "
      "query would need) /a/rather/long/folder/name/that/does/not/break/kvscope-draft-model");
  ui.errors.push_back("beam search: the sliding window of the KV memory layout is not available with beams");
  int checked = 0;
  for (const ImVec2 display : {ImVec2(1280, 400), ImVec2(800, 480), ImVec2(640, 400)}) {
    io.DisplaySize = display;
    ImGuiWindow* panel = nullptr;
    for (int frame = 0; frame < 3; ++frame)  // an auto-resizing window takes its size over the first frames
      draw2d([&](ImDrawList*) { (void)panel_errors(ui); });
    for (ImGuiWindow* w : ImGui::GetCurrentContext()->Windows)
      if (w->Active && std::string(w->Name) == "Something went wrong") panel = w;
    ASSERT_NE(panel, nullptr);
    const float pad = ImGui::GetStyle().WindowPadding.x;
    EXPECT_GE(panel->Pos.x, 0.0f) << display.x << "x" << display.y;
    EXPECT_LE(panel->Pos.x + panel->Size.x, display.x) << display.x << "x" << display.y;
    EXPECT_LE(panel->ContentSize.x, panel->Size.x - 2 * pad + 1.0f) << display.x << "x" << display.y;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
  io.DisplaySize = ImVec2(static_cast<float>(kW), static_cast<float>(kH));
  reload_fonts(1.0f);
}

}  // namespace
}  // namespace kvscope
