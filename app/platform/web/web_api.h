// The page's JavaScript side (app/platform/web/kvscope-page.js) and the
// functions it calls: window.kvscope.state() / command(obj), folder loading.
#pragma once

#include <string>

namespace kvscope {

struct GuiRun;
GuiRun* web_run();  // null before the window opens (main_web.cpp)

void web_report_fatal(const char* message);  // nothing can run: the page shows it
void web_ready();                            // the window is open
// Once per frame: frame-time statistics, and the browser's fullscreen
// following presentation mode (F5).
void web_frame_done(bool presentation);

}  // namespace kvscope

// Called from JavaScript (exported in cmake/web.cmake). Strings returned are
// valid until the next call.
extern "C" {
const char* kvscope_state_json();
// {"cmd": "prompt", "text": ...} etc. (docs/web.md); "" when accepted, else the error.
const char* kvscope_command_json(const char* json);
// The settings file into the browser's storage (IndexedDB, mounted by the page).
void kvscope_save_settings();
// `kvscope ARGS...` (a JSON array of strings) in the page: the CLI's exit code.
int kvscope_cli(const char* args);
// A tap on the canvas (kvscope-page.js): steps unless a panel was under it; 1 when it stepped.
int kvscope_tap();
// A model folder the page wrote into the in-memory file system.
void kvscope_load_folder(const char* dir);
// An error found by the page's JavaScript (fetching a model by id): shown in the error panel.
void kvscope_report_error(const char* message);
// The training checkpoints the page fetches after the first token (kvscope-page.js):
// the Training tab's progress line, then "all written: read the record again".
void kvscope_training_progress(const char* progress);
void kvscope_training_fetched();
}
