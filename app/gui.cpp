// The window: GLFW + OpenGL 3.3 core + Dear ImGui. The frame loop in
// run_gui() is the whole program flow: poll (or sleep when idle), take the
// engine worker's records, draw the panels (which return commands), carry
// the commands out, build the scene, render it, swap.
#include <glad/gl.h>
// GLFW after glad: glad provides the GL declarations.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <unistd.h>

#include "error.h"
#include "gl_objects.h"
#include "gui.h"
#include "gui_common.h"
#include "gui_settings.h"
#include "gui_soak.h"
#include "gui_state.h"
#include "gui_worker.h"
#include "panel_teach.h"
#include "panels.h"
#include "renderer.h"
#include "renderer_overlay.h"
#include "scene.h"
#include "scene_camera.h"
#include "teach_view.h"

namespace kvscope {

namespace {

// --- window ------------------------------------------------------------------

void glfw_error(int code, const char* text) {
  std::fprintf(stderr, "kvscope: GLFW error %d: %s\n", code, text);
}

// Owns GLFW and the window; terminates GLFW last.
class Window {
 public:
  Window(int width, int height, bool maximized, bool debug) {
    glfwSetErrorCallback(glfw_error);
    if (!glfwInit())
      throw Error(
          "cannot open a window: no display (DISPLAY/WAYLAND_DISPLAY unset or unreachable). "
          "Use `kvscope render` for images without a display, or run `xvfb-run -a kvscope`");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    glfwWindowHint(GLFW_OPENGL_DEBUG_CONTEXT, debug ? GLFW_TRUE : GLFW_FALSE);
    glfwWindowHint(GLFW_MAXIMIZED, maximized ? GLFW_TRUE : GLFW_FALSE);
    // 4x multisampling, except on a software rasteriser (llvmpipe), where it
    // roughly doubles the frame time: there the window is made again without.
    for (int samples : {4, 0}) {
      glfwWindowHint(GLFW_SAMPLES, samples);
      win_ = glfwCreateWindow(width, height, "kvscope \xE2\x80\x94 watch a GPT-2 and its KV cache", nullptr, nullptr);
      if (!win_ && samples > 0) continue;  // no multisampled visual: try without
      if (!win_) {
        glfwTerminate();
        throw Error(
            "cannot create an OpenGL 3.3 core window (the driver may be too old); "
            "`kvscope render` works without one");
      }
      glfwMakeContextCurrent(win_);
      if (!gladLoadGL(reinterpret_cast<GLADloadfunc>(glfwGetProcAddress))) {
        glfwDestroyWindow(win_);
        glfwTerminate();
        throw Error("cannot load OpenGL 3.3 functions");
      }
      if (samples == 0 || !is_software_renderer()) break;
      glfwMakeContextCurrent(nullptr);
      glfwDestroyWindow(win_);
    }
    glfwSwapInterval(1);
  }
  ~Window() {
    glfwDestroyWindow(win_);
    glfwTerminate();
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  GLFWwindow* get() const { return win_; }

  void toggle_fullscreen() {
    if (glfwGetWindowMonitor(win_)) {
      glfwSetWindowMonitor(win_, nullptr, saved_x_, saved_y_, saved_w_, saved_h_, 0);
      return;
    }
    GLFWmonitor* mon = glfwGetPrimaryMonitor();
    const GLFWvidmode* mode = mon ? glfwGetVideoMode(mon) : nullptr;
    if (!mode) return;
    glfwGetWindowPos(win_, &saved_x_, &saved_y_);
    glfwGetWindowSize(win_, &saved_w_, &saved_h_);
    glfwSetWindowMonitor(win_, mon, 0, 0, mode->width, mode->height, mode->refreshRate);
  }
  bool fullscreen() const { return glfwGetWindowMonitor(win_) != nullptr; }

 private:
  GLFWwindow* win_ = nullptr;
  int saved_x_ = 100, saved_y_ = 100, saved_w_ = 1600, saved_h_ = 900;
};

// --- what the loop keeps between frames -------------------------------------

struct ViewState {
  Camera camera, goal;
  bool camera_init = false;
  float anim = 1.0f;  // animation phase of the newest record, 0..1
  double last_step_request = -1e9;
  int hover_pos = -1;
  float left_w = 340, right_w = 340;  // sidebar widths (window units), last frame's
  bool rebuild_fonts = false;
  float new_text_scale = 1.0f;
  bool screenshot = false;
  std::string screenshot_path;
};

int effective_max_new(const UiState& ui, const Snapshot& snap) {
  const int ctx = snap.model ? snap.model->config.n_positions : kDefaultMaxNew;
  return ui.max_new > 0 ? ui.max_new : std::min(kDefaultMaxNew, ctx);
}

float anim_duration(const UiState& ui) {
  if (ui.fastest) return 0.15f;
  return std::clamp(0.85f / ui.speed, 0.15f, 0.9f);
}

std::string current_prompt(const UiState& ui) {
  return ui.preset < kNumPresets ? kPromptPresets[ui.preset].text : ui.custom_prompt;
}

void start_generation(EngineWorker& worker, Snapshot& snap, UiState& ui, const std::string& prompt) {
  worker.cancel_steps();
  WorkerCommand c;
  c.kind = WorkerCommand::Kind::kStart;
  c.text = prompt;
  c.options.max_new = effective_max_new(ui, snap);
  c.options.mode = snap.mode;
  c.options.sampler = ui.sampler;
  c.options.ignore_eos = ui.ignore_eos;
  c.options.keep_history = false;  // the UI's BranchTree owns the records (and their memory budget)
  c.request = ++snap.start_request;
  worker.send(c);
  snap.tree.clear();
  snap.tree.start();
  snap.tree_version++;
  snap.records.clear();
  snap.seq = SequenceState();
  snap.seq_count = 0;
  snap.pending_forks = 0;
  snap.pending_select = -1;
  snap.stop = StopReason::kNone;
  snap.started = false;
  ui.active_prompt = prompt;
  ui.view_step = -1;
  ui.revealed_step = -1;
}

// Makes snap.seq the state at the timeline's step: appended incrementally
// while following the newest record, rebuilt when scrubbing or after a fork.
void sync_shown(Snapshot& snap, const UiState& ui) {
  const size_t n = snap.records.size();
  const size_t want = ui.view_step < 0 ? n : std::min(n, static_cast<size_t>(ui.view_step) + 1);
  if (snap.seq_version == snap.tree_version && want == snap.seq_count) return;
  if (snap.seq_version == snap.tree_version && want == snap.seq_count + 1)
    append_record(snap.seq, snap.records[want - 1]);
  else
    snap.seq = build_sequence(snap.records, want);
  snap.seq_count = want;
  snap.seq_version = snap.tree_version;
}

void take_events(EngineWorker& worker, Snapshot& snap, UiState& ui, double now) {
  for (WorkerEvent& ev : worker.poll()) {
    switch (ev.kind) {
      case WorkerEvent::Kind::kModelLoaded:
        snap.model = ev.model;
        snap.loading_model = false;
        snap.model_error.clear();
        start_generation(worker, snap, ui, ui.active_prompt.empty() ? current_prompt(ui) : ui.active_prompt);
        break;
      case WorkerEvent::Kind::kStarted:
        // A start superseded before its kStarted arrived: its records must not
        // land in the timeline cleared for the newer one.
        if (ev.request != snap.start_request) break;
        snap.generation = ev.generation;
        snap.started = true;
        snap.gen_start_time = now;
        break;
      case WorkerEvent::Kind::kRecord:
        if (ev.generation != snap.generation || !snap.started) break;  // from a generation since replaced
        try {
          snap.tree.push(ev.record);
        } catch (const std::exception& e) {  // a record that does not follow the current branch
          ui.errors.push_back(std::string("timeline: ") + e.what());
          break;
        }
        snap.records = snap.tree.current_history().records();
        snap.total_records++;
        if (ui.view_step < 0) snap.last_record_time = now;  // animate only what is on screen
        break;
      case WorkerEvent::Kind::kForked: {
        if (ev.generation != snap.generation) break;
        snap.pending_forks = std::max(0, snap.pending_forks - 1);
        try {
          if (snap.pending_select >= 0) {
            snap.tree.select(snap.pending_select);  // back to an explored branch: the worker resumed it
          } else if (snap.model) {
            snap.tree.fork(ev.record, fork_cost(snap.model->config, ev.record->seq_len, ev.cache_reused));
          }
        } catch (const std::exception& e) {
          ui.errors.push_back(std::string("branching: ") + e.what());
        }
        snap.pending_select = -1;
        snap.records = snap.tree.current_history().records();
        snap.tree_version++;
        snap.stop = snap.records.empty() ? StopReason::kNone : snap.records.back()->stop;
        ui.view_step = -1;
        ui.revealed_step = static_cast<int>(snap.records.size()) - 1;  // the user chose this token
        snap.last_record_time = now;
        break;
      }
      case WorkerEvent::Kind::kDone:
        // (not a generation that ended just as the UI restarted: it would stop the new one)
        if (ev.generation == snap.generation && snap.started) snap.stop = ev.reason;
        break;
      case WorkerEvent::Kind::kError:
        if (ev.failed == WorkerCommand::Kind::kLoadModel) {
          snap.loading_model = false;
          snap.model_error = ev.message;
          if (!snap.model) ui.errors.push_back("Could not load the model: " + ev.message);
        } else if (ev.failed == WorkerCommand::Kind::kFork) {
          snap.pending_forks = std::max(0, snap.pending_forks - 1);
          snap.pending_select = -1;
          ui.errors.push_back("Could not fork here: " + ev.message);
        } else if (ev.failed == WorkerCommand::Kind::kStart) {
          ui.errors.push_back("Could not start with this prompt: " + ev.message);
        } else {
          ui.errors.push_back(ev.message);
          ui.playing = false;
        }
        break;
    }
  }
  snap.step_in_flight = worker.pending() > 0;
  // A restored view's step, once generated.
  if (snap.pending_view_step >= 0 && static_cast<int>(snap.records.size()) > snap.pending_view_step) {
    ui.view_step = snap.pending_view_step;
    ui.playing = false;
    snap.pending_view_step = -1;
  }
}

SavedCamera to_saved(const Camera& c, const UiState& ui) {
  SavedCamera s;
  s.target[0] = c.target.x;
  s.target[1] = c.target.y;
  s.target[2] = c.target.z;
  s.distance = c.distance;
  s.yaw = c.yaw;
  s.pitch = c.pitch;
  s.fov_y = c.fov_y;
  s.preset = ui.auto_camera ? to_string(ui.camera) : "";
  return s;
}

void send_fork(EngineWorker& worker, Snapshot& snap, const History& h, const RecordPtr& at, int token) {
  WorkerCommand w;
  w.kind = WorkerCommand::Kind::kFork;
  w.tokens = h.tokens_before(static_cast<size_t>(at->index));
  w.record = at;
  w.token = token;
  worker.cancel_steps();
  worker.send(w);
  snap.pending_forks++;
}

std::string timestamped_png() {
  const std::time_t t = std::time(nullptr);
  char name[64];
  std::strftime(name, sizeof(name), "kvscope-%Y%m%d-%H%M%S.png", std::localtime(&t));
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* home = std::getenv("HOME"); home && fs::is_directory(fs::path(home) / "Pictures", ec))
    return (fs::path(home) / "Pictures" / name).string();
  return name;
}

// Reads the back buffer (what is about to be shown) into a PNG.
bool save_screenshot(const std::string& path, int w, int h, std::string& error) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 4);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h / 2; ++y)
    std::swap_ranges(px.begin() + static_cast<long>(y * row), px.begin() + static_cast<long>((y + 1) * row),
                     px.begin() + static_cast<long>((h - 1 - y) * row));
  for (size_t i = 3; i < px.size(); i += 4) px[i] = 255;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (!stbi_write_png(path.c_str(), w, h, 4, px.data(), static_cast<int>(row))) {
    error = "cannot write the screenshot " + path;
    return false;
  }
  return true;
}

