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

#include "app/gui/common.h"
#include "app/gui/frame.h"
#include "app/gui/gui.h"
#include "app/gui/input.h"
#include "app/gui/layout.h"
#include "app/gui/panels/panels.h"
#include "app/gui/soak.h"
#include "app/platform/assets.h"
#include "app/platform/window.h"
#include "app/session/demo_script.h"
#include "app/session/session.h"
#include "app/session/settings.h"
#include "kvscope_shaders.h"
#include "render/gl/gl_objects.h"
#include "render/gl/renderer.h"

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
  std::string demo_view;                    // $KVSCOPE_DEMO_VIEW: one teaching feature set up for a screenshot
  std::optional<CameraPreset> demo_camera;  // $KVSCOPE_DEMO_CAMERA: the preset the run ends on
  std::vector<std::string> demo_open;       // $KVSCOPE_DEMO_OPEN: panels opened as by clicks
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
  if (opt.demo_frames > 0) {
    const std::string view_err = apply_demo_view(std::getenv("KVSCOPE_DEMO_VIEW"), r.demo_view);
    if (!view_err.empty()) ui.errors.push_back(view_err);
    const std::string err = apply_demo_window(std::getenv("KVSCOPE_DEMO_TEXT_SCALE"), std::getenv("KVSCOPE_DEMO_SIZE"),
                                              ui, r.window.width, r.window.height);
    if (!err.empty()) ui.errors.push_back(err);
    const std::string cam_err = apply_demo_camera(std::getenv("KVSCOPE_DEMO_CAMERA"), r.demo_camera);
    if (!cam_err.empty()) ui.errors.push_back(cam_err);
    const std::string open_err = apply_demo_open(std::getenv("KVSCOPE_DEMO_OPEN"), r.demo_open);
    if (!open_err.empty()) ui.errors.push_back(open_err);
  }
  setup_demo_view(r.demo_view, ui);
  if (opt.soak_rounds > 0) {  // every round runs into the context limit
    ui.max_new = 1 << 20;
    ui.ignore_eos = true;
  }
  return r;
}

// A speculative iteration plays three stages (draft, verify, resolve) over
// the three token periods it gets (Session::next_step_due).
float anim_duration(const EngineState& engine, const UiState& ui) {
  const float d = ui.fastest ? 0.15f : std::clamp(0.85f / ui.speed, 0.15f, 0.9f);
  return is_speculative(engine.strategy) ? 3.0f * d : d;
}

// Sleeps while nothing moves (no animation, no step due), else polls.
void poll_or_wait(const Session& s, bool scripted, bool animating, int& awake_frames, double now) {
  double wait = -1;
  if (!scripted && !animating && awake_frames <= 0 && s.ui.errors.empty()) {
    wait = 0.5;
    if (s.ui.playing && s.engine.started && s.engine.stop == StopReason::kNone)
      wait = std::max(0.0, s.next_step_due() - now);
    if (s.ui.serving.open && s.ui.serving.playing)  // the Serving view's next step
      wait = std::max(0.0, s.ui.serving.last_step + 1.0 / std::max(0.1f, s.ui.serving.speed) - now);
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
    Commands more = soak->frame(s.engine, s.engine_idle());
    cmds.insert(cmds.end(), more.begin(), more.end());
  }
  if (opt.demo_frames <= 0) return;
  if (frame == opt.demo_frames / 4) {
    open_demo_sections(setup.demo_view, s.ui);
    open_demo_panels(setup.demo_open, s.ui);
  }
  Commands more = demo_script(frame, opt.demo_frames, s.engine, setup.demo_view, setup.demo_camera);
  cmds.insert(cmds.end(), more.begin(), more.end());
  // Keep generating for the whole run: start again when a generation ends
  // (not in the last frames, so the final screenshot shows a full scene).
  if (setup.demo_view.empty() && s.engine.stop != StopReason::kNone && s.engine_idle() &&
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
      window.set_text_scale(ui.text_scale);
    }
  }
};

