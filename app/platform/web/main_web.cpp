// The page's entry point: the window's run (app/gui/gui.h) driven one frame
// per requestAnimationFrame instead of the desktop's blocking loop. main()
// returns to the browser at once (emscripten_set_main_loop unwinds it), so the
// run lives on the heap.
#include <emscripten/emscripten.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "app/gui/gui.h"
#include "app/platform/web/web_api.h"
#include "app/session/session.h"
#include "model/core/error.h"
#include "model/core/thread_pool.h"

namespace kvscope {
namespace {

// Never closed: the page ends with the tab.
GuiRun* g_run = nullptr;

void frame() {
  if (!g_run) return;
  try {
    if (!gui_frame(*g_run)) emscripten_cancel_main_loop();
  } catch (const std::exception& e) {
    web_report_fatal(e.what());
    emscripten_cancel_main_loop();
  }
  web_frame_done(g_run && gui_session(*g_run).ui.presentation);
}

// Engine threads: the pool of Web Workers is started before main
// (-sPTHREAD_POOL_SIZE in cmake/web.cmake): the engine's threads, the
// worker and the layout scorer must all fit in it, since a thread cannot get a
// new Web Worker while the main thread waits for it.
void choose_threads() {
  if (ThreadPool::default_threads_chosen()) return;  // ($KVSCOPE_THREADS from node_env.js)
  const unsigned hc = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = std::clamp(hc > 1 ? hc - 1 : 1u, 1u, 6u);
  ThreadPool::set_default_threads(static_cast<int>(n));
}

}  // namespace

GuiRun* web_run() {
  return g_run;
}

}  // namespace kvscope

int main() {
  using namespace kvscope;
  // The site's files are preloaded at fixed paths (cmake/web.cmake).
  setenv("KVSCOPE_ASSETS", "/assets", 1);
  choose_threads();
  GuiOptions opt;
  try {
    g_run = open_gui(opt).release();
  } catch (const std::exception& e) {
    web_report_fatal(e.what());
    return 1;
  }
  web_ready();
  emscripten_set_main_loop(frame, 0, 1);
  return 0;
}