void execute(const UiCommand& c, EngineWorker& worker, Snapshot& snap, UiState& ui, ViewState& view, Window& window) {
  using K = UiCommand::Kind;
  switch (c.kind) {
    case K::kStart:
      if (!snap.model) {
        ui.errors.push_back("No model is loaded yet.");
        break;
      }
      start_generation(worker, snap, ui, c.text);
      ui.playing = true;
      break;
    case K::kReset:
      if (snap.model)
        start_generation(worker, snap, ui, ui.active_prompt.empty() ? current_prompt(ui) : ui.active_prompt);
      break;
    case K::kPlayPause:
      ui.playing = !ui.playing;
      if (ui.playing && snap.stop != StopReason::kNone && snap.model)
        start_generation(worker, snap, ui, ui.active_prompt);  // play after the end = again
      break;
    case K::kStep:
      ui.playing = false;
      ui.view_step = -1;  // stepping shows the newest step
      if (snap.started && snap.stop == StopReason::kNone && worker.pending() == 0) {
        worker.send({WorkerCommand::Kind::kStep});
        view.last_step_request = glfwGetTime();
      }
      break;
    case K::kToggleCache: {
      snap.mode = snap.mode == CacheMode::kKV ? CacheMode::kNoCache : CacheMode::kKV;
      WorkerCommand w;
      w.kind = WorkerCommand::Kind::kSetMode;
      w.mode = snap.mode;
      worker.send(w);
      break;
    }
    case K::kSetSampler: {
      WorkerCommand w;
      w.kind = WorkerCommand::Kind::kSetSampler;
      w.sampler = ui.sampler;
      worker.send(w);
      break;
    }
    case K::kSetMaxNew: {
      WorkerCommand w;
      w.kind = WorkerCommand::Kind::kSetMaxNew;
      w.max_new = static_cast<int>(c.value);
      worker.send(w);
      break;
    }
    case K::kLoadModel: {
      WorkerCommand w;
      w.kind = WorkerCommand::Kind::kLoadModel;
      w.text = c.text;
      worker.cancel_steps();
      worker.send(w);
      snap.loading_model = true;
      snap.model_error.clear();
      break;
    }
    case K::kCamera:
      ui.camera = c.camera;
      ui.auto_camera = true;
      break;
    case K::kFit:
      ui.auto_camera = true;
      break;
    case K::kScreenshot:
      view.screenshot = true;
      view.screenshot_path = timestamped_png();
      break;
    case K::kFullscreen:
      window.toggle_fullscreen();
      ui.fullscreen = window.fullscreen();
      break;
    case K::kTextScale:
      view.rebuild_fonts = true;
      view.new_text_scale = std::clamp(c.value, 0.75f, 2.5f);
      break;
    case K::kDismissErrors:
      ui.errors.clear();
      break;
    case K::kTogglePanels:
      ui.show_panels = !ui.show_panels;
      break;
    case K::kCancelLoad:
      worker.cancel_load();
      break;
    case K::kScrub: {
      const int n = static_cast<int>(snap.records.size());
      if (n == 0) break;
      const int cur = shown_step(snap, ui);
      if (c.text != "abs" && c.value > 0 && cur == n - 1) {
        // At the newest step, forward = reveal (predict mode), else compute the next step.
        if (prediction_hidden(snap, ui)) {
          ui.revealed_step = n - 1;
        } else {
          execute({K::kStep}, worker, snap, ui, view, window);
          ui.view_step = -1;
        }
        break;
      }
      const int target =
          std::clamp(c.text == "abs" ? static_cast<int>(c.value) : cur + static_cast<int>(c.value), 0, n - 1);
      ui.view_step = target >= n - 1 ? -1 : target;
      if (ui.view_step >= 0) ui.playing = false;  // looking at the past: hold the present
      snap.last_record_time = -1e9;               // no drop animation while scrubbing
      break;
    }
    case K::kFork: {
      const int s = shown_step(snap, ui);
      if (s < 0 || snap.pending_forks > 0 || !snap.started) break;
      const int token = static_cast<int>(c.value);
      const RecordPtr at = snap.records[static_cast<size_t>(s)];
      if (token == at->token) break;
      const int existing = snap.tree.find_fork(snap.tree.current(), s, token);
      if (existing >= 0) {
        UiCommand sel{K::kSelectBranch};
        sel.value = static_cast<float>(existing);
        execute(sel, worker, snap, ui, view, window);
        break;
      }
      send_fork(worker, snap, snap.tree.current_history(), at, token);
      snap.pending_select = -1;
      break;
    }
    case K::kSelectBranch: {
      const int id = static_cast<int>(c.value);
      if (snap.pending_forks > 0 || id < 0 || id >= static_cast<int>(snap.tree.size()) || !snap.started) break;
      const Branch& b = snap.tree.branch(id);
      if (b.history.empty()) break;
      // The worker resumes the branch: its last record, forced to its own token.
      const RecordPtr last = b.history.back();
      send_fork(worker, snap, b.history, last, last->token);
      snap.pending_select = id;
      break;
    }
    case K::kPresentation:
      ui.presentation = !ui.presentation;
      ui.show_panels = !ui.presentation;
      break;
    case K::kPredict:
      ui.predict = !ui.predict;
      ui.revealed_step = static_cast<int>(snap.records.size()) - 1;  // what is on screen stays visible
      break;
    case K::kReveal:
      ui.revealed_step = static_cast<int>(snap.records.size()) - 1;
      break;
    case K::kSelectHead:
      ui.layer = static_cast<int>(c.value);
      ui.head = static_cast<int>(c.value2);
      ui.beams = true;
      break;
    case K::kPalette:
      ui.colour_blind = !ui.colour_blind;
      palette::set_palette(ui.colour_blind);
      break;
    case K::kSaveView: {
      SavedView v;
      v.camera = to_saved(view.camera, ui);
      v.step = std::max(0, shown_step(snap, ui));
      v.prompt = ui.active_prompt;
      v.model = snap.model ? snap.model->dir : "";
      v.max_new = effective_max_new(ui, snap);
      v.cache = snap.mode;
      v.sampler = ui.sampler;
      v.layer = ui.layer;
      v.head = ui.head;
      v.min_weight = ui.min_weight;
      v.text_scale = ui.text_scale;
      v.presentation = ui.presentation;
      v.predict = ui.predict;
      try {
        save_view(v, c.text);
        ui.status = "view saved to " + c.text;
      } catch (const std::exception& e) {
        ui.errors.push_back(e.what());
      }
      break;
    }
    case K::kLoadView: {
      SavedView v;
      try {
        v = load_view(c.text);
      } catch (const std::exception& e) {
        ui.errors.push_back(e.what());
        break;
      }
      ui.sampler = v.sampler;
      ui.layer = v.layer;
      ui.head = v.head;
      ui.min_weight = v.min_weight;
      ui.predict = v.predict;
      if (v.presentation != ui.presentation) execute({K::kPresentation}, worker, snap, ui, view, window);
      if (v.text_scale != ui.text_scale) {
        view.rebuild_fonts = true;
        view.new_text_scale = std::clamp(v.text_scale, 0.75f, 2.5f);
      }
      CameraPreset preset;
      if (!v.camera.preset.empty() && parse_camera(v.camera.preset, preset)) {
        ui.camera = preset;
        ui.auto_camera = true;
      } else {
        view.camera.target = {v.camera.target[0], v.camera.target[1], v.camera.target[2]};
        view.camera.distance = v.camera.distance;
        view.camera.yaw = v.camera.yaw;
        view.camera.pitch = v.camera.pitch;
        view.camera.fov_y = v.camera.fov_y;
        view.goal = view.camera;
        ui.auto_camera = false;
      }
      if (v.cache != snap.mode) execute({K::kToggleCache}, worker, snap, ui, view, window);
      execute({K::kSetSampler}, worker, snap, ui, view, window);
      // The step: this generation when it is the same prompt, else generate it again.
      if (v.prompt != ui.active_prompt || static_cast<int>(snap.records.size()) <= v.step) {
        if (v.prompt != ui.active_prompt && snap.model) {
          ui.preset = kNumPresets;
          ui.custom_prompt = v.prompt;
          ui.max_new = v.max_new;
          start_generation(worker, snap, ui, v.prompt);
        }
        snap.pending_view_step = v.step;
        ui.playing = true;
      } else {
        ui.view_step = v.step >= static_cast<int>(snap.records.size()) - 1 ? -1 : v.step;
        ui.playing = false;
      }
      ui.status = "view loaded from " + c.text;
      break;
    }
  }
}