void draw_3d(Renderer& renderer, const ComposedFrame& fr, const Camera& cam, const ViewRect& v, const WindowSize& ws,
             bool grid) {
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glViewport(0, 0, ws.fb_w, ws.fb_h);
  const glm::vec3 bgc = fr.scene.palette.background;
  glClearColor(bgc.r, bgc.g, bgc.b, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
  RenderStyle style;
  style.grid = grid;
  style.dpi_scale = ws.sx();
  if (ws.fb_w <= 0 || ws.fb_h <= 0) return;
  // GL's viewport origin is the bottom-left corner.
  const float sx = ws.sx(), sy = ws.sy();
  renderer.draw(fr.scene, cam, static_cast<int>(v.x * sx), static_cast<int>((ws.h - v.y - v.h) * sy),
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
               s.engine.total_records, s.engine.seq.seq_len(), to_string(s.engine.mode));
  std::fprintf(stderr, "kvscope: %s\n", stats.summary().c_str());
  // A smoke test that ran nothing fails, and says why (unless an error above already did).
  if (s.engine.total_records == 0 && s.ui.errors.empty() && gl_msgs.empty())
    std::fprintf(stderr,
                 "kvscope: error: no step ran in %d frames (loading the model and starting take a few frames: "
                 "give --demo-frames more, e.g. 20)\n",
                 frames);
  return !gl_msgs.empty() || !s.ui.errors.empty() || s.engine.total_records == 0 ? 1 : 0;
}

// What the loop carries from one frame to the next.
struct LoopState {
  int frame = 0, awake_frames = 0, hover_pos = -1;
  float anim = 1.0f;  // the newest record's animation, 0..1
  float dt = 0;       // seconds since the last frame (at most 0.1)
  double now = 0, prev_time = 0;
  FrameStats stats;  // scripted runs report frame times
  std::vector<std::string> gl_messages;
  std::unique_ptr<SoakRun> soak;
};

// 1. Poll (or sleep while nothing moves); the engine's results in.
void poll_events(Session& s, bool scripted, WindowSide& side, LoopState& st) {
  const bool animating = st.anim < 1.0f || s.engine.step_in_flight ||
                         glm::distance(s.view.camera.eye(), s.view.goal.eye()) > 1e-3f * s.view.camera.distance;
  poll_or_wait(s, scripted, animating, st.awake_frames, glfwGetTime());
  st.now = glfwGetTime();
  st.dt = static_cast<float>(std::min(0.1, st.now - st.prev_time));
  if (scripted && st.frame > 0) st.stats.add(st.now - st.prev_time, s.engine.loading_model);
  st.prev_time = st.now;
  s.update(st.now);
  st.anim =
      std::clamp(static_cast<float>((st.now - s.engine.last_record_time) / anim_duration(s.engine, s.ui)), 0.0f, 1.0f);
  side.apply(s.take_window_requests(), s.ui);
}

// 2. The UI: shortcuts, scripts and panels give commands, the session
// carries them out. Returns the rectangle left for the 3D view.
ViewRect run_ui(Session& s, const GuiOptions& opt, const RunSetup& setup, const WindowSize& ws, LoopState& st) {
  Commands cmds = shortcuts();
  scripted_commands(opt, setup, st.frame, s, st.soak.get(), cmds);
  ViewRect v = layout_panels(s.engine, s.ui, ws.w, ws.h, cmds);
  Commands errs = panel_errors(s.ui);
  cmds.insert(cmds.end(), errs.begin(), errs.end());
  s.execute(cmds, st.now);
  return v;
}

// 3. The picture: scene, camera, mouse, text layer (onto ImGui's background).
ComposedFrame compose_picture(Session& s, const WindowSide& side, bool scripted, ViewRect& v, LoopState& st) {
  const FrameSpec spec = frame_spec(s, st.anim, st.hover_pos);
  ComposedFrame fr = compose_frame(spec, side.fonts, v.w, v.h);
  s.ui.view_text_h = fr.overlay.top + fr.overlay.band;
  v.y += fr.overlay.top;
  v.h = std::max(1.0f, v.h - fr.overlay.top - fr.overlay.band);
  v.w = std::max(1.0f, v.w - fr.right);
  follow_camera(s.view, s.ui, fr.scene, v.w / v.h, st.dt);
  // (scripted runs ignore the pointer: Xvfb parks it mid-screen, its tooltip would cover their screenshots)
  st.hover_pos = scripted ? -1 : view_mouse(s, fr.scene, v, spec.view.hide_newest);
  draw_frame_text(ImGui::GetBackgroundDrawList(), fr, spec, s.view.camera, ImVec2(v.x, v.y), ImVec2(v.w, v.h),
                  side.fonts);
  return fr;
}

// 5. A screenshot of exactly what is shown (asked for, or a scripted run's last frame).
void save_shown_frame(Session& s, WindowSide& side, const std::string& last_frame_path, const WindowSize& ws) {
  if (!last_frame_path.empty()) side.screenshot_path = last_frame_path;
  if (side.screenshot_path.empty()) return;
  std::string err;
  if (save_screenshot(side.screenshot_path, ws.fb_w, ws.fb_h, err))
    s.ui.status = "saved " + side.screenshot_path;
  else
    s.ui.errors.push_back(err);
  side.screenshot_path.clear();
}

bool last_frame(const GuiOptions& opt, const LoopState& st) {
  return (opt.demo_frames > 0 && st.frame + 1 >= opt.demo_frames) || (st.soak && st.soak->finished());
}

// Dear ImGui on this window: context, fonts at the UI's text scale, backends.
OverlayFonts init_imgui(GLFWwindow* win, const RunSetup& setup, float text_scale) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = setup.ini_path.empty() ? nullptr : setup.ini_path.c_str();
  io.ConfigWindowsMoveFromTitleBarOnly = true;
  OverlayFonts fonts = load_fonts(text_scale);
  apply_style(text_scale);
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init(shaders::kGlslVersion);
  return fonts;
}

