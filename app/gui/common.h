// Settings shared by the window and the headless renderer, so both draw the
// same picture.
#pragma once

#include <cstdlib>
#include <string>
#include <thread>

#include "model/core/thread_pool.h"

namespace kvscope {

// True on a software rasteriser (gl::is_software_rasterizer of the current
// context's GL_RENDERER), where multisampling roughly doubles the frame time.
bool is_software_renderer();

// While the window draws, the engine's thread pools leave one core to the
// renderer (Mesa's software rasteriser needs it to hold the frame rate
// during a forward), unless the user ($KVSCOPE_THREADS) or the platform
// (the page's pool of Web Workers) chose a number. Call before any engine is built.
inline void leave_a_core_for_rendering() {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 1 && !ThreadPool::default_threads_chosen()) ThreadPool::set_default_threads(static_cast<int>(cores) - 1);
}

inline constexpr int kRenderSamples = 4;  // MSAA of offscreen renders

}  // namespace kvscope