// Keyboard shortcuts (when no text field has the keyboard).
Commands shortcuts() {
  Commands cmds;
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsKeyPressed(GLFW_KEY_F11, false)) cmds.push_back({UiCommand::Kind::kFullscreen});
  if (ImGui::IsKeyPressed(GLFW_KEY_F12, false)) cmds.push_back({UiCommand::Kind::kScreenshot});
  if (io.WantCaptureKeyboard) return cmds;
  if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) cmds.push_back({UiCommand::Kind::kPlayPause});
  // Timeline: arrows (Shift: 10 steps); a presenter clicker sends PageDown / PageUp.
  const float stride = io.KeyShift ? 10.0f : 1.0f;
  auto scrub = [&](float v) {
    UiCommand c{UiCommand::Kind::kScrub};
    c.value = v;
    cmds.push_back(c);
  };
  if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT, true) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN, true)) scrub(stride);
  if (ImGui::IsKeyPressed(GLFW_KEY_LEFT, true) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP, true)) scrub(-stride);
  if (ImGui::IsKeyPressed(GLFW_KEY_F5, false)) cmds.push_back({UiCommand::Kind::kPresentation});
  if (ImGui::IsKeyPressed(GLFW_KEY_P, false)) cmds.push_back({UiCommand::Kind::kPredict});
  if (ImGui::IsKeyPressed(GLFW_KEY_ENTER, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_ENTER, false))
    cmds.push_back({UiCommand::Kind::kReveal});
  if (ImGui::IsKeyPressed(GLFW_KEY_R, false)) cmds.push_back({UiCommand::Kind::kReset});
  if (ImGui::IsKeyPressed(GLFW_KEY_C, false)) cmds.push_back({UiCommand::Kind::kToggleCache});
  if (ImGui::IsKeyPressed(GLFW_KEY_TAB, false)) cmds.push_back({UiCommand::Kind::kTogglePanels});
  const CameraPreset presets[] = {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow};
  for (int i = 0; i < 4; ++i)
    if (ImGui::IsKeyPressed(GLFW_KEY_1 + i, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_1 + i, false)) {
      UiCommand c{UiCommand::Kind::kCamera};
      c.camera = presets[i];
      cmds.push_back(c);
    }
  return cmds;
}

