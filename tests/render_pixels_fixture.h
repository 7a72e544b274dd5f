// The headless render tests' fixtures (render_pixels.cpp,
// render_pixels_labels.cpp): an EGL surfaceless context with the real
// renderer drawing into an offscreen target (RenderPixels), and ImGui with
// the overlay's real fonts through the OpenGL 3 backend (TeachPixels).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include "app/gui/frame.h"
#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "render/gl/gl_context.h"
#include "render/gl/gl_objects.h"
#include "render/gl/renderer.h"
#include "render/overlay/overlay.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"
#include "scene_fixtures.h"

namespace kvscope::pixel_tests {

using namespace scene_fixtures;

constexpr int kW = 960, kH = 540;

struct Rgb {
  float r, g, b;  // 0..1
};

class RenderPixels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ctx_ = std::make_unique<gl::HeadlessContext>();
    messages_ = std::make_unique<std::vector<std::string>>();
    debug_ = gl::enable_debug_output(messages_.get());
    renderer_ = std::make_unique<Renderer>();
    target_ = std::make_unique<gl::OffscreenTarget>();
    target_->resize(kW, kH, 0);  // no MSAA: a pixel is exactly one fragment
    std::printf("renderer: %s (KHR_debug %s)\n", ctx_->description().c_str(), debug_ ? "on" : "unavailable");
  }
  static void TearDownTestSuite() {
    target_.reset();
    renderer_.reset();
    ctx_.reset();
  }
  void TearDown() override {
    EXPECT_NO_THROW(gl::check_errors("after test"));
    for (const auto& m : *messages_) ADD_FAILURE() << "GL debug output: " << m;
    messages_->clear();
  }

  // Draws and reads back; also returns the camera used.
  std::vector<uint8_t> render(const Scene& s, const Camera& cam, bool grid = false) {
    RenderStyle style;
    style.fog = false;  // exact colours
    style.grid = grid;
    target_->bind();
    renderer_->draw(s, cam, kW, kH, style);
    return target_->read_rgba();
  }
  static Rgb at(const std::vector<uint8_t>& img, int x, int y) {
    const size_t i = (static_cast<size_t>(y) * kW + x) * 4;
    return {img[i] / 255.0f, img[i + 1] / 255.0f, img[i + 2] / 255.0f};
  }
  static bool screen(const Camera& cam, const glm::vec3& p, int& x, int& y) {
    glm::vec2 px;
    if (!project(cam.proj(static_cast<float>(kW) / kH) * cam.view(), p, kW, kH, px)) return false;
    x = static_cast<int>(std::floor(px.x));
    y = static_cast<int>(std::floor(px.y));
    return x >= 0 && x < kW && y >= 0 && y < kH;
  }
  // The pixel is `base` under some uniform shading factor k (lambert):
  // returns the largest channel error of the best fit, and k.
  static float shade_error(const Rgb& px, const glm::vec3& base, float& k) {
    const float dot = px.r * base.r + px.g * base.g + px.b * base.b;
    k = dot / glm::dot(base, base);
    return std::max({std::abs(px.r - k * base.r), std::abs(px.g - k * base.g), std::abs(px.b - k * base.b)});
  }

  inline static std::unique_ptr<gl::HeadlessContext> ctx_;
  inline static std::unique_ptr<std::vector<std::string>> messages_;
  inline static bool debug_ = false;
  inline static std::unique_ptr<Renderer> renderer_;
  inline static std::unique_ptr<gl::OffscreenTarget> target_;
};

