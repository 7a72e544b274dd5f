// Entry points of the desktop app, called by the CLI (app/cli/cli.h hooks).
#pragma once

#include "app/cli/cli.h"

namespace kvscope {

// The interactive window (GLFW + OpenGL 3.3 + ImGui). Returns the exit code.
int run_gui(const GuiOptions& opt);

// `kvscope render`: the same scene and overlay drawn offscreen (EGL
// surfaceless, no display needed) to PNG files; with `bench`, frame times.
int run_render(const RenderOptions& opt);

}  // namespace kvscope
