// Headless render test: draws scenes built from hand-made records with the
// real renderer (EGL surfaceless, Mesa llvmpipe, no display) and checks real
// pixels against where the scene and the camera say things are: the
// background, token and KV block colours, beams from the write head to the
// key they name, NO CACHE's red flash, and a clean GL error state.
// Built as kvscope_render_tests (cmake/gui.cmake), run by tests/gui_render_pixels.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <imgui.h>
#include <imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <stb_image_write.h>
#include "app/gui/frame.h"
#include "app/gui/panels/lesson_panels.h"
#include "app/gui/panels/panels.h"
#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/speculative_generator.h"
#include "render/gl/gl_context.h"
#include "render/gl/gl_objects.h"
#include "render/gl/renderer.h"
#include "render/scene/scene.h"
#include "render/scene/scene_beams.h"
#include "render/scene/scene_camera.h"
#include "render/scene/scene_spec.h"
#include "render_pixels_fixture.h"
#include "scene_fixtures.h"

namespace kvscope {
namespace {

using namespace pixel_tests;

TEST_F(RenderPixels, BackgroundAndBlockColoursWhereTheSceneSays) {
  const Palette& pal = palette_for(false);
  auto h = make_history(6, {CacheMode::kKV, CacheMode::kKV, CacheMode::kKV});
  ViewOptions v;
  v.rays = false;
  const Scene s = build_scene(h, h.size(), v, 1.0f);
  const Camera cam = preset_camera(CameraPreset::kFront, s, static_cast<float>(kW) / kH);
  const auto img = render(s, cam);

  // Above everything: the background colour.
  for (const auto& [x, y] : {std::pair{4, 4}, std::pair{kW - 5, 4}, std::pair{kW / 2, 3}}) {
    const Rgb px = at(img, x, y);
    EXPECT_NEAR(px.r, pal.background.r, 2.5 / 255) << x << "," << y;
    EXPECT_NEAR(px.g, pal.background.g, 2.5 / 255) << x << "," << y;
    EXPECT_NEAR(px.b, pal.background.b, 2.5 / 255) << x << "," << y;
  }
  // Each settled token block's front face shows its colour: prompt tokens
  // dim blue-grey, generated ones amber.
  int checked = 0;
  for (const BlockInstance& b : s.tokens) {
    if (b.pos == s.slot) continue;  // the newest glows (not a plain shade)
    int x, y;
    ASSERT_TRUE(screen(cam, b.center + glm::vec3(0, 0, b.size.z * 0.5f), x, y));
    const glm::vec3 base(b.colour);
    float k;
    const float err = shade_error(at(img, x, y), base, k);
    EXPECT_LT(err, 0.035f) << "token " << b.pos << " at " << x << "," << y;
    EXPECT_GT(k, 0.4f) << "token " << b.pos;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(s.tokens.size()) - 1);
  // The two kinds of token are told apart by the pixels alone.
  int px0, py0, px1, py1;
  screen(cam, s.tokens[0].center + glm::vec3(0, 0, 0.39f), px0, py0);
  screen(cam, s.tokens[7].center + glm::vec3(0, 0, 0.39f), px1, py1);
  const Rgb prompt = at(img, px0, py0), gen = at(img, px1, py1);
  EXPECT_GT(prompt.b, prompt.r);  // blue-grey
  EXPECT_GT(gen.r, gen.g);        // amber
  EXPECT_GT(gen.g, gen.b);
  // KV blocks: held ones cyan, the new column green-tinted, the newest token's
  // slots empty (background shows through their middle).
  for (const BlockInstance& b : s.kv) {
    if (b.layer != 1) continue;
    int x, y;
    ASSERT_TRUE(screen(cam, b.center + glm::vec3(0, 0, b.size.z * 0.5f), x, y));
    const Rgb px = at(img, x, y);
    if (b.state == KvState::kEmpty) {
      EXPECT_LT(px.r + px.g + px.b, 0.35f) << "empty slot " << b.pos;
      continue;
    }
    if (b.state != KvState::kResident) continue;  // the new column glows
    float k;
    EXPECT_LT(shade_error(px, glm::vec3(b.colour), k), 0.035f) << "kv block " << b.pos;
    EXPECT_GT(px.b, px.r + 0.2f) << "cyan " << b.pos;
  }
}

TEST_F(RenderPixels, BeamGoesFromTheWriteHeadToTheKeyItNames) {
  // One strong beam: layer 0, head 0 puts 0.9 on key 2, the rest below the
  // minimum weight.
  auto h = make_history(8, {CacheMode::kKV});
  auto last = std::const_pointer_cast<StepRecord>(h.back());
  const int T = last->seq_len, key = 2;
  for (int k = 0; k < T; ++k) last->attn[k] = k == key ? 0.9f : 0.1f / (T - 1);
  ViewOptions v;
  v.layer = 0;
  v.head = 0;
  v.min_weight = 0.05f;
  const Scene with = build_scene(h, h.size(), v, 1.0f);
  ASSERT_EQ(with.rays.size(), 1u);
  ASSERT_EQ(with.rays[0].key, key);
  EXPECT_FLOAT_EQ(with.rays[0].weight, 0.9f);
  v.rays = false;
  const Scene without = build_scene(h, h.size(), v, 1.0f);
  // Side view: the arc is not hidden behind its own end points.
  const Camera cam = preset_camera(CameraPreset::kSide, with, static_cast<float>(kW) / kH);
  const auto a = render(with, cam), b = render(without, cam);

  int n_diff = 0;
  double energy = 0, added_r = 0, added_g = 0, added_b = 0;
  int near_target = 0, near_head = 0;
  int tx, ty, hx, hy;
  ASSERT_TRUE(screen(cam, with.rays[0].to, tx, ty));
  ASSERT_TRUE(screen(cam, with.rays[0].from, hx, hy));
  // The beam starts inside the write head's cube: it is seen from the cube's
  // edge on, however large the framing draws the cube.
  float head_r = 0;
  for (int c = 0; c < 8; ++c) {
    const glm::vec3 d = 0.5f * with.markers[0].size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
    int cx, cy;
    if (screen(cam, with.markers[0].center + d, cx, cy))
      head_r = std::max(head_r, std::hypot(static_cast<float>(cx - hx), static_cast<float>(cy - hy)));
  }
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x) {
      const Rgb p = at(a, x, y), q = at(b, x, y);
      const float d = std::abs(p.r - q.r) + std::abs(p.g - q.g) + std::abs(p.b - q.b);
      if (d < 0.12f) continue;
      ++n_diff;
      energy += d;
      added_r += p.r - q.r;
      added_g += p.g - q.g;
      added_b += p.b - q.b;
      if (std::hypot(x - tx, y - ty) < 14) ++near_target;
      if (std::hypot(x - hx, y - hy) < 30 + head_r) ++near_head;
    }
  EXPECT_GT(n_diff, 100);
  // Added light is the beam colour, magenta: red and blue well over green.
  EXPECT_GT(added_r, 1.5 * added_g);
  EXPECT_GT(added_b, 1.5 * added_g);
  EXPECT_GT(near_target, 0) << "the beam lands on key " << key << "'s layer-0 block at " << tx << "," << ty;
  EXPECT_GT(near_head, 0) << "the beam leaves the write head at " << hx << "," << hy;