void shutdown_imgui() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
}

// A scripted run's verdict; an interactive one saves where the window was.
void save_run_settings(const Session& s, const RunSetup& setup, const Window& window) {
  if (setup.scripted || setup.settings_path.empty()) return;
  WindowSettings placement = setup.window;
  window.store_placement(placement);
  std::string err;
  if (!save_settings(setup.settings_path, s.ui, placement, err)) std::fprintf(stderr, "kvscope: %s\n", err.c_str());
}

int finish_run(const Session& s, const RunSetup& setup, Window& window, const LoopState& st) {
  if (setup.scripted) return report_scripted(s, st.frame, st.stats, st.gl_messages);
  save_run_settings(s, setup, window);
  return 0;
}

// After the session and renderer are gone: the soak run's leak check.
int soak_verdict(const LoopState& st) {
  if (!st.soak) return 0;
  int64_t live = 0;
  for (int i = 0; i < gl::kNumObjectKinds; ++i) live += gl::object_count(static_cast<gl::ObjectKind>(i)).live();
  return st.soak->report(stderr, live) != 0 ? 1 : 0;
}

}  // namespace

// One interactive or scripted run of the window, carried from frame to frame
// (the desktop loops over gui_frame; the browser calls it once per
// requestAnimationFrame). Members go in reverse: session and renderer before
// ImGui and the window.
struct GuiRun {
  GuiOptions opt;
  RunSetup setup;
  std::unique_ptr<Window> window;
  LoopState st;
  std::unique_ptr<WindowSide> side;
  std::unique_ptr<Renderer> renderer;
  std::unique_ptr<Session> session;
};

void GuiRunDelete::operator()(GuiRun* run) const {
  delete run;
}

