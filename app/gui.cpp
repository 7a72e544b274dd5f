// The window: GLFW + OpenGL 3.3 core + Dear ImGui. run_gui() is the frame
// loop of Dear ImGui's examples: poll, new frame, UI, render, swap. What
// happens in between lives elsewhere: the GL-free Session (session.h) owns
// the engine and carries out commands; gui_layout places the panels;
// gui_input reads keys and the mouse; frame.h composes the picture that
// `kvscope render` draws too; demo_script/gui_soak drive scripted runs.
#include <glad/gl.h>
// GLFW after glad: glad provides the GL declarations.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "assets.h"
#include "demo_script.h"
#include "frame.h"
#include "gl_objects.h"
#include "gui.h"
#include "gui_common.h"
#include "gui_input.h"
#include "gui_layout.h"
#include "gui_settings.h"
#include "gui_soak.h"
#include "gui_window.h"
#include "panels.h"
#include "renderer.h"
#include "session.h"

namespace kvscope {

namespace {

void apply_style(float scale) {
  ImGuiStyle style;
  ImGui::StyleColorsDark(&style);
  style.WindowRounding = 6.0f;
  style.FrameRounding = 4.0f;
  style.GrabRounding = 4.0f;
  style.WindowBorderSize = 0.0f;
  style.Colors[ImGuiCol_WindowBg] = ImVec4(0.06f, 0.07f, 0.10f, 0.94f);
  style.Colors[ImGuiCol_Header] = ImVec4(0.16f, 0.22f, 0.34f, 1.0f);
  style.Colors[ImGuiCol_HeaderHovered] = ImVec4(0.22f, 0.30f, 0.46f, 1.0f);
  style.ScaleAllSizes(scale);
  ImGui::GetStyle() = style;
}

// A run's fixed choices: scripted or interactive, where settings live.
struct RunSetup {
  bool scripted = false;  // --demo-frames or --soak-rounds: no settings read or written
  std::string settings_path, ini_path;
  std::string demo_view;  // $KVSCOPE_DEMO_VIEW: one teaching feature set up for a screenshot
  WindowSettings window;
};

RunSetup prepare(const GuiOptions& opt, UiState& ui) {
  RunSetup r;
  r.scripted = opt.demo_frames > 0 || opt.soak_rounds > 0;
  if (!r.scripted) {
    const std::string dir = config_dir();
    if (!dir.empty()) {
      r.settings_path = dir + "/settings.json";
      r.ini_path = dir + "/imgui.ini";
      std::string err;
      if (!load_settings(r.settings_path, ui, r.window, err)) ui.errors.push_back(err);
      palette::set_palette(ui.colour_blind);
    }
  } else {
    r.window.width = 1280;
    r.window.height = 720;
    ui.fastest = true;
  }
  if (!opt.prompt.empty()) {
    ui.preset = kNumPresets;
    ui.custom_prompt = opt.prompt;
  }
  if (opt.max_new > 0) ui.max_new = opt.max_new;
  if (const char* e = std::getenv("KVSCOPE_DEMO_VIEW"); e && opt.demo_frames > 0) r.demo_view = e;
  setup_demo_view(r.demo_view, ui);
  if (opt.soak_rounds > 0) {  // every round runs into the context limit
    ui.max_new = 1 << 20;
    ui.ignore_eos = true;
  }
  return r;
}

// A speculative iteration plays three stages (draft, verify, resolve) over
// the three token periods it gets (Session::next_step_due).
float anim_duration(const Snapshot& snap, const UiState& ui) {
  const float d = ui.fastest ? 0.15f : std::clamp(0.85f / ui.speed, 0.15f, 0.9f);
  return snap.decoding.mode == DecodeMode::kSpeculative ? 3.0f * d : d;
}

// Sleeps while nothing moves (no animation, no step due), else polls.
void poll_or_wait(const Session& s, bool scripted, bool animating, int& awake_frames, double now) {
  double wait = -1;
  if (!scripted && !animating && awake_frames <= 0 && s.ui.errors.empty()) {
    wait = 0.5;
    if (s.ui.playing && s.snap.started && s.snap.stop == StopReason::kNone)
      wait = std::max(0.0, s.next_step_due() - now);
  }
  if (wait > 0) {
    glfwWaitEventsTimeout(wait);
    awake_frames = 3;  // ImGui settles hover state over a few frames
  } else {
    glfwPollEvents();
    awake_frames--;
  }
}

// Commands of the scripted drivers for this frame.
void scripted_commands(const GuiOptions& opt, const RunSetup& setup, int frame, Session& s, SoakRun* soak,
                       Commands& cmds) {
  if (soak) {
    Commands more = soak->frame(s.snap, s.engine_idle());
    cmds.insert(cmds.end(), more.begin(), more.end());
  }
  if (opt.demo_frames <= 0) return;
  Commands more = demo_script(frame, opt.demo_frames, s.snap, setup.demo_view);
  cmds.insert(cmds.end(), more.begin(), more.end());
  // Keep generating for the whole run: start again when a generation ends
  // (not in the last frames, so the final screenshot shows a full scene).
  if (setup.demo_view.empty() && s.snap.stop != StopReason::kNone && s.engine_idle() &&
      frame < opt.demo_frames * 9 / 10)
    cmds.push_back(cmd::Reset{});
}

// What only the window can do: fullscreen, fonts, screenshots.
struct WindowSide {
  Window& window;
  OverlayFonts fonts;
  std::string screenshot_path;  // non-empty: save the next frame

