// The browser's window (app/platform/window.h): Emscripten's GLFW 3.2 on the
// page's <canvas id="canvas">, a WebGL2 context. The canvas' CSS size comes
// from the page's stylesheet; its backbuffer follows that size times
// devicePixelRatio, so the picture is sharp on a phone and a 4K projector.
// ImGui and the layout work in CSS pixels, as they work in screen
// coordinates on a high-DPI desktop.
#include <GLFW/glfw3.h>
#include <emscripten/emscripten.h>
#include <emscripten/html5.h>
#include <glad/gl.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "app/platform/png_file.h"
#include "app/platform/window.h"
#include "model/core/error.h"
#include "render/gl/gl_objects.h"

namespace kvscope {

namespace {

struct CssSize {
  double w = 0, h = 0, dpr = 1;
};

CssSize page_size() {
  CssSize c;
  emscripten_get_element_css_size("#canvas", &c.w, &c.h);
  c.dpr = std::clamp(emscripten_get_device_pixel_ratio(), 0.5, 4.0);
  if (c.w < 1 || c.h < 1) c.w = 1280, c.h = 720;
  return c;
}

// WebGL's GL_RENDERER is masked ("WebKit WebGL"): the unmasked name, from a
// throwaway context on a canvas of its own (a canvas keeps the attributes of
// its first context, so the page's must be asked for with the right ones).
std::string webgl_renderer() {
  const uintptr_t at = static_cast<uintptr_t>(EM_ASM_INT({
    var r = "";
    try {
      var gl = document.createElement("canvas").getContext("webgl2");
      if (gl) {
        var ext = gl.getExtension("WEBGL_debug_renderer_info");
        r = String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
        var lose = gl.getExtension("WEBGL_lose_context");
        if (lose) lose.loseContext();
      }
    } catch (e) {
    }
    var n = lengthBytesUTF8(r) + 1;
    var p = _malloc(n);
    if (p) stringToUTF8(r, p, n);
    return p;
  }));
  char* name = reinterpret_cast<char*>(at);
  std::string r = name ? name : "";
  free(name);
  return r;
}

}  // namespace

Window::Window(const WindowSettings&, bool) {
  if (!glfwInit()) throw Error("cannot start GLFW in this page");
  const CssSize c = page_size();
  glfwWindowHint(GLFW_CLIENT_API, GLFW_OPENGL_ES_API);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  // 4x multisampling, except on a software rasteriser, as on the desktop: in
  // headless Chromium (SwiftShader) it made each frame, and so the proxied
  // file reads of a model loading meanwhile, about twice as slow.
  glfwWindowHint(GLFW_SAMPLES, gl::is_software_rasterizer(webgl_renderer()) ? 0 : 4);
  win_ = glfwCreateWindow(static_cast<int>(std::lround(c.w * c.dpr)), static_cast<int>(std::lround(c.h * c.dpr)),
                          "kvscope", nullptr, nullptr);
  if (!win_) {
    glfwTerminate();
    throw Error(
        "this browser gives no WebGL2 context (kvscope needs WebGL2: a current Chrome, Edge, Firefox or Safari)");
  }
  glfwMakeContextCurrent(win_);
}

Window::~Window() {
  glfwDestroyWindow(win_);
  glfwTerminate();
}

WindowSize Window::size() const {
  const CssSize c = page_size();
  WindowSize ws;
  glfwGetFramebufferSize(win_, &ws.fb_w, &ws.fb_h);
  ws.w = static_cast<float>(c.w);
  ws.h = static_cast<float>(c.h);
  return ws;
}

void Window::new_frame() {
  const CssSize c = page_size();
  const int want_w = std::max(1, static_cast<int>(std::lround(c.w * c.dpr)));
  const int want_h = std::max(1, static_cast<int>(std::lround(c.h * c.dpr)));
  int fb_w = 0, fb_h = 0;
  glfwGetFramebufferSize(win_, &fb_w, &fb_h);
  if (fb_w != want_w || fb_h != want_h) glfwSetWindowSize(win_, want_w, want_h);
  // GLFW reported backbuffer pixels (sizes and the mouse): ImGui gets CSS pixels.
  ImGuiIO& io = ImGui::GetIO();
  const float sx = static_cast<float>(want_w / c.w), sy = static_cast<float>(want_h / c.h);
  io.DisplaySize = ImVec2(static_cast<float>(c.w), static_cast<float>(c.h));
  io.DisplayFramebufferScale = ImVec2(sx, sy);
  if (io.MousePos.x != -FLT_MAX && io.MousePos.y != -FLT_MAX)
    io.MousePos = ImVec2(io.MousePos.x * static_cast<float>(c.w) / static_cast<float>(std::max(fb_w, 1)),
                         io.MousePos.y * static_cast<float>(c.h) / static_cast<float>(std::max(fb_h, 1)));
}

// F11 / the button: the browser's fullscreen (it may refuse outside a key or click).
void Window::toggle_fullscreen() {
  EM_ASM({
    if (document.fullscreenElement)
      document.exitFullscreen();
    else if (document.documentElement.requestFullscreen)
      document.documentElement.requestFullscreen().catch(function(){});
  });
}

bool Window::fullscreen() const {
  return EM_ASM_INT({ return document.fullscreenElement ? 1 : 0; }) != 0;
}

// The page has no placement to keep.
void Window::store_placement(WindowSettings&) const {}

// index.html sizes its overlays in calc(N px * var(--text-scale)).
void Window::set_text_scale(float scale) {
  EM_ASM({ document.documentElement.style.setProperty('--text-scale', String($0)); }, scale);
}

std::string timestamped_png() {
  const std::time_t t = std::time(nullptr);
  char name[64];
  std::strftime(name, sizeof(name), "/tmp/kvscope-%Y%m%d-%H%M%S.png", std::gmtime(&t));
  return name;
}

// The PNG goes to the in-memory file system, then to the user as a download.
bool save_screenshot(const std::string& path, int w, int h, std::string& error) {
  const std::vector<uint8_t> px = gl::read_back_buffer(w, h);
  if (!write_screenshot_png(path, w, h, px.data(), error)) return false;
  EM_ASM(
      {
        if (globalThis.kvscopePage) globalThis.kvscopePage.download(UTF8ToString($0), 'image/png');
      },
      path.c_str());
  return true;
}

}  // namespace kvscope