GuiRunPtr open_gui(const GuiOptions& opt) {
  leave_a_core_for_rendering();
  GuiRunPtr run(new GuiRun());
  run->opt = opt;
  UiState initial;
  run->setup = prepare(opt, initial);
  run->window = std::make_unique<Window>(run->setup.window, run->setup.scripted);
  gl::enable_debug_output(&run->st.gl_messages);
  run->side = std::make_unique<WindowSide>(
      WindowSide{*run->window, init_imgui(run->window->get(), run->setup, initial.text_scale), {}});
  run->window->set_text_scale(initial.text_scale);
  if (opt.soak_rounds > 0) run->st.soak = std::make_unique<SoakRun>(opt.soak_rounds);
  run->renderer = std::make_unique<Renderer>();
  run->session = std::make_unique<Session>([] { glfwPostEmptyEvent(); });  // the engine thread wakes the loop
  Session& s = *run->session;
  s.ui = initial;
  if (!run->setup.settings_path.empty()) s.fit_to_model(run->setup.settings_path);  // the model's limits, once loaded
  s.engine.mode = opt.no_cache ? CacheMode::kNoCache : CacheMode::kKV;
  if (s.ui.draft_dir.empty()) s.ui.draft_dir = asset_path("models/kvscope-draft");
  if (auto* p = std::get_if<strategy::Speculative>(&s.ui.strategy); p && p->draft_dir.empty())
    p->draft_dir = s.ui.draft_dir;
  s.engine.strategy = s.ui.strategy;  // the first generation's strategy (a demo view may choose one)
  s.ui.active_prompt = s.selected_prompt();
  s.load_model(opt.model_dir.empty() ? default_model_dir() : opt.model_dir, opt.ctx);
  run->st.prev_time = glfwGetTime();
  return run;
}

void gui_save_settings(const GuiRun& run) {
  save_run_settings(*run.session, run.setup, *run.window);
}

Session& gui_session(GuiRun& run) {
  return *run.session;
}

bool gui_frame(GuiRun& run) {
  if (glfwWindowShouldClose(run.window->get())) return false;
  Session& s = *run.session;
  LoopState& st = run.st;
  WindowSide& side = *run.side;
  poll_events(s, run.setup.scripted, side, st);  // 1. poll; the engine's results in
  ImGui_ImplOpenGL3_NewFrame();                  // 2. new frame, the UI's commands
  ImGui_ImplGlfw_NewFrame();
  run.window->new_frame();
  ImGui::NewFrame();
  const WindowSize ws = run.window->size();
  ViewRect v = run_ui(s, run.opt, run.setup, ws, st);
  const ComposedFrame fr = compose_picture(s, side, run.setup.scripted, v, st);  // 3. the picture
  ImGui::Render();
  draw_3d(*run.renderer, fr, s.view.camera, v, ws, s.ui.grid);  // 4. render: the 3D view, the panels over it
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  const bool last = last_frame(run.opt, st);
  save_shown_frame(s, side, last ? run.opt.screenshot : std::string(), ws);  // 5. screenshot, swap
  if (run.setup.scripted) note_gl_error(st.gl_messages, st.frame);
  glfwSwapBuffers(run.window->get());
  ++st.frame;
  return !last;
}

int close_gui(GuiRunPtr run) {
  int exit_code = finish_run(*run->session, run->setup, *run->window, run->st);
  run->session.reset();  // the worker joins and GL objects go before the context
  run->renderer.reset();
  if (soak_verdict(run->st) != 0) exit_code = 1;
  shutdown_imgui();
  return exit_code;
}

int run_gui(const GuiOptions& opt) {
  // A bad $KVSCOPE_DEMO_* value is a usage error, as a bad flag or
  // $KVSCOPE_THREADS is: named, exit 2 before the window opens.
  const std::vector<std::string> problems = demo_env_problems([](const char* name) { return std::getenv(name); });
  for (const std::string& p : problems) std::fprintf(stderr, "kvscope: error: %s\n", p.c_str());
  if (!problems.empty()) return 2;
  GuiRunPtr run = open_gui(opt);
  while (gui_frame(*run)) {
  }
  return close_gui(std::move(run));
}

}  // namespace kvscope