  // A weaker weight draws a thinner, dimmer beam.
  for (int k = 0; k < T; ++k) last->attn[k] = k == key ? 0.2f : 0.8f / (T - 1);
  v.rays = true;
  v.min_weight = 0.15f;
  const Scene weak = build_scene(h, h.size(), v, 1.0f);
  ASSERT_EQ(weak.rays.size(), 1u);
  const auto c = render(weak, cam);
  double weak_energy = 0;
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x) {
      const Rgb p = at(c, x, y), q = at(b, x, y);
      weak_energy += std::abs(p.r - q.r) + std::abs(p.g - q.g) + std::abs(p.b - q.b);
    }
  EXPECT_LT(weak_energy, 0.7 * energy);
  EXPECT_GT(weak_energy, 0.0);
}

TEST_F(RenderPixels, NoCacheFlashesRedThenKeepsOnlyOutlines) {
  auto h = make_history(6, {CacheMode::kKV, CacheMode::kNoCache});
  ViewOptions v;
  v.rays = false;
  const Scene flash = build_scene(h, h.size(), v, 0.0f);
  const Scene rest = build_scene(h, h.size(), v, 1.0f);
  const Camera cam = preset_camera(CameraPreset::kFront, rest, static_cast<float>(kW) / kH);
  const auto img_flash = render(flash, cam), img_rest = render(rest, cam);
  int red = 0, n = 0;
  for (const BlockInstance& b : rest.kv) {
    if (b.state != KvState::kRecomputed) continue;
    int x, y;
    ASSERT_TRUE(screen(cam, b.center + glm::vec3(0, 0, b.size.z * 0.5f), x, y));
    const Rgb f = at(img_flash, x, y), r = at(img_rest, x, y);
    ++n;
    if (f.r > 0.8f && f.r > 2.0f * f.g && f.r > 2.0f * f.b) ++red;
    // Thrown away: the face dims to a ghost but stays red.
    EXPECT_LT(r.r, f.r) << b.pos;
    EXPECT_GT(r.r, r.g) << b.pos;
  }
  EXPECT_EQ(n, (rest.seq_len - 1) * kLayers);
  EXPECT_EQ(red, n) << "every recomputed block flashes red";
}

