// Settings kept between runs: window size, the user's last choices (camera,
// speed, attention view, sampling, text scale...). A small JSON file next to
// ImGui's imgui.ini (panel layout) in $XDG_CONFIG_HOME/kvscope or
// ~/.config/kvscope.
#pragma once

#include <string>

#include "gui_state.h"

namespace kvscope {

struct WindowSettings {
  int width = 1600, height = 900;
  bool maximized = false;
};

// The settings folder (created if missing); empty when there is no home.
std::string config_dir();

// Missing file: defaults, returns true. Unreadable or malformed: defaults
// kept for what cannot be read, `error` says why, returns false.
bool load_settings(const std::string& path, UiState& ui, WindowSettings& win, std::string& error);
// Returns false (and `error`) when the file cannot be written.
bool save_settings(const std::string& path, const UiState& ui, const WindowSettings& win, std::string& error);

}  // namespace kvscope
