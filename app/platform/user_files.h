// Files the user saves and opens from the window (saved views, model
// folders): on the desktop, paths typed into the panels; in the page, the
// browser's own ways — a download, and its file pickers
// (app/platform/web/kvscope-page.js).
// Header-only so the headless session library needs no platform library.
#pragma once

#include <cctype>
#include <string>

#ifdef __EMSCRIPTEN__
#include <emscripten/emscripten.h>
#endif

namespace kvscope {

#ifdef __EMSCRIPTEN__
inline constexpr bool kFilesThroughBrowser = true;
#else
inline constexpr bool kFilesThroughBrowser = false;
#endif

// The page writes a saved view here (its in-memory file system), then hands it
// over as a download named kvscope-view.json.
inline constexpr const char* kBrowserViewFile = "/tmp/kvscope-view.json";

// A file just written at `path`: in the page, downloaded (and removed from the
// in-memory file system); on the desktop it stays where it is.
inline void hand_file_to_user(const std::string& path, const char* mime) {
#ifdef __EMSCRIPTEN__
  EM_ASM(
      {
        if (globalThis.kvscopePage) globalThis.kvscopePage.download(UTF8ToString($0), UTF8ToString($1));
      },
      path.c_str(), mime);
#else
  (void)path;
  (void)mime;
#endif
}

// The page's file picker for a saved view; the chosen file comes back as the
// command {"cmd": "load_view", "path": ...}. Nothing on the desktop.
inline void ask_user_for_view_file() {
#ifdef __EMSCRIPTEN__
  EM_ASM({
    if (globalThis.kvscopePage) globalThis.kvscopePage.openView();
  });
#endif
}

// The page's folder picker for a model (the same as its "Open model..."
// button); the folder is copied into the page's memory and loaded. Nothing on
// the desktop (its View panel takes a path).
inline void ask_user_for_model_folder() {
#ifdef __EMSCRIPTEN__
  EM_ASM({
    if (globalThis.kvscopePage) globalThis.kvscopePage.openModel();
  });
#endif
}

// The page's field for a model by its Hugging Face id (kvscope-hub.js), shown
// over the view; the files it fetches load as a picked folder. Nothing on the
// desktop (--model ORG/NAME finds a model in the local Hugging Face cache).
inline void ask_user_for_hub_model() {
#ifdef __EMSCRIPTEN__
  EM_ASM({
    if (globalThis.kvscopePage && globalThis.kvscopePage.showHub) globalThis.kvscopePage.showHub();
  });
#endif
}

// A message about a model folder the user picked or dropped in the page names
// the folder as the user knows it ("gpt2-small/config.json"), not the copy
// the page made of it in its memory ("/models/3/gpt2-small/config.json", see
// kvscope-page.js); loose files picked without a folder lie in "/models/3"
// itself, named "the picked files". Only paths that start there (at the
// start of the message or after a space, quote or bracket) are the page's.
// On the desktop, messages keep the path the user gave.
inline std::string as_user_named(std::string message) {
#ifdef __EMSCRIPTEN__
  const std::string root = "/models/";
  for (size_t at = message.find(root); at != std::string::npos; at = message.find(root, at + 1)) {
    if (at > 0 && std::string(" '\"(").find(message[at - 1]) == std::string::npos) continue;
    size_t end = at + root.size();
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end == at + root.size()) continue;  // not the page's copy
    if (end < message.size() && message[end] == '/')
      message.erase(at, end + 1 - at);
    else
      message.replace(at, end - at, "the picked files");
  }
#endif
  return message;
}

}  // namespace kvscope
