// Settings shared by the window and the headless renderer, so both draw the
// same picture.
#pragma once

#include <cstdlib>
#include <string>
#include <thread>

namespace kvscope {

// The engine's thread pool sizes itself from $KVSCOPE_THREADS (else every
// core). While the window draws, leave one core to the renderer (Mesa's
// software rasteriser needs it to hold the frame rate during a forward),
// unless the user chose a number. Call before any thread starts.
// True on Mesa's llvmpipe/softpipe (the current context's GL_RENDERER), where
// multisampling roughly doubles the frame time.
bool is_software_renderer();

inline void leave_a_core_for_rendering() {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 1) setenv("KVSCOPE_THREADS", std::to_string(cores - 1).c_str(), /*overwrite=*/0);
}

inline constexpr int kRenderSamples = 4;            // MSAA of offscreen renders
inline constexpr float kDefaultMinWeight = 0.005f;  // beams below this weight are hidden

}  // namespace kvscope
