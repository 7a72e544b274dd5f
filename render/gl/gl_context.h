// A headless OpenGL 3.3 core context through EGL, no window system needed:
// Mesa's surfaceless platform (llvmpipe on machines without a GPU), falling
// back to EGL's default display. Rendering goes to an FBO (gl_objects.h).
#pragma once

#include <memory>
#include <string>

namespace kvscope::gl {

class HeadlessContext {
 public:
  // Creates the context, makes it current on this thread and loads GL.
  // Throws GlError saying what failed (no EGL, no GL 3.3 core, ...).
  HeadlessContext();
  ~HeadlessContext();
  HeadlessContext(const HeadlessContext&) = delete;
  HeadlessContext& operator=(const HeadlessContext&) = delete;

  std::string description() const;  // "EGL surfaceless · llvmpipe (LLVM ...) · 3.3 (Core Profile) Mesa ..."

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope::gl