TEST_F(RenderPixels, GridAndManyBlocksDrawWithoutErrors) {
  auto h = make_history(700, {CacheMode::kKV, CacheMode::kNoCache, CacheMode::kKV});
  ViewOptions v;
  const Scene s = build_scene(h, h.size(), v, 0.3f);
  for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
    const Camera cam = preset_camera(p, s, static_cast<float>(kW) / kH);
    const auto img = render(s, cam, true);
    // Something other than background is on screen.
    int lit = 0;
    for (size_t i = 0; i < img.size(); i += 4) lit += img[i] + img[i + 1] + img[i + 2] > 150;
    EXPECT_GT(lit, kW * kH / 200) << to_string(p);
  }
  // The last view (FOLLOW) culls what it does not show; nothing is lost.
  const DrawStats& st = renderer_->stats();
  EXPECT_EQ(st.blocks + st.blocks_culled, static_cast<int>(s.tokens.size() + s.kv.size() + s.markers.size()));
  EXPECT_GT(st.blocks_culled, st.blocks);
  EXPECT_EQ(renderer_->stats().rays, static_cast<int>(s.rays.size()));
  // Grid + one instanced draw per block kind (tokens, solid KV blocks, empty
  // KV slots as outlines, markers) + one for all beams.
  EXPECT_EQ(renderer_->stats().draw_calls, 6);
}

// --- the attention heatmap grid and the presentation HUD (ImGui draw
// lists through the real OpenGL 3 backend, as the window and `kvscope render`
// draw them).

TEST_F(TeachPixels, HeatmapCellsShowEveryRowsRealAttentionWeight) {
  const Palette& pal = palette_for(false);
  PanelMemo::Heat memo;  // the binned matrix, kept while the step drawn stays the same
  // Prompt of 5 then two KV steps: rows 0-4 come from the prefill, row 5 from
  // record 1, row 6 from record 2; 7 positions = 7 bins (one per position).
  const auto h = make_history(5, {CacheMode::kKV, CacheMode::kKV});
  const ImVec2 p0(20, 20), size(kW - 40.0f, kH - 40.0f);
  const float fs = 13.0f;
  const int L = kLayers, H = kHeads, S = h.back()->seq_len;
  ASSERT_EQ(S, 7);
  HeatmapHit none;
  const auto img = draw2d([&](ImDrawList* dl) {
    none = draw_heatmap_grid(dl, p0, size, h, 2, -1, -1, ImVec2(-1e9f, -1e9f), ImGui::GetFont(), fs, pal, memo);
  });
  EXPECT_EQ(none.layer, -1);
  // The layout draw_heatmap_grid documents: labels, then square cells.
  const float label_w = fs * 2.2f, label_h = fs * 1.3f, gap = std::max(2.0f, fs * 0.25f);
  const float cell = std::min((size.x - label_w) / H - gap, (size.y - label_h) / L - gap);
  const float bs = cell / S;
  int checked = 0;
  for (int l = 0; l < L; ++l)
    for (int hd = 0; hd < H; ++hd)
      for (int q = 0; q < S; ++q) {
        // The record that computed query row q, and its row index.
        const StepRecord& r = q < 5 ? *h[0] : *h[static_cast<size_t>(q - 4)];
        const int row = q - (r.seq_len - r.n_rows);
        for (int k = 0; k < S; ++k) {
          const float x0 = p0.x + label_w + hd * (cell + gap), y0 = p0.y + label_h + l * (cell + gap);
          const int px = static_cast<int>(x0 + (k + 0.5f) * bs), py = static_cast<int>(y0 + (q + 0.5f) * bs);
          const Rgb got = at(img, px, py);
          glm::vec3 want;
          if (k > q) {
            want = glm::vec3(14, 16, 26) / 255.0f;  // the causal mask: no weight above the diagonal
          } else {
            const float w = r.attention(l, hd, row, k);
            want = glm::mix(pal.background, pal.ray, std::sqrt(w));
          }
          const float err = std::max({std::abs(got.r - want.r), std::abs(got.g - want.g), std::abs(got.b - want.b)});
          EXPECT_LT(err, 2.5f / 255.0f) << "layer " << l << " head " << hd << " query " << q << " key " << k;
          ++checked;
        }
      }
  EXPECT_EQ(checked, L * H * S * S);
  // Hover: the cell names the query, key and the real weight.
  const int l = 2, hd = 1, q = 6, k = 3;
  const ImVec2 m(p0.x + label_w + hd * (cell + gap) + (k + 0.5f) * bs,
                 p0.y + label_h + l * (cell + gap) + (q + 0.5f) * bs);
  HeatmapHit hit;
  draw2d(
      [&](ImDrawList* dl) { hit = draw_heatmap_grid(dl, p0, size, h, 2, l, hd, m, ImGui::GetFont(), fs, pal, memo); });
  EXPECT_EQ(hit.layer, l);
  EXPECT_EQ(hit.head, hd);
  EXPECT_EQ(hit.query, q);
  EXPECT_EQ(hit.key, k);
  EXPECT_TRUE(hit.known);
  EXPECT_FLOAT_EQ(hit.weight, h[2]->attention(l, hd, 0, k));
  // At an earlier step the newer rows are not there yet (an empty, dark cell background).
  const auto early = draw2d([&](ImDrawList* dl) {
    draw_heatmap_grid(dl, p0, size, h, 0, -1, -1, ImVec2(-1e9f, -1e9f), ImGui::GetFont(), fs, pal, memo);
  });
  (void)early;
}