// The scripted smoke run (--demo-frames N): generate as fast as possible,
// switch the cache off and on, walk through the cameras and attention views.
// With $KVSCOPE_DEMO_VIEW (timeline, sampling, phases, kv, heatmaps,
// presentation) the run instead sets up that feature for a screenshot.
Commands demo_script(int frame, int total, const Snapshot& snap, const std::string& demo_view) {
  Commands cmds;
  auto at = [&](double f) { return frame == static_cast<int>(f * total); };
  auto cmd = [&](UiCommand::Kind k, float value = 0, const std::string& text = {}) {
    UiCommand c{k, text};
    c.value = value;
    cmds.push_back(c);
  };
  // Fork at the shown step with its second-best candidate.
  auto fork_second = [&] {
    if (snap.seq.current && snap.seq.current->top.size() > 1)
      cmd(UiCommand::Kind::kFork, static_cast<float>(snap.seq.current->top[1].token));
  };
  if (!demo_view.empty()) {
    const int n = static_cast<int>(snap.records.size());
    if (demo_view == "timeline" || demo_view == "sampling") {
      if (at(0.45)) cmd(UiCommand::Kind::kScrub, static_cast<float>(std::max(1, n / 3)), "abs");
      if (at(0.5)) fork_second();
      if (at(0.75)) cmd(UiCommand::Kind::kScrub, static_cast<float>(std::max(1, n / 2)), "abs");
      if (at(0.8)) fork_second();
      if (demo_view == "timeline" && at(0.95)) cmd(UiCommand::Kind::kScrub, static_cast<float>(n * 2 / 3), "abs");
      if (demo_view == "sampling" && at(0.95)) {
        // The most uncertain step of this branch: the widest distribution to look at.
        int flattest = 0;
        for (int i = 1; i < n; ++i)
          if (snap.records[i]->top[0].prob < snap.records[flattest]->top[0].prob) flattest = i;
        cmd(UiCommand::Kind::kScrub, static_cast<float>(flattest), "abs");
      }
    }
    if (demo_view == "presentation" && at(0.5)) cmd(UiCommand::Kind::kPresentation);
    if (demo_view == "heatmaps" && at(0.9)) {
      UiCommand c{UiCommand::Kind::kSelectHead};
      c.value = 1;
      c.value2 = 2;
      cmds.push_back(c);
    }
    return cmds;
  }
  // The teaching features, late in the run: scrub back, fork, return, present, predict.
  if (at(0.86)) cmd(UiCommand::Kind::kScrub, -3);
  if (at(0.87)) fork_second();
  if (at(0.89)) cmd(UiCommand::Kind::kSelectBranch, 0);
  if (at(0.90)) cmd(UiCommand::Kind::kPresentation);
  if (at(0.91)) cmd(UiCommand::Kind::kPredict);
  if (at(0.92)) cmd(UiCommand::Kind::kScrub, 1);
  if (at(0.93)) cmd(UiCommand::Kind::kReveal);
  if (at(0.94)) cmd(UiCommand::Kind::kPredict);
  if (at(0.95)) cmd(UiCommand::Kind::kPresentation);
  if (at(0.96) || at(0.97)) {  // a saved view, written and read back
    const std::string path =
        (std::filesystem::temp_directory_path() / ("kvscope-demo-view-" + std::to_string(getpid()) + ".json")).string();
    cmd(at(0.96) ? UiCommand::Kind::kSaveView : UiCommand::Kind::kLoadView, 0, path);
  }
  if (at(0.98)) {
    std::error_code ec;
    std::filesystem::remove(
        std::filesystem::temp_directory_path() / ("kvscope-demo-view-" + std::to_string(getpid()) + ".json"), ec);
  }
  auto camera = [&](CameraPreset p) {
    UiCommand c{UiCommand::Kind::kCamera};
    c.camera = p;
    cmds.push_back(c);
  };
  if (at(0.25)) cmds.push_back({UiCommand::Kind::kToggleCache});  // NO CACHE
  if (at(0.35)) camera(CameraPreset::kTop);
  if (at(0.45)) cmds.push_back({UiCommand::Kind::kToggleCache});  // KV CACHE: refill
  if (at(0.55)) camera(CameraPreset::kSide);
  if (at(0.65)) cmds.push_back({UiCommand::Kind::kToggleCache});
  if (at(0.70)) camera(CameraPreset::kFollow);
  if (at(0.80)) cmds.push_back({UiCommand::Kind::kToggleCache});
  if (at(0.85)) camera(CameraPreset::kFront);
  return cmds;
}

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

}  // namespace