class TeachPixels : public RenderPixels {
 protected:
  void SetUp() override {
    ctx_imgui_ = ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(static_cast<float>(kW), static_cast<float>(kH));
    io.DeltaTime = 1.0f / 60.0f;
    fonts_ = load_fonts(1.0f);
    ASSERT_TRUE(ImGui_ImplOpenGL3_Init("#version 330 core"));
  }
  void TearDown() override {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui::DestroyContext(ctx_imgui_);
    RenderPixels::TearDown();
  }
  // Clears to black, runs `draw` on the background draw list, reads back.
  template <class F>
  std::vector<uint8_t> draw2d(F draw) {
    target_->bind();
    glViewport(0, 0, kW, kH);
    glClearColor(0, 0, 0, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
    draw(ImGui::GetBackgroundDrawList());
    ImGui::Render();
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    return target_->read_rgba();
  }
  // Runs `f(scale)` at text scale 1.0, 1.5 and 2.5 with fonts_ loaded at
  // that scale; fonts_ are back at scale 1 afterwards.
  template <class F>
  void for_each_scale(F f) {
    for (float scale : {1.0f, 1.5f, 2.5f}) {
      reload_fonts(scale);
      f(scale);
    }
    reload_fonts(1.0f);
  }
  // The same for a KV CACHE and a NO CACHE sequence (12 prompt positions,
  // 30 steps): `check(spec, scale)` with the frame spec of the last step.
  template <class F>
  void for_each_scale_and_mode(F check) {
    const auto kv = make_history(12, std::vector<CacheMode>(30, CacheMode::kKV));
    const auto no_cache = make_history(12, std::vector<CacheMode>(30, CacheMode::kNoCache));
    for_each_scale([&](float scale) {
      for (const auto* h : {&kv, &no_cache}) {
        const SequenceState seq = build_sequence(*h, h->size());
        FrameSpec spec;
        spec.seq = &seq;
        check(spec, scale);
      }
    });
  }
  // Draws the view overlay of `s` (labels and tags only) at each scale, every
  // camera preset and each view size: `check(preset, view, camera, layout,
  // where)`, `where` naming the case for failure messages.
  template <class F>
  void for_each_overlay(const Scene& s, std::initializer_list<float> scales, std::initializer_list<ImVec2> views,
                        F check) {
    for (float scale : scales) {
      reload_fonts(scale);
      for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
        for (ImVec2 view : views) {
          OverlayOptions opt;
          opt.legend = opt.hud = opt.banner = false;
          opt.text_scale = scale;
          OverlayLayout lay;
          const Camera cam = preset_camera(p, s, view.x / view.y);
          draw2d([&](ImDrawList* dl) { draw_overlay(dl, s, cam, ImVec2(0, 0), view, fonts_, opt, &lay); });
          const std::string where = std::string(to_string(p)) + " scale " + std::to_string(scale) + " view " +
                                    std::to_string(static_cast<int>(view.x));
          check(p, scale, view, cam, lay, where);
        }
      }
    }
    reload_fonts(1.0f);
  }
  void reload_fonts(float scale) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    fonts_ = load_fonts(scale);
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
  ImGuiContext* ctx_imgui_ = nullptr;
  OverlayFonts fonts_;
};

// The 3D view the window leaves on common screens (sidebars open, or folded
// to their strips; lessons closed) at a text scale, as compose_frame splits
// it: the banner's band above, the legend's under. Calls `check` with the
// composed frame, the view's width and the height left for the 3D view.
template <typename F>
void for_each_window_view(const FrameSpec& spec, const OverlayFonts& fonts, float scale,
                          const std::vector<ImVec2>& screens, F check) {
  for (ImVec2 screen : screens) {
    // gui_layout's sidebars and the closed bottom strip (two framed rows).
    const float sidebar = std::clamp(290.0f * scale, std::min(240.0f, screen.x * 0.3f), screen.x * 0.27f);
    const float strip = 68.0f * scale, folded = 38.0f * scale;
    for (float side : {sidebar, folded}) {
      const float w = screen.x - 2 * side, avail_h = screen.y - strip;
      const ComposedFrame fr = compose_frame(spec, fonts, w, avail_h);
      const float view_h = avail_h - fr.overlay.top - fr.overlay.band;
      const std::string where = "scale " + std::to_string(scale) + " screen " +
                                std::to_string(static_cast<int>(screen.x)) + " view " +
                                std::to_string(static_cast<int>(w)) + "x" + std::to_string(static_cast<int>(view_h));
      check(fr, w, avail_h, view_h, where);
    }
  }
}

// The model the model-driven pixel tests run: $MODEL (tests/gui_render_pixels.sh
// sets it, tests/testlib_model.sh), else the shipped kvscope-tiny.
inline std::string test_model_dir() {
  const char* dir = std::getenv("MODEL");
  return dir && *dir ? dir : std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny";
}

// Its draft for speculative decoding (same tokenizer): $DRAFT, else the
// kvscope-draft beside the model, else the model itself (a draft that is
// the target: every token accepted, the ghosts still drawn).
inline std::string test_draft_dir() {
  if (const char* d = std::getenv("DRAFT"); d && *d) return d;
  const std::string beside = test_model_dir() + "/../kvscope-draft";
  return std::filesystem::exists(beside + "/config.json") ? beside : test_model_dir();
}

// Every step of beam search with 4 beams on "Once upon a time" by test_model_dir().
struct BeamRun {
  std::shared_ptr<const Model> model;
  std::vector<BeamRecordPtr> recs;
};
inline BeamRun beam_run(int max_new) {
  BeamRun run;
  run.model = load_model(test_model_dir());
  BeamGenerator gen(run.model);
  BeamOptions opt;
  opt.n_beams = 4;
  opt.max_new = max_new;
  gen.start("Once upon a time", opt);
  while (BeamRecordPtr r = gen.step()) run.recs.push_back(r);
  return run;
}

}  // namespace kvscope::pixel_tests
