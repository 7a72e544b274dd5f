// Entry points of the desktop app, called by the CLI (app/cli/cli.h hooks).
#pragma once

#include <memory>

#include "app/cli/cli.h"

namespace kvscope {

// The interactive window (GLFW + OpenGL 3.3 + ImGui). Returns the exit code.
int run_gui(const GuiOptions& opt);

// The same run one frame at a time, for a host that owns the loop (the
// browser's requestAnimationFrame, app/platform/web/main_web.cpp).
struct GuiRun;
struct GuiRunDelete {  // defined where GuiRun is complete (gui.cpp)
  void operator()(GuiRun* run) const;
};
using GuiRunPtr = std::unique_ptr<GuiRun, GuiRunDelete>;
GuiRunPtr open_gui(const GuiOptions& opt);  // throws kvscope::Error without a window
bool gui_frame(GuiRun& run);                // false once the run is over
int close_gui(GuiRunPtr run);               // the exit code
void gui_save_settings(const GuiRun& run);  // the settings file now (the page saves on leaving)
class Session;
Session& gui_session(GuiRun& run);  // the controller: state and commands (window.kvscope in the page)

// `kvscope render`: the same scene and overlay drawn offscreen (EGL
// surfaceless, no display needed) to PNG files; with `bench`, frame times.
int run_render(const RenderOptions& opt);

}  // namespace kvscope