int run_gui(const GuiOptions& opt) {
  leave_a_core_for_rendering();
  const bool demo = opt.demo_frames > 0 || opt.soak_rounds > 0;  // scripted: a smoke demo or a soak
  UiState ui;
  WindowSettings win_settings;
  std::string settings_path, ini_path;
  if (!demo) {
    // Settings persist between runs; a demo run neither reads nor writes them.
    const std::string dir = config_dir();
    if (!dir.empty()) {
      settings_path = dir + "/settings.json";
      ini_path = dir + "/imgui.ini";
      std::string err;
      if (!load_settings(settings_path, ui, win_settings, err)) ui.errors.push_back(err);
      palette::set_palette(ui.colour_blind);
    }
  } else {
    win_settings.width = 1280;
    win_settings.height = 720;
    ui.fastest = true;
  }
  if (!opt.prompt.empty()) {
    ui.preset = kNumPresets;
    ui.custom_prompt = opt.prompt;
  }
  if (opt.max_new > 0) ui.max_new = opt.max_new;
  // Scripted screenshots of one teaching feature (docs/*.png): $KVSCOPE_DEMO_VIEW.
  std::string demo_view;
  if (const char* e = std::getenv("KVSCOPE_DEMO_VIEW"); e && opt.demo_frames > 0) demo_view = e;
  if (!demo_view.empty()) {
    const int tab = demo_view == "phases" ? 1 : demo_view == "kv" ? 2 : demo_view == "heatmaps" ? 3 : 0;
    ui.bottom_tab = tab;
    ui.select_tab = true;
    if (demo_view == "sampling" || demo_view == "timeline") {
      ui.sampler.greedy = false;
      ui.sampler.temperature = 0.9f;
      ui.sampler.top_k = 12;
      ui.sampler.top_p = 0.9f;
      ui.sampler.repetition_penalty = 1.3f;
      ui.sampler.seed = 7;
    }
    if (demo_view == "kv") {
      ui.kv_selected = 3;  // assets/kv_configs.json: the 32-layer 4096-wide MHA model
      ui.kv_context = 100000;
      ui.kv_dtype = 1;  // fp16
    }
  }
  if (opt.soak_rounds > 0) {  // every round runs into the context limit
    ui.max_new = 1 << 20;
    ui.ignore_eos = true;
  }
  Snapshot snap;
  snap.mode = opt.no_cache ? CacheMode::kNoCache : CacheMode::kKV;

  Window window(win_settings.width, win_settings.height, win_settings.maximized, demo);
  GLFWwindow* win = window.get();
  std::vector<std::string> gl_messages;
  gl::enable_debug_output(&gl_messages);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = ini_path.empty() ? nullptr : ini_path.c_str();
  io.ConfigWindowsMoveFromTitleBarOnly = true;
  OverlayFonts fonts = load_fonts(ui.text_scale);
  apply_style(ui.text_scale);
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int exit_code = 0;
  std::unique_ptr<SoakRun> soak;
  if (opt.soak_rounds > 0) soak = std::make_unique<SoakRun>(opt.soak_rounds);
  FrameStats frame_stats;  // scripted runs report frame times
  {
    Renderer renderer;
    // The engine thread wakes the (possibly sleeping) loop after each event.
    EngineWorker worker([] { glfwPostEmptyEvent(); });
    WorkerCommand load;
    load.kind = WorkerCommand::Kind::kLoadModel;
    load.text = opt.model_dir.empty() ? default_model_dir() : opt.model_dir;
    worker.send(load);
    snap.loading_model = true;
    ui.active_prompt = current_prompt(ui);

    ViewState view;
    view.new_text_scale = ui.text_scale;
    int frame = 0;
    int awake_frames = 0;  // frames to draw before sleeping again (ImGui settles hover state)
    double prev_time = glfwGetTime();

    while (!glfwWindowShouldClose(win)) {
      // 1. Poll, or sleep while nothing moves.
      const double now0 = glfwGetTime();
      const bool animating = view.anim < 1.0f || snap.step_in_flight ||
                             glm::distance(view.camera.eye(), view.goal.eye()) > 1e-3f * view.camera.distance ||
                             std::abs(view.camera.stretch_y - view.goal.stretch_y) > 1e-3f;
      double wait = -1;
      if (!demo && !animating && awake_frames <= 0 && ui.errors.empty()) {
        wait = 0.5;
        if (ui.playing && snap.started && snap.stop == StopReason::kNone)
          wait = std::max(0.0, view.last_step_request + (ui.fastest ? 0.0 : 1.0 / ui.speed) - now0);
      }
      if (wait > 0) {
        glfwWaitEventsTimeout(wait);
        awake_frames = 3;
      } else {
        glfwPollEvents();
        awake_frames--;
      }
      const double now = glfwGetTime();
      const float dt = static_cast<float>(std::min(0.1, now - prev_time));
      if (demo && frame > 0) frame_stats.add(now - prev_time, snap.loading_model);
      prev_time = now;

      // 2. Engine results in; playback asks for the next step.
      take_events(worker, snap, ui, now);
      sync_shown(snap, ui);
      snap.load_progress = worker.load_progress();
      view.anim = std::clamp(static_cast<float>((now - snap.last_record_time) / anim_duration(ui)), 0.0f, 1.0f);
      // (predict mode waits until the class has seen the newest token)
      const bool want_step = ui.playing && snap.started && snap.stop == StopReason::kNone && worker.pending() == 0 &&
                             snap.pending_forks == 0 && !prediction_hidden(snap, ui) &&
                             (ui.fastest || now - view.last_step_request >= 1.0 / ui.speed);
      if (want_step) {
        worker.send({WorkerCommand::Kind::kStep});
        view.last_step_request = now;
        snap.step_in_flight = true;
      }

      // 3. Fonts change size between frames only.
      if (view.rebuild_fonts) {
        ui.text_scale = view.new_text_scale;
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        fonts = load_fonts(ui.text_scale);
        ImGui_ImplOpenGL3_CreateFontsTexture();
        apply_style(ui.text_scale);
        view.rebuild_fonts = false;
      }

      // 4. UI: panels return commands.
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      ImGui::NewFrame();
      Commands cmds = shortcuts();
      auto take = [&cmds](Commands more) { cmds.insert(cmds.end(), more.begin(), more.end()); };
      if (soak) take(soak->frame(snap, worker.pending() == 0));
      if (opt.demo_frames > 0) {
        take(demo_script(frame, opt.demo_frames, snap, demo_view));
        // Keep generating for the whole run: start again when a generation ends.
        // (not in the last frames, so the final screenshot shows a full scene)
        if (demo_view.empty() && snap.stop != StopReason::kNone && worker.pending() == 0 &&
            frame < opt.demo_frames * 9 / 10)
          cmds.push_back({UiCommand::Kind::kReset});
      }
      int win_w = 0, win_h = 0, fb_w = 0, fb_h = 0;
      glfwGetWindowSize(win, &win_w, &win_h);
      glfwGetFramebufferSize(win, &fb_w, &fb_h);
      const float W = static_cast<float>(win_w), H = static_cast<float>(win_h);
      float left = 0, right = 0, bottom = 0;
      if (ui.show_panels && win_w > 0) {
        const ImGuiWindowFlags side = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                                      ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus;
        ImGui::SetNextWindowPos(ImVec2(0, 0), ImGuiCond_Always);
        ImGui::SetNextWindowSize(ImVec2(std::min(330 * ui.text_scale, W * 0.24f), H), ImGuiCond_FirstUseEver);
        ImGui::SetNextWindowSizeConstraints(ImVec2(240, H), ImVec2(std::max(260.0f, W * 0.4f), H));
        if (ImGui::Begin("Generation", nullptr, side)) {
          if (ImGui::CollapsingHeader("Prompt", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_prompt(snap, ui));
          if (ImGui::CollapsingHeader("Playback", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_playback(snap, ui));
          if (ImGui::CollapsingHeader("Cache & compute", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_cache(snap, ui));
        }
        left = ImGui::GetWindowWidth();
        ImGui::End();
        ImGui::SetNextWindowPos(ImVec2(W, 0), ImGuiCond_Always, ImVec2(1, 0));
        ImGui::SetNextWindowSize(ImVec2(std::min(330 * ui.text_scale, W * 0.24f), H), ImGuiCond_FirstUseEver);
        ImGui::SetNextWindowSizeConstraints(ImVec2(240, H), ImVec2(std::max(260.0f, W * 0.4f), H));
        if (ImGui::Begin("Inspect", nullptr, side)) {
          if (ImGui::CollapsingHeader("Attention", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_attention(snap, ui));
          if (ImGui::CollapsingHeader("Next token", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_next_token(snap, ui));
          if (ImGui::CollapsingHeader("View", ImGuiTreeNodeFlags_DefaultOpen)) take(panel_view(snap, ui));
          if (ImGui::CollapsingHeader("Model")) take(panel_model(snap, ui));
        }
        right = ImGui::GetWindowWidth();
        ImGui::End();
        // Between the sidebars, under the 3D view: the timeline and the teaching tabs.
        bottom = std::clamp(H * 0.4f, 200.0f, 480.0f);
        ImGui::SetNextWindowPos(ImVec2(left, H - bottom), ImGuiCond_Always);
        ImGui::SetNextWindowSize(ImVec2(std::max(100.0f, W - left - right), bottom), ImGuiCond_Always);
        if (ImGui::Begin("Teach", nullptr, side | ImGuiWindowFlags_NoResize)) {
          take(panel_timeline(snap, ui));
          if (ImGui::BeginTabBar("teach_tabs")) {
            const char* names[] = {"Branches", "Prefill vs decode", "KV memory", "Attention heads"};
            for (int i = 0; i < 4; ++i) {
              const ImGuiTabItemFlags f = ui.select_tab && ui.bottom_tab == i ? ImGuiTabItemFlags_SetSelected : 0;
              if (ImGui::BeginTabItem(names[i], nullptr, f)) {
                if (!ui.select_tab) ui.bottom_tab = i;
                if (i == 0) take(panel_branches(snap, ui));
                if (i == 1) take(panel_phases(snap, ui));
                if (i == 2) take(panel_kv_calculator(snap, ui));
                if (i == 3) take(panel_heatmaps(snap, ui));
                ImGui::EndTabItem();
              }
            }
            ui.select_tab = false;
            ImGui::EndTabBar();
          }
        }
        ImGui::End();
      }
      take(panel_errors(ui));

      // 5. Carry the commands out.
      for (const UiCommand& c : cmds) execute(c, worker, snap, ui, view, window);
      sync_shown(snap, ui);

      // 6. The scene for this frame, the camera, mouse input in the 3D view.
      const float vx = left, vw = std::max(1.0f, W - left - right);
      ViewOptions vopt;
      vopt.layer = ui.layer;
      vopt.head = ui.head;
      vopt.min_weight = ui.min_weight;
      vopt.beams = ui.beams;
      vopt.hide_newest = prediction_hidden(snap, ui);
      const Scene scene = build_scene(snap.seq, vopt, view.anim);
      OverlayOptions ov;
      ov.labels = ui.labels;
      ov.legend = ui.legend && !ui.presentation;
      ov.hud = ui.hud && !ui.presentation;
      // Under a short 3D view (a 1280x720 window with its panels) the legend
      // would cover the KV stacks: it gets a band of its own, its entries in
      // rows, unless that would leave the scene less than 60 % of the height.
      const float below = std::max(1.0f, H - bottom);
      if (ov.legend && below < 640.0f) {
        const float band = legend_band(scene, fonts, ov, vw);
        if (band <= 0.4f * below) ov.band = band;
      }
      const float vh = std::max(1.0f, below - ov.band);
      const float aspect = vw / vh;
      if (ui.auto_camera) view.goal = preset_camera(ui.camera, scene, aspect);
      if (!view.camera_init) {
        view.camera = view.goal;
        view.camera_init = true;
      }
      const ImVec2 mouse = io.MousePos;
      const bool in_view = mouse.x >= vx && mouse.x < vx + vw && mouse.y >= 0 && mouse.y < vh;
      view.hover_pos = -1;
      if (!io.WantCaptureMouse && in_view) {
        const ImVec2 d = io.MouseDelta;
        if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f) && !io.KeyShift) {
          view.camera.orbit(d.x, d.y);
          ui.auto_camera = false;
        } else if (ImGui::IsMouseDragging(ImGuiMouseButton_Right, 1.0f) ||
                   ImGui::IsMouseDragging(ImGuiMouseButton_Middle, 1.0f) ||
                   (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f) && io.KeyShift)) {
          view.camera.pan(d.x, d.y, vh);
          ui.auto_camera = false;
        }
        if (io.MouseWheel != 0.0f) {
          view.camera.zoom(io.MouseWheel);
          ui.auto_camera = false;
        }
        glm::vec3 origin, dir;
        screen_ray(view.camera, aspect, mouse.x - vx, mouse.y, vw, vh, origin, dir);
        const Pick p = pick(scene, origin, dir);
        if (p.kind != Pick::kNothing && !(vopt.hide_newest && p.pos == snap.seq.seq_len())) {
          hover_tooltip(snap, p, ui.layer, ui.head);
          view.hover_pos = p.pos;
        }
      }
      if (ui.auto_camera)
        view.camera = blend(view.camera, view.goal, 1.0f - std::exp(-dt * 8.0f));
      else
        view.goal = view.camera;

      // 7. Overlay text (behind the panels), then render everything.
      ov.hover_pos = view.hover_pos;
      ov.model_name = snap.model ? snap.model->name : "";
      ov.record = snap.seq.current.get();
      ImDrawList* bg = ImGui::GetBackgroundDrawList();
      draw_overlay(bg, scene, view.camera, ImVec2(vx, 0), ImVec2(vw, vh), fonts, ov);
      if (ui.presentation) {
        HudInfo hud;
        hud.model_name = snap.model ? snap.model->name : "";
        hud.step = shown_step(snap, ui);
        hud.n_steps = static_cast<int>(snap.records.size());
        hud.record = snap.seq.current.get();
        hud.hidden = prediction_hidden(snap, ui);
        hud.live = ui.view_step < 0;
        if (hud.record && snap.model)
          for (const Candidate& c : hud.record->top)
            hud.top_pieces.push_back(visible_piece(snap.model->tokenizer.display_piece(c.token)));
        draw_presentation_hud(bg, ImVec2(vx, 0), ImVec2(vw, vh), fonts, hud);
      }
      if (!snap.seq.current) {
        const char* msg = snap.loading_model ? "loading the model\xE2\x80\xA6"
                          : !snap.model      ? "no model: load a GPT-2 folder in the Model panel"
                                             : "waiting for the first step\xE2\x80\xA6";
        const ImVec2 ts = fonts.banner->CalcTextSizeA(fonts.banner->FontSize, 1e9f, 0, msg);
        bg->AddText(fonts.banner, fonts.banner->FontSize, ImVec2(vx + (vw - ts.x) * 0.5f, vh * 0.45f),
                    IM_COL32(200, 210, 230, 255), msg);
      }
      ImGui::Render();

      const float sx = win_w > 0 ? static_cast<float>(fb_w) / W : 1.0f;
      const float sy = win_h > 0 ? static_cast<float>(fb_h) / H : 1.0f;
      glBindFramebuffer(GL_FRAMEBUFFER, 0);
      glViewport(0, 0, fb_w, fb_h);
      const glm::vec3 bgc = palette::kBackground;
      glClearColor(bgc.r, bgc.g, bgc.b, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
      RenderStyle style;
      style.grid = ui.grid;
      style.dpi_scale = sx;
      if (fb_w > 0 && fb_h > 0)
        renderer.draw(scene, view.camera, static_cast<int>(vx * sx), static_cast<int>((bottom + ov.band) * sy),
                      static_cast<int>(vw * sx), static_cast<int>(vh * sy), style);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

      // 8. Screenshot of exactly what is shown, then swap.
      const bool last_demo_frame = (opt.demo_frames > 0 && frame + 1 >= opt.demo_frames) || (soak && soak->finished());
      if (view.screenshot || (last_demo_frame && !opt.screenshot.empty())) {
        const std::string path = last_demo_frame && !opt.screenshot.empty() ? opt.screenshot : view.screenshot_path;
        std::string err;
        if (save_screenshot(path, fb_w, fb_h, err))
          ui.status = "saved " + path;
        else
          ui.errors.push_back(err);
        view.screenshot = false;
      }
      if (demo) {
        const GLenum e = glGetError();
        if (e != GL_NO_ERROR) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "glGetError 0x%04x at frame %d", e, frame);
          gl_messages.push_back(buf);
        }
      }
      glfwSwapBuffers(win);
      ++frame;
      if (last_demo_frame) break;
    }

    if (demo) {
      for (const std::string& m : gl_messages) std::fprintf(stderr, "kvscope: GL: %s\n", m.c_str());
      for (const std::string& e : ui.errors) std::fprintf(stderr, "kvscope: error: %s\n", e.c_str());
      std::fprintf(stderr, "kvscope: demo: %d frames, %d steps (%d positions now), final mode %s\n", frame,
                   snap.total_records, snap.seq.seq_len(), to_string(snap.mode));
      std::fprintf(stderr, "kvscope: %s\n", frame_stats.summary().c_str());
      if (!gl_messages.empty() || !ui.errors.empty() || snap.total_records == 0) exit_code = 1;
    } else if (!settings_path.empty()) {
      if (!window.fullscreen()) {
        win_settings.maximized = glfwGetWindowAttrib(win, GLFW_MAXIMIZED) == GLFW_TRUE;
        if (!win_settings.maximized) glfwGetWindowSize(win, &win_settings.width, &win_settings.height);
      }
      std::string err;
      if (!save_settings(settings_path, ui, win_settings, err)) std::fprintf(stderr, "kvscope: %s\n", err.c_str());
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
