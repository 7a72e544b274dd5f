// Move-only RAII owners for OpenGL objects. Every object is deleted exactly
// once, by its owner, while the context is current. Shader and program
// failures throw GlError carrying the driver's info log.
#pragma once

#include <glad/gl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvscope::gl {

class GlError : public std::runtime_error {
 public:
  explicit GlError(const std::string& what) : std::runtime_error(what) {}
};

// One GL name plus the function that deletes it.
template <void (*Delete)(GLuint)>
class Object {
 public:
  Object() = default;
  explicit Object(GLuint id) : id_(id) {}
  ~Object() { reset(); }
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  Object(Object&& o) noexcept : id_(std::exchange(o.id_, 0)) {}
  Object& operator=(Object&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, 0);
    }
    return *this;
  }
  GLuint id() const { return id_; }
  explicit operator bool() const { return id_ != 0; }
  void reset() {
    if (id_) Delete(id_);
    id_ = 0;
  }

 private:
  GLuint id_ = 0;
};

namespace detail {
inline void delete_buffer(GLuint id) {
  glDeleteBuffers(1, &id);
}
inline void delete_vertex_array(GLuint id) {
  glDeleteVertexArrays(1, &id);
}
inline void delete_shader(GLuint id) {
  glDeleteShader(id);
}
inline void delete_program(GLuint id) {
  glDeleteProgram(id);
}
inline void delete_framebuffer(GLuint id) {
  glDeleteFramebuffers(1, &id);
}
inline void delete_renderbuffer(GLuint id) {
  glDeleteRenderbuffers(1, &id);
}
inline void delete_texture(GLuint id) {
  glDeleteTextures(1, &id);
}
}  // namespace detail

using Buffer = Object<detail::delete_buffer>;
using VertexArray = Object<detail::delete_vertex_array>;
using Shader = Object<detail::delete_shader>;
using Program = Object<detail::delete_program>;
using Framebuffer = Object<detail::delete_framebuffer>;
using Renderbuffer = Object<detail::delete_renderbuffer>;
using Texture = Object<detail::delete_texture>;

Buffer make_buffer();
VertexArray make_vertex_array();
Framebuffer make_framebuffer();
Renderbuffer make_renderbuffer();
Texture make_texture();

// Compiles one stage; throws GlError("<name>: <info log>") on failure.
Shader compile_shader(GLenum stage, const std::string& source, const std::string& name);
// Links a program from a vertex and a fragment stage; throws GlError with the log.
Program link_program(const std::string& vertex_src, const std::string& fragment_src, const std::string& name);

// Throws GlError naming `where` and every pending glGetError code.
void check_errors(const char* where);

// Collects KHR_debug messages of severity medium/high (and every error) when
// the context supports it; returns false when it does not.
bool enable_debug_output(std::vector<std::string>* sink);

// An offscreen colour + depth target, multisampled when samples > 1, with a
// single-sampled resolve target to read pixels back from.
class OffscreenTarget {
 public:
  void resize(int width, int height, int samples);
  void bind() const;  // as the draw framebuffer, with the viewport set
  // Resolves (if multisampled) and reads RGBA8, top row first.
  std::vector<uint8_t> read_rgba();
  int width() const { return width_; }
  int height() const { return height_; }
  int samples() const { return samples_; }

 private:
  int width_ = 0, height_ = 0, samples_ = 0;
  Framebuffer fbo_, resolve_fbo_;
  Renderbuffer colour_, depth_, resolve_colour_;
};

}  // namespace kvscope::gl
