// The browser's GL: WebGL2 through Emscripten's OpenGL ES 3.0 header, under the
// name the desktop's glad loader has, so render/ and app/ include one header
// on both targets. Only on the web build's include path (cmake/web.cmake).
// What OpenGL 3.3 core has and ES 3.0 lacks is mapped or switched off here.
#pragma once

#include <GLES3/gl3.h>

// As glad does: GLFW must not bring in the desktop GL header after this one.
#define GLFW_INCLUDE_NONE

// Functions come from the browser, not a loader.
#define GLAD_API_PTR
inline int gladLoadGL(void*) {
  return 1;
}
// glad's pointer to a function, tested to see whether a context is current.
inline void (*const glad_glGetIntegerv)(GLenum, GLint*) = glGetIntegerv;

// GL_KHR_debug: WebGL reports errors through the console instead.
#define GLAD_GL_KHR_debug 0
#define GL_DEBUG_OUTPUT 0x92E0
#define GL_DEBUG_OUTPUT_SYNCHRONOUS 0x8242
#define GL_DEBUG_SEVERITY_HIGH 0x9146
#define GL_DEBUG_SEVERITY_MEDIUM 0x9147
#define GL_DEBUG_SEVERITY_LOW 0x9148
#define GL_DEBUG_SEVERITY_NOTIFICATION 0x826B
#define GL_DEBUG_TYPE_ERROR 0x824C
typedef void(GLAD_API_PTR* GLDEBUGPROC)(GLenum source, GLenum type, GLuint id, GLenum severity, GLsizei length,
                                        const GLchar* message, const void* user);
inline void (*const glDebugMessageCallback)(GLDEBUGPROC, const void*) = nullptr;

// GL 3.3's double-precision clear depth: Emscripten provides it over WebGL's.
extern "C" void glClearDepth(double depth);
