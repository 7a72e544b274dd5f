// Move-only RAII owners for OpenGL objects. Every object is deleted exactly
// once, by its owner, while the context is current. Shader and program
// failures throw GlError carrying the driver's info log. Every owner counts
// its creations and deletions per kind (one relaxed atomic add each), so a
// long run can check that nothing leaks (kvscope --soak-rounds).
#pragma once

#include <glad/gl.h>

#include <atomic>
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

enum class ObjectKind { kBuffer, kVertexArray, kShader, kProgram, kFramebuffer, kRenderbuffer, kTexture };
inline constexpr int kNumObjectKinds = 7;
const char* to_string(ObjectKind k);  // "buffers", "vertex arrays", ...

struct ObjectCount {
  int64_t created = 0, deleted = 0;
  int64_t live() const { return created - deleted; }
};
// Objects of `kind` created and deleted through the owners below, in this
// process (every context).
ObjectCount object_count(ObjectKind kind);
// "buffers 12 live (40 created), vertex arrays 3 live (3 created), ..."
std::string object_counts_summary();

namespace detail {
extern std::atomic<int64_t> g_created[kNumObjectKinds], g_deleted[kNumObjectKinds];
}  // namespace detail

// One GL name plus the function that deletes it.
template <void (*Delete)(GLuint), ObjectKind Kind>
class Object {
 public:
  Object() = default;
  explicit Object(GLuint id) : id_(id) {
    if (id_) detail::g_created[static_cast<int>(Kind)].fetch_add(1, std::memory_order_relaxed);
  }
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
    if (id_) {
      Delete(id_);
      detail::g_deleted[static_cast<int>(Kind)].fetch_add(1, std::memory_order_relaxed);
    }
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

using Buffer = Object<detail::delete_buffer, ObjectKind::kBuffer>;
using VertexArray = Object<detail::delete_vertex_array, ObjectKind::kVertexArray>;
using Shader = Object<detail::delete_shader, ObjectKind::kShader>;
using Program = Object<detail::delete_program, ObjectKind::kProgram>;
using Framebuffer = Object<detail::delete_framebuffer, ObjectKind::kFramebuffer>;
using Renderbuffer = Object<detail::delete_renderbuffer, ObjectKind::kRenderbuffer>;
using Texture = Object<detail::delete_texture, ObjectKind::kTexture>;

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

// True when `renderer` (GL_RENDERER, or WebGL's unmasked renderer) names a
// software rasteriser: Mesa's llvmpipe/softpipe, or SwiftShader (headless
// browsers, and browsers that block the machine's GPU). There 4x
// multisampling roughly doubles the frame time, so windows go without it.
bool is_software_rasterizer(const std::string& renderer);

// The largest width and height an offscreen image may have on this driver:
// the smaller of GL_MAX_RENDERBUFFER_SIZE and GL_MAX_VIEWPORT_DIMS (a context
// must be current).
int max_image_side();

// The window's back buffer (what is about to be shown), w x h, as RGBA rows
// top to bottom with alpha 255: a screenshot's pixels on the desktop and in the page.
std::vector<uint8_t> read_back_buffer(int w, int h);

// An offscreen colour + depth target, multisampled when samples > 1, with a
// single-sampled resolve target to read pixels back from.
class OffscreenTarget {
 public:
  // Throws GlError naming the limit when width or height exceeds max_image_side().
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