TEST_F(TeachPixels, PresentationHudShowsCandidatesUnlessPredicting) {
  const Palette& pal = palette_for(false);
  auto rec = make_record(3, false, CacheMode::kKV, 7, 1, 8, 0, 5, 42);
  rec->top = {{42, 0.6f}, {7, 0.25f}, {9, 0.1f}, {11, 0.04f}, {13, 0.01f}};
  rec->prob = 0.6f;
  HudInfo hud;
  hud.model_name = "fixture";
  hud.step = 3;
  hud.n_steps = 4;
  hud.record = rec.get();
  hud.top_pieces = {"a", "b", "c", "d", "e"};
  auto count = [&](const std::vector<uint8_t>& img, const glm::vec3& c) {
    int n = 0;
    for (size_t i = 0; i < img.size(); i += 4)
      n += std::abs(img[i] - c.r * 255) < 1.5f && std::abs(img[i + 1] - c.g * 255) < 1.5f &&
           std::abs(img[i + 2] - c.b * 255) < 1.5f;
    return n;
  };
  const auto shown = draw2d([&](ImDrawList* dl) {
    draw_presentation_hud(dl, ImVec2(0, 0), ImVec2(static_cast<float>(kW), static_cast<float>(kH)), fonts_, hud);
  });
  hud.hidden = true;
  const auto hidden = draw2d([&](ImDrawList* dl) {
    draw_presentation_hud(dl, ImVec2(0, 0), ImVec2(static_cast<float>(kW), static_cast<float>(kH)), fonts_, hud);
  });
  // The other candidates' bars (prompt-token colour) appear only when revealed;
  // the chosen one's bar (new-token colour) too.
  EXPECT_GT(count(shown, pal.prompt_token), 100);
  EXPECT_EQ(count(hidden, pal.prompt_token), 0);
  EXPECT_GT(count(shown, pal.new_token), count(hidden, pal.new_token) + 100);
  // The HUD strip along the bottom: its translucent dark fill over the cleared black.
  const Rgb strip = at(shown, kW - 3, kH - 3);
  EXPECT_NEAR(strip.b, 18.0f / 255.0f * 200.0f / 255.0f, 2.0f / 255.0f);
  EXPECT_NEAR(strip.r, 8.0f / 255.0f * 200.0f / 255.0f, 2.0f / 255.0f);
}

