#include "render/gl/gl_context.h"

#include <dlfcn.h>
#include <glad/egl.h>
#include <glad/gl.h>

#include "render/gl/gl_objects.h"

namespace kvscope::gl {

namespace {

// libEGL opened once; its eglGetProcAddress is the bootstrap loader for
// glad (which #defines the eglGetProcAddress name to its own pointer).
void* egl_library() {
  static void* lib = [] {
    void* h = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libEGL.so", RTLD_NOW | RTLD_LOCAL);
    return h;
  }();
  return lib;
}

using GetProcFn = void* (*)(const char*);

GetProcFn egl_get_proc() {
  static GetProcFn fn =
      egl_library() ? reinterpret_cast<GetProcFn>(dlsym(egl_library(), "eglGetProcAddress")) : nullptr;
  return fn;
}

GLADapiproc load_egl(const char* name) {
  void* p = dlsym(egl_library(), name);
  if (!p && egl_get_proc()) p = egl_get_proc()(name);
  return reinterpret_cast<GLADapiproc>(p);
}

GLADapiproc load_gl(const char* name) {
  return reinterpret_cast<GLADapiproc>(egl_get_proc()(name));
}

std::string egl_error_name(EGLint e) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%04x", static_cast<unsigned>(e));
  return buf;
}

}  // namespace

struct HeadlessContext::Impl {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
  std::string platform;
};

HeadlessContext::HeadlessContext() : impl_(std::make_unique<Impl>()) {
  if (!egl_library() || !egl_get_proc())
    throw GlError("headless rendering needs libEGL.so.1 (Debian: libegl1, libegl-mesa0)");
  // Bootstrap by hand: glad's loader needs an initialised display to see
  // EGL 1.5 and the client extensions.
  auto query_string = reinterpret_cast<PFNEGLQUERYSTRINGPROC>(load_egl("eglQueryString"));
  auto get_platform_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYPROC>(load_egl("eglGetPlatformDisplay"));
  auto get_display = reinterpret_cast<PFNEGLGETDISPLAYPROC>(load_egl("eglGetDisplay"));
  auto initialize = reinterpret_cast<PFNEGLINITIALIZEPROC>(load_egl("eglInitialize"));
  auto get_error = reinterpret_cast<PFNEGLGETERRORPROC>(load_egl("eglGetError"));
  if (!query_string || !get_display || !initialize || !get_error) throw GlError("libEGL lacks EGL 1.4 functions");
  const char* client_ext = query_string(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  const std::string client = client_ext ? client_ext : "";

  EGLDisplay dpy = EGL_NO_DISPLAY;
  EGLint major = 0, minor = 0;
  if (get_platform_display && client.find("EGL_MESA_platform_surfaceless") != std::string::npos) {
    dpy = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    impl_->platform = "EGL surfaceless";
    if (dpy != EGL_NO_DISPLAY && !initialize(dpy, &major, &minor)) dpy = EGL_NO_DISPLAY;
  }
  if (dpy == EGL_NO_DISPLAY) {
    dpy = get_display(EGL_DEFAULT_DISPLAY);
    impl_->platform = "EGL default display";
    if (dpy == EGL_NO_DISPLAY || !initialize(dpy, &major, &minor))
      throw GlError("no EGL display could be initialised (error " + egl_error_name(get_error()) +
                    "); install Mesa's EGL (libegl-mesa0) or run under xvfb-run");
  }
  if (!gladLoadEGL(dpy, load_egl)) throw GlError("could not load the EGL functions");
  impl_->display = dpy;

  if (!eglBindAPI(EGL_OPENGL_API)) throw GlError("EGL cannot bind desktop OpenGL");
  const EGLint config_attribs[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
  EGLConfig config = nullptr;
  EGLint n_configs = 0;
  eglChooseConfig(dpy, config_attribs, &config, 1, &n_configs);
  if (n_configs < 1) {
    if (!GLAD_EGL_KHR_no_config_context) throw GlError("EGL offers no OpenGL config");
    config = EGL_NO_CONFIG_KHR;
  }
  const EGLint ctx_attribs[] = {EGL_CONTEXT_MAJOR_VERSION,
                                3,
                                EGL_CONTEXT_MINOR_VERSION,
                                3,
                                EGL_CONTEXT_OPENGL_PROFILE_MASK,
                                EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                                EGL_CONTEXT_OPENGL_DEBUG,
                                EGL_TRUE,
                                EGL_NONE};
  impl_->context = eglCreateContext(dpy, config, EGL_NO_CONTEXT, ctx_attribs);
  if (impl_->context == EGL_NO_CONTEXT)
    throw GlError("EGL could not create an OpenGL 3.3 core context (error " + egl_error_name(eglGetError()) + ")");
  if (!eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, impl_->context))
    throw GlError("eglMakeCurrent without a surface failed (error " + egl_error_name(eglGetError()) +
                  "); the driver needs EGL_KHR_surfaceless_context");
  if (!gladLoadGL(load_gl)) throw GlError("could not load OpenGL 3.3 functions");
}

HeadlessContext::~HeadlessContext() {
  if (impl_->display != EGL_NO_DISPLAY) {
    eglMakeCurrent(impl_->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (impl_->context != EGL_NO_CONTEXT) eglDestroyContext(impl_->display, impl_->context);
    eglTerminate(impl_->display);
  }
}

std::string HeadlessContext::description() const {
  auto str = [](GLenum e) {
    const GLubyte* s = glGetString(e);
    return s ? std::string(reinterpret_cast<const char*>(s)) : std::string("?");
  };
  return impl_->platform + " \xC2\xB7 " + str(GL_RENDERER) + " \xC2\xB7 " + str(GL_VERSION);
}

}  // namespace kvscope::gl
