#include "app/platform/window.h"

#include <glad/gl.h>
// GLFW after glad: glad provides the GL declarations.
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <vector>

#include "app/gui/common.h"
#include "app/platform/png_file.h"
#include "model/core/error.h"
#include "render/gl/gl_objects.h"

namespace kvscope {

namespace {

void glfw_error(int code, const char* text) {
  std::fprintf(stderr, "kvscope: GLFW error %d: %s\n", code, text);
}

// The primary monitor's work area; a 1280x720 desk when GLFW cannot tell.
ScreenRect work_area() {
  ScreenRect r{0, 0, 1280, 720};
  if (GLFWmonitor* mon = glfwGetPrimaryMonitor()) {
    int x = 0, y = 0, w = 0, h = 0;
    glfwGetMonitorWorkarea(mon, &x, &y, &w, &h);
    if (w > 0 && h > 0) r = {x, y, w, h};
  }
  return r;
}

}  // namespace

Window::Window(const WindowSettings& want, bool debug) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit())
    throw Error(
        "cannot open a window: no display (DISPLAY/WAYLAND_DISPLAY unset or unreachable). "
        "Use `kvscope render` for images without a display, or run `xvfb-run -a kvscope`");
  const ScreenRect place = fit_window(want, work_area());
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_OPENGL_DEBUG_CONTEXT, debug ? GLFW_TRUE : GLFW_FALSE);
  glfwWindowHint(GLFW_MAXIMIZED, want.maximized ? GLFW_TRUE : GLFW_FALSE);
  glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);  // shown once placed
  // 4x multisampling, except on a software rasteriser (llvmpipe), where it
  // roughly doubles the frame time: there the window is made again without.
  for (int samples : {4, 0}) {
    glfwWindowHint(GLFW_SAMPLES, samples);
    win_ = glfwCreateWindow(place.w, place.h, "kvscope \xE2\x80\x94 watch a GPT-2 and its KV cache", nullptr, nullptr);
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
  glfwSetWindowPos(win_, place.x, place.y);
  glfwShowWindow(win_);
  glfwSwapInterval(1);
}

Window::~Window() {
  glfwDestroyWindow(win_);
  glfwTerminate();
}

WindowSize Window::size() const {
  int w = 0, h = 0;
  WindowSize ws;
  glfwGetWindowSize(win_, &w, &h);
  glfwGetFramebufferSize(win_, &ws.fb_w, &ws.fb_h);
  ws.w = static_cast<float>(w);
  ws.h = static_cast<float>(h);
  return ws;
}

void Window::new_frame() {}

void Window::toggle_fullscreen() {
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

bool Window::fullscreen() const {
  return glfwGetWindowMonitor(win_) != nullptr;
}

void Window::set_text_scale(float) {}

void Window::store_placement(WindowSettings& s) const {
  if (fullscreen()) return;
  s.maximized = glfwGetWindowAttrib(win_, GLFW_MAXIMIZED) == GLFW_TRUE;
  if (s.maximized) return;
  glfwGetWindowSize(win_, &s.width, &s.height);
  glfwGetWindowPos(win_, &s.x, &s.y);
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

bool save_screenshot(const std::string& path, int w, int h, std::string& error) {
  const std::vector<uint8_t> px = gl::read_back_buffer(w, h);
  return write_screenshot_png(path, w, h, px.data(), error);
}

}  // namespace kvscope
