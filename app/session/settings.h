// Settings kept between runs: window size, the user's last choices (camera,
// speed, attention view, sampling, text scale...). A small JSON file next to
// ImGui's imgui.ini (panel layout) in $XDG_CONFIG_HOME/kvscope or
// ~/.config/kvscope.
#pragma once

#include <string>

#include "app/session/state.h"

namespace kvscope {

struct WindowSettings {
  int width = 1600, height = 900;
  int x = -1, y = -1;  // top-left on the desktop; -1 = centred in the work area
  bool maximized = false;
};

// A rectangle on the desktop (screen coordinates).
struct ScreenRect {
  int x = 0, y = 0, w = 0, h = 0;
};
// Where the window opens: the saved (or default) size shrunk to the
// monitor's work area (the desktop without task bars), the saved position
// moved so the whole window lies inside it; no saved position = centred.
ScreenRect fit_window(const WindowSettings& s, const ScreenRect& work_area);

// The settings folder (created if missing); empty when there is no home.
std::string config_dir();

// Missing file: defaults, returns true. Unreadable or malformed: defaults
// kept for what cannot be read, `error` says why, returns false. Values out
// of their ranges are fitted (fit_choices) and named in `error` (one line
// each), returning false; the model's limits are checked once one loads.
bool load_settings(const std::string& path, UiState& ui, WindowSettings& win, std::string& error);
// The same from the file's text (`path` names it in errors; fuzzed).
bool settings_from_json(const std::string& text, const std::string& path, UiState& ui, WindowSettings& win,
                        std::string& error);
// Returns false (and `error`) when the file cannot be written; the previous
// file is then left as it was (write_file_atomic).
bool save_settings(const std::string& path, const UiState& ui, const WindowSettings& win, std::string& error);

}  // namespace kvscope
