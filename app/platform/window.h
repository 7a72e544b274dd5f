// The desktop window (GLFW + an OpenGL 3.3 core context): opened inside the
// monitor's work area, fullscreen toggle, its placement for the settings,
// and screenshots of the back buffer.
#pragma once

#include <string>

#include "app/session/settings.h"

struct GLFWwindow;

namespace kvscope {

// Owns GLFW and the window; terminates GLFW last.
class Window {
 public:
  // Throws kvscope::Error when there is no display or no GL 3.3.
  Window(const WindowSettings& want, bool debug);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  GLFWwindow* get() const { return win_; }

  void toggle_fullscreen();
  bool fullscreen() const;
  // Size, position and maximized state to save (unchanged while fullscreen).
  void store_placement(WindowSettings& s) const;

 private:
  GLFWwindow* win_ = nullptr;
  int saved_x_ = 100, saved_y_ = 100, saved_w_ = 1280, saved_h_ = 720;
};

// ~/Pictures/kvscope-YYYYmmdd-HHMMSS.png (or the working folder).
std::string timestamped_png();
// Reads the back buffer (what is about to be shown) into a PNG.
bool save_screenshot(const std::string& path, int w, int h, std::string& error);

}  // namespace kvscope