TEST_F(TeachPixels, LegendTakesABandUnderAShortViewInsteadOfCoveringIt) {
  auto h = make_history(6, {CacheMode::kKV, CacheMode::kKV});
  const Scene s = build_scene(h, h.size(), ViewOptions{}, 1.0f);
  OverlayOptions opt;
  opt.labels = false;
  opt.text_line = false;
  opt.banner = false;
  opt.hud = false;
  // The legend box's translucent fill (8, 10, 18, alpha 200) over the cleared black.
  auto legend_fill = [](const Rgb& c) {
    return std::abs(c.r * 255 - 8 * 200 / 255.0f) < 1.5f && std::abs(c.g * 255 - 10 * 200 / 255.0f) < 1.5f &&
           std::abs(c.b * 255 - 18 * 200 / 255.0f) < 1.5f;
  };
  auto fill_rows = [&](const std::vector<uint8_t>& img, int y0, int y1) {
    int rows = 0;
    for (int y = y0; y < y1; ++y) {
      bool any = false;
      for (int x = 0; x < kW && !any; x += 2) any = legend_fill(at(img, x, y));
      rows += any;
    }
    return rows;
  };
  const float W = static_cast<float>(kW), H = static_cast<float>(kH);
  const auto over = draw2d([&](ImDrawList* dl) {
    draw_overlay(dl, s, preset_camera(CameraPreset::kFront, s, W / H), ImVec2(0, 0), ImVec2(W, H), fonts_, opt);
  });
  const int column_rows = fill_rows(over, 0, kH);  // one entry per row: the tall legend

  const float band = legend_band(s, fonts_, opt, W);
  ASSERT_GT(band, 0.0f);
  opt.band = band;
  const float view_h = H - band;
  const auto under = draw2d([&](ImDrawList* dl) {
    draw_overlay(dl, s, preset_camera(CameraPreset::kFront, s, W / view_h), ImVec2(0, 0), ImVec2(W, view_h), fonts_,
                 opt);
  });
  const int split = static_cast<int>(view_h);
  EXPECT_EQ(fill_rows(under, 0, split), 0) << "the legend reaches into the 3D view";
  const int band_rows = fill_rows(under, split, kH);
  EXPECT_GT(band_rows, 20);
  // Entries in rows across the width: well under half the one-column height.
  EXPECT_LT(band_rows * 2, column_rows);
  EXPECT_LE(static_cast<float>(band_rows), band);
  opt.legend = false;
  EXPECT_EQ(legend_band(s, fonts_, opt, W), 0.0f);
}

