// The desktop window (GLFW + an OpenGL 3.3 core context): opened inside the
// monitor's work area, fullscreen toggle, its placement for the settings,
// and screenshots of the back buffer.
#pragma once

#include <string>

#include "app/session/settings.h"

struct GLFWwindow;

namespace kvscope {

// The window's size and its framebuffer's (they differ on high-DPI screens
// and in the browser, where w, h are CSS pixels and fb_w, fb_h device pixels).
struct WindowSize {
  float w = 0, h = 0;  // screen coordinates: ImGui's and the layout's
  int fb_w = 0, fb_h = 0;
  float sx() const { return w > 0 ? static_cast<float>(fb_w) / w : 1.0f; }
  float sy() const { return h > 0 ? static_cast<float>(fb_h) / h : 1.0f; }
};

// Owns GLFW and the window; terminates GLFW last. The desktop's is in
// window.cpp, the browser's (a canvas that follows the page) in web/window_web.cpp.
class Window {
 public:
  // Throws kvscope::Error when there is no display or no GL 3.3.
  Window(const WindowSettings& want, bool debug);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  GLFWwindow* get() const { return win_; }

  WindowSize size() const;
  // Between ImGui's platform new-frame and ImGui::NewFrame: the browser's
  // canvas follows the page's size and pixel ratio and ImGui gets CSS pixels
  // (GLFW there knows only backbuffer pixels); nothing on the desktop.
  void new_frame();

  void toggle_fullscreen();
  bool fullscreen() const;
  // Size, position and maximized state to save (unchanged while fullscreen).
  void store_placement(WindowSettings& s) const;
  // The text scale the panels use: the page sizes its own overlays (model
  // copy progress, the hub's field, messages) by it; nothing on the desktop.
  void set_text_scale(float scale);

 private:
  GLFWwindow* win_ = nullptr;
  int saved_x_ = 100, saved_y_ = 100, saved_w_ = 1280, saved_h_ = 720;
};

// ~/Pictures/kvscope-YYYYmmdd-HHMMSS.png (or the working folder).
std::string timestamped_png();
// Reads the back buffer (what is about to be shown) into a PNG.
bool save_screenshot(const std::string& path, int w, int h, std::string& error);

}  // namespace kvscope