  void apply(const WindowRequests& r, UiState& ui) {
    if (r.toggle_fullscreen) {
      window.toggle_fullscreen();
      ui.fullscreen = window.fullscreen();
    }
    if (r.screenshot) screenshot_path = timestamped_png();
    if (r.text_scale > 0) {  // fonts change size between frames only
      ui.text_scale = r.text_scale;
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      fonts = load_fonts(ui.text_scale);
      ImGui_ImplOpenGL3_CreateFontsTexture();
      apply_style(ui.text_scale);
    }
  }
};

void draw_3d(Renderer& renderer, const ComposedFrame& fr, const Camera& cam, const ViewRect& v, float H, int fb_w,
             int fb_h, float sx, float sy, bool grid) {
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glViewport(0, 0, fb_w, fb_h);
  const glm::vec3 bgc = palette::kBackground;
  glClearColor(bgc.r, bgc.g, bgc.b, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
  RenderStyle style;
  style.grid = grid;
  style.dpi_scale = sx;
  if (fb_w <= 0 || fb_h <= 0) return;
  // GL's viewport origin is the bottom-left corner.
  renderer.draw(fr.scene, cam, static_cast<int>(v.x * sx), static_cast<int>((H - v.y - v.h) * sy),
                static_cast<int>(v.w * sx), static_cast<int>(v.h * sy), style);
}

void note_gl_error(std::vector<std::string>& messages, int frame) {
  const GLenum e = glGetError();
  if (e == GL_NO_ERROR) return;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "glGetError 0x%04x at frame %d", e, frame);
  messages.push_back(buf);
}

int report_scripted(const Session& s, int frames, const FrameStats& stats, const std::vector<std::string>& gl_msgs) {
  for (const std::string& m : gl_msgs) std::fprintf(stderr, "kvscope: GL: %s\n", m.c_str());
  for (const std::string& e : s.ui.errors) std::fprintf(stderr, "kvscope: error: %s\n", e.c_str());
  std::fprintf(stderr, "kvscope: demo: %d frames, %d steps (%d positions now), final mode %s\n", frames,
               s.snap.total_records, s.snap.seq.seq_len(), to_string(s.snap.mode));
  std::fprintf(stderr, "kvscope: %s\n", stats.summary().c_str());
  return !gl_msgs.empty() || !s.ui.errors.empty() || s.snap.total_records == 0 ? 1 : 0;
}

}  // namespace

int run_gui(const GuiOptions& opt) {
  leave_a_core_for_rendering();
  UiState initial;
  RunSetup setup = prepare(opt, initial);
  Window window(setup.window, setup.scripted);
  GLFWwindow* win = window.get();
  std::vector<std::string> gl_messages;
  gl::enable_debug_output(&gl_messages);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = setup.ini_path.empty() ? nullptr : setup.ini_path.c_str();
  io.ConfigWindowsMoveFromTitleBarOnly = true;
  WindowSide side{window, load_fonts(initial.text_scale), {}};
  apply_style(initial.text_scale);
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int exit_code = 0;
  std::unique_ptr<SoakRun> soak;
  if (opt.soak_rounds > 0) soak = std::make_unique<SoakRun>(opt.soak_rounds);
  FrameStats frame_stats;  // scripted runs report frame times
  {
    Renderer renderer;
    Session s([] { glfwPostEmptyEvent(); });  // the engine thread wakes the sleeping loop
    s.ui = initial;
    if (!setup.settings_path.empty()) s.fit_to_model(setup.settings_path);  // the model's limits, once loaded
    s.snap.mode = opt.no_cache ? CacheMode::kNoCache : CacheMode::kKV;
    if (s.ui.decoding.draft_dir.empty()) s.ui.decoding.draft_dir = asset_path("models/kvscope-draft");
    s.snap.decoding = s.ui.decoding;  // the first generation's strategy (a demo view may choose one)
    s.ui.active_prompt = s.selected_prompt();
    s.load_model(opt.model_dir.empty() ? default_model_dir() : opt.model_dir, opt.ctx);
    int frame = 0, awake_frames = 0, hover_pos = -1;
    float anim = 1.0f;
    double prev_time = glfwGetTime();

    while (!glfwWindowShouldClose(win)) {
      // 1. Poll (or sleep while nothing moves); the engine's results in.
      const bool animating = anim < 1.0f || s.snap.step_in_flight ||
                             glm::distance(s.view.camera.eye(), s.view.goal.eye()) > 1e-3f * s.view.camera.distance;
      poll_or_wait(s, setup.scripted, animating, awake_frames, glfwGetTime());
      const double now = glfwGetTime();
      const float dt = static_cast<float>(std::min(0.1, now - prev_time));
      if (setup.scripted && frame > 0) frame_stats.add(now - prev_time, s.snap.loading_model);
      prev_time = now;
      s.update(now);
      anim = std::clamp(static_cast<float>((now - s.snap.last_record_time) / anim_duration(s.snap, s.ui)), 0.0f, 1.0f);
      side.apply(s.take_window_requests(), s.ui);

      // 2. New frame; the UI: panels, shortcuts and scripts give commands.
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      ImGui::NewFrame();
      int win_w = 0, win_h = 0, fb_w = 0, fb_h = 0;
      glfwGetWindowSize(win, &win_w, &win_h);
      glfwGetFramebufferSize(win, &fb_w, &fb_h);
      const float W = static_cast<float>(win_w), H = static_cast<float>(win_h);
      Commands cmds = shortcuts();
      scripted_commands(opt, setup, frame, s, soak.get(), cmds);
      ViewRect v = layout_panels(s.snap, s.ui, W, H, cmds);
      Commands errs = panel_errors(s.ui);
      cmds.insert(cmds.end(), errs.begin(), errs.end());
      s.execute(cmds, now);

      // 3. The picture: scene, camera, mouse, text layer.
      const FrameSpec spec = frame_spec(s, anim, hover_pos);
      const ComposedFrame fr = compose_frame(spec, side.fonts, v.w, v.h);
      v.h = std::max(1.0f, v.h - fr.overlay.band);
      v.w = std::max(1.0f, v.w - fr.right);
      follow_camera(s.view, s.ui, fr.scene, v.w / v.h, dt);
      // (scripted runs ignore the pointer: Xvfb parks it mid-screen, its tooltip would cover their screenshots)
      hover_pos = setup.scripted ? -1 : view_mouse(s, fr.scene, v, spec.view.hide_newest);
      draw_frame_text(ImGui::GetBackgroundDrawList(), fr, spec, s.view.camera, ImVec2(v.x, v.y), ImVec2(v.w, v.h),
                      side.fonts);
      ImGui::Render();

      // 4. Render: the 3D view, then the panels over it.
      const float sx = win_w > 0 ? static_cast<float>(fb_w) / W : 1.0f;
      const float sy = win_h > 0 ? static_cast<float>(fb_h) / H : 1.0f;
      draw_3d(renderer, fr, s.view.camera, v, H, fb_w, fb_h, sx, sy, s.ui.grid);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

      // 5. Screenshot of exactly what is shown, then swap.
      const bool last = (opt.demo_frames > 0 && frame + 1 >= opt.demo_frames) || (soak && soak->finished());
      if (last && !opt.screenshot.empty()) side.screenshot_path = opt.screenshot;
      if (!side.screenshot_path.empty()) {
        std::string err;
        if (save_screenshot(side.screenshot_path, fb_w, fb_h, err))
          s.ui.status = "saved " + side.screenshot_path;
        else
          s.ui.errors.push_back(err);
        side.screenshot_path.clear();
      }
      if (setup.scripted) note_gl_error(gl_messages, frame);
      glfwSwapBuffers(win);
      ++frame;
      if (last) break;
    }

    if (setup.scripted) {
      exit_code = report_scripted(s, frame, frame_stats, gl_messages);
    } else if (!setup.settings_path.empty()) {
      window.store_placement(setup.window);
      std::string err;
      if (!save_settings(setup.settings_path, s.ui, setup.window, err))
        std::fprintf(stderr, "kvscope: %s\n", err.c_str());
    }
  }  // the worker joins and GL objects go before the context
  if (soak) {
    int64_t live = 0;
    for (int i = 0; i < gl::kNumObjectKinds; ++i) live += gl::object_count(static_cast<gl::ObjectKind>(i)).live();
    if (soak->report(stderr, live) != 0) exit_code = 1;
  }

  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  return exit_code;
}

}  // namespace kvscope