// The window's 3D view at text scale 1.0 to 2.5: the legend, placed by the
// window's own compose_frame, never covers a token or KV block as each
// camera preset frames the scene.
TEST_F(TeachPixels, LegendStaysOffTheStacks) {
  int checked = 0, in_band = 0;
  for_each_scale_and_mode([&](const FrameSpec& spec, float scale) {
    const std::vector<ImVec2> screens = {ImVec2(1280, 720), ImVec2(1366, 768), ImVec2(1920, 1080)};
    for_each_window_view(
        spec, fonts_, scale, screens,
        [&](const ComposedFrame& fr, float w, float, float view_h, const std::string& at) {
          in_band += fr.overlay.band > 0;
          for (CameraPreset p :
               {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
            const Camera cam = preset_camera(p, fr.scene, w / view_h);
            OverlayLayout lay;
            draw2d([&](ImDrawList* dl) {
              draw_overlay(dl, fr.scene, cam, ImVec2(0, 0), ImVec2(w, view_h), fonts_, fr.overlay, &lay);
            });
            const glm::vec4 lg = lay.legend;
            ASSERT_GT(lg.z, lg.x);
            const std::string where = std::string(to_string(p)) + " " + at;
            const glm::mat4 vp = cam.proj(w / view_h) * cam.view();
            std::vector<const BlockInstance*> blocks;
            for (const BlockInstance& b : fr.scene.tokens) blocks.push_back(&b);
            for (const BlockInstance& b : fr.scene.kv) blocks.push_back(&b);
            for (const BlockInstance* b : blocks) {
              // The block's on-screen extent, cut to the view (the GL viewport clips the rest).
              glm::vec2 lo(1e9f), hi(-1e9f);
              for (int c = 0; c < 8; ++c) {
                const glm::vec3 corner =
                    b->center + 0.5f * b->size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
                glm::vec2 px;
                if (!project(vp, corner, w, view_h, px)) continue;
                lo = glm::min(lo, px);
                hi = glm::max(hi, px);
              }
              lo = glm::max(lo, glm::vec2(0));
              hi = glm::min(hi, glm::vec2(w, view_h));
              if (lo.x >= hi.x || lo.y >= hi.y) continue;  // off screen
              const bool covered = lo.x < lg.z && hi.x > lg.x && lo.y < lg.w && hi.y > lg.y;
              EXPECT_FALSE(covered) << where << ": the legend covers the block at position " << b->pos << " layer "
                                    << b->layer;
              if (covered) break;
            }
            ++checked;
          }
        });
  });
  EXPECT_EQ(checked, 3 * 2 * 3 * 2 * 4);
  EXPECT_GT(in_band, 0);
}

// The banner has a band of its own above the view at 1280x720 and 1366x768,
// text scale 1.0 to 2.5, for every camera: no token label or tag reaches
// into it, its second line stays at least 14 pixels high (wrapped, not
// shrunk), and the scene keeps at least 40 % of the height.
TEST_F(TeachPixels, BannerKeepsABandOfItsOwnAboveTheView) {
  int checked = 0;
  for_each_scale_and_mode([&](const FrameSpec& spec, float scale) {
    for_each_window_view(
        spec, fonts_, scale, {ImVec2(1280, 720), ImVec2(1366, 768)},
        [&](const ComposedFrame& fr, float w, float avail_h, float view_h, const std::string& at) {
          ASSERT_FALSE(fr.scene.banner.empty());
          const float top = fr.overlay.top;
          EXPECT_GT(top, 0.0f) << at;
          EXPECT_GE(view_h, 0.4f * avail_h) << at;
          for (CameraPreset p :
               {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
            const std::string where = std::string(to_string(p)) + " " + at;
            const Camera cam = preset_camera(p, fr.scene, w / view_h);
            OverlayLayout lay;
            draw2d([&](ImDrawList* dl) {
              draw_overlay(dl, fr.scene, cam, ImVec2(0, top), ImVec2(w, view_h), fonts_, fr.overlay, &lay);
            });
            EXPECT_GE(lay.banner.y, 0.0f) << where;
            EXPECT_LE(lay.banner.w, top) << where;
            EXPECT_GE(lay.banner.x, 0.0f) << where;
            EXPECT_LE(lay.banner.z, w) << where;
            EXPECT_GE(lay.banner_line_px, 14.0f) << where;
            std::vector<ScreenBox> drawn = lay.labels;
            drawn.insert(drawn.end(), lay.tags.begin(), lay.tags.end());
            for (const ScreenBox& b : drawn)  // none reaches into the banner's band
              EXPECT_TRUE(box_inside(b, glm::vec4(-1e6f, top, 1e6f, 1e6f))) << where;
            ++checked;
          }
        });
  });
  EXPECT_EQ(checked, 3 * 2 * 2 * 2 * 4);
}

// A paged cache's captions on the ground ("page 3 \u00b7 shared \u00d72")
// in the window's view at text scale 1.0 to 2.5, for every camera: each is
// drawn whole inside the view (so never under the legend's or the banner's
// band) and clear of the token labels, tags and layer numbers; where there
// is no room they are left out, the shared pages' last.
// The 3D view's hover tooltips at text scale 2.5 in a 1280x720 window, with
// the mouse at the right edge: ImGui keeps the whole tooltip inside the
// window (its lines wrap at half the window's width).
TEST_F(TeachPixels, HoverTooltipsStayInsideTheWindow) {
  reload_fonts(2.5f);
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 display(1280, 720);
  io.DisplaySize = display;
  EngineState engine;
  const auto h = make_history(12, std::vector<CacheMode>(20, CacheMode::kKV));
  engine.seq = build_sequence(h, h.size());
  engine.tree.start();
  for (const RecordPtr& r : h) engine.tree.push(r);
  int checked = 0;
  for (Pick::Kind kind : {Pick::kToken, Pick::kKv}) {
    for (ImVec2 mouse : {ImVec2(1275, 400), ImVec2(640, 700), ImVec2(5, 5)}) {
      Pick p;
      p.kind = kind;
      p.pos = 3;
      p.layer = 1;
      p.state = KvState::kResident;
      io.MousePos = mouse;
      ImGuiWindow* tip = nullptr;
      for (int frame = 0; frame < 3; ++frame) {  // a tooltip takes its size over the first frames
        draw2d([&](ImDrawList*) { hover_tooltip(engine, p, -1, -1); });
      }
      for (ImGuiWindow* w : ImGui::GetCurrentContext()->Windows)
        if ((w->Flags & ImGuiWindowFlags_Tooltip) && w->Active) tip = w;
      ASSERT_NE(tip, nullptr);
      EXPECT_GE(tip->Pos.x, 0.0f) << mouse.x << "," << mouse.y;
      EXPECT_GE(tip->Pos.y, 0.0f) << mouse.x << "," << mouse.y;
      EXPECT_LE(tip->Pos.x + tip->Size.x, display.x) << mouse.x << "," << mouse.y;
      EXPECT_LE(tip->Pos.y + tip->Size.y, display.y) << mouse.x << "," << mouse.y;
      EXPECT_GT(tip->Size.y, 3 * fonts_.ui->FontSize);  // several lines: the real tooltip
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
  io.DisplaySize = ImVec2(static_cast<float>(kW), static_cast<float>(kH));
  reload_fonts(1.0f);
}

// Beam search as a tree, drawn by the real renderer: seen from above, each
// running beam's newest token shows its colour where the scene puts it, one
// lane per beam. With KVSCOPE_SHOT_DIR set the frames are saved as PNG.
TEST_F(RenderPixels, BeamTreeLanesAreDrawn) {
  const BeamRun run = beam_run(8);
  const std::vector<BeamRecordPtr>& recs = run.recs;
  ASSERT_GE(recs.size(), 3u);
  const size_t shown = recs.size() - 1;  // beams still running
  const Scene s = build_beam_scene(recs, shown, run.model->config.n_layer);
  for (CameraPreset preset : {CameraPreset::kTop, CameraPreset::kFront}) {
    const Camera cam = preset_camera(preset, s, static_cast<float>(kW) / kH);
    const auto img = render(s, cam);
    if (const char* out = std::getenv("KVSCOPE_SHOT_DIR")) {
      const std::string path = std::string(out) + "/beam_tree_" + to_string(preset) + ".png";
      ASSERT_TRUE(stbi_write_png(path.c_str(), kW, kH, 4, img.data(), kW * 4)) << path;
    }
    if (preset != CameraPreset::kTop) continue;
    int tips = 0;
    for (const BlockInstance& b : s.tokens) {
      if (b.glow <= 0) continue;
      int x, y;
      ASSERT_TRUE(screen(cam, b.center + glm::vec3(0, b.size.y * 0.5f, 0), x, y));
      float k;
      EXPECT_LT(shade_error(at(img, x, y), glm::vec3(b.colour), k), 0.2f) << "tip at " << x << "," << y;
      ++tips;
    }
    EXPECT_EQ(tips, static_cast<int>(recs[shown - 1]->running.size()));
  }
}

// Every iteration of a sampled K = 4 speculative run of test_model_dir()
// drafted by test_draft_dir() on "Once upon a time".
std::vector<SpecIterationPtr> pair_iterations(int max_new, uint64_t seed) {
  std::vector<SpecIterationPtr> its;
  SpeculativeDecoder d(load_model(test_model_dir()), load_model(test_draft_dir()));
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = max_new;
  opt.sampler.greedy = false;
  opt.sampler.seed = seed;
  d.start("Once upon a time", opt);
  while (SpecIterationPtr it = d.step()) its.push_back(it);
  return its;
}

// A speculative iteration drawn by the real renderer in its three stages:
// the drafted ghosts show the draft colour where the scene puts them.
TEST_F(RenderPixels, SpeculativeGhostsAreDrawn) {
  const std::vector<SpecIterationPtr> its = pair_iterations(24, 11);
  ASSERT_GE(its.size(), 2u);
  for (float anim : {0.3f, 0.5f, 1.0f}) {
    const Scene s = build_spec_scene(its, 2, anim);
    const Camera cam = preset_camera(CameraPreset::kFront, s, static_cast<float>(kW) / kH);
    const auto img = render(s, cam);
    if (const char* out = std::getenv("KVSCOPE_SHOT_DIR")) {
      const std::string path =
          std::string(out) + "/speculative_" + std::to_string(static_cast<int>(anim * 100)) + ".png";
      ASSERT_TRUE(stbi_write_png(path.c_str(), kW, kH, 4, img.data(), kW * 4)) << path;
    }
    if (anim != 0.3f) continue;
    int ghosts = 0;
    for (const BlockInstance& b : s.tokens) {
      if (glm::vec3(b.colour) != kDraftColour || b.size.x < 0.7f) continue;
      int x, y;
      ASSERT_TRUE(screen(cam, b.center + glm::vec3(0, 0, b.size.z * 0.5f), x, y));
      float k;
      EXPECT_LT(shade_error(at(img, x, y), kDraftColour, k), 0.25f) << "ghost at " << x << "," << y;
      ++ghosts;
    }
    EXPECT_GE(ghosts, 1);
  }
}

// Speculative decoding's verify pass and its verdicts in the window's view,
// text scale 1.0 to 2.5: every drafted token is named by its tag (the token
// over its p and q), the tags stay off each other and off every token block, and their
// text keeps at least 55 % of the small font's size (the scene's other
// text grows with the text scale; at 2.5 they were once 17 px beside 45 px
// token labels).
TEST_F(TeachPixels, DraftTagsNameTheirTokensAndStayOffTheBlocks) {
  const std::vector<SpecIterationPtr> its = pair_iterations(8, 5);
  ASSERT_FALSE(its.empty());
  const SequenceState seq;  // the window's plain sequence: none shown
  FrameSpec spec;
  spec.seq = &seq;
  const StrategyTimeline timeline = its;
  spec.timeline = &timeline;
  spec.decode_count = 1;
  int views = 0;
  for_each_scale([&](float scale) {
    for (float anim : {0.5f, 1.0f}) {  // verifying (p and q), then resolved (and the verdicts)
      spec.anim = anim;
      for_each_window_view(
          spec, fonts_, scale, {ImVec2(1280, 720), ImVec2(1366, 768)},
          [&](const ComposedFrame& fr, float w, float, float view_h, const std::string& where) {
            const Camera cam = preset_camera(CameraPreset::kFront, fr.scene, w / view_h);
            OverlayLayout lay;
            draw2d([&](ImDrawList* dl) {
              draw_overlay(dl, fr.scene, cam, ImVec2(0, 0), ImVec2(w, view_h), fonts_, fr.overlay, &lay);
            });
            const size_t drafted =
                static_cast<size_t>(std::count_if(fr.scene.labels.begin(), fr.scene.labels.end(),
                                                  [](const Label& l) { return l.kind == LabelKind::kHead; }));
            if (anim < 1) {
              ASSERT_EQ(drafted, static_cast<size_t>(its[0]->k)) << where;
            }
            ASSERT_GE(drafted, 1u) << where;
            ASSERT_EQ(lay.tags.size(), drafted) << where;
            EXPECT_EQ(lay.head_tags, lay.tags.size()) << where;
            EXPECT_GE(lay.tag_px, 0.55f * fonts_.small->FontSize) << where;
            const glm::mat4 vp = cam.proj(w / view_h) * cam.view();
            for (size_t i = 0; i < lay.tags.size(); ++i) {
              for (size_t j = i + 1; j < lay.tags.size(); ++j)
                EXPECT_FALSE(boxes_overlap(lay.tags[i], lay.tags[j])) << where << ": tags " << i;
              for (const BlockInstance& b : fr.scene.tokens) {
                glm::vec2 lo(1e9f), hi(-1e9f), px;
                for (int c = 0; c < 8; ++c) {
                  const glm::vec3 corner =
                      b.center + 0.5f * b.size * glm::vec3(c & 1 ? 1 : -1, c & 2 ? 1 : -1, c & 4 ? 1 : -1);
                  if (!project(vp, corner, w, view_h, px)) continue;
                  lo = glm::min(lo, px);
                  hi = glm::max(hi, px);
                }
                EXPECT_FALSE(boxes_overlap(lay.tags[i], flat_box(lo, hi - lo)))
                    << where << ": tag " << i << " covers the token at " << b.pos;
              }
            }
            // Drawn as the window and `render --draft` draw it, under the
            // banner's own band: no drafted token's tag or verdict reaches
            // into the band (at 2.5 they once sat under the banner's text).
            const float top = fr.overlay.top;
            EXPECT_GT(top, 0.0f) << where;
            OverlayLayout banded;
            draw2d([&](ImDrawList* dl) {
              draw_overlay(dl, fr.scene, cam, ImVec2(0, top), ImVec2(w, view_h), fonts_, fr.overlay, &banded);
            });
            EXPECT_EQ(banded.tags.size(), lay.tags.size()) << where;
            for (const ScreenBox& t : banded.tags)
              EXPECT_TRUE(box_inside(t, glm::vec4(-1e6f, top, 1e6f, 1e6f))) << where << ": a tag under the banner";
            ++views;
          });
    }
  });
  EXPECT_EQ(views, 3 * 2 * 2 * 2);
}

}  // namespace
}  // namespace kvscope
