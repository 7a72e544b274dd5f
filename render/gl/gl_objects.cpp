#include "render/gl/gl_objects.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace kvscope::gl {

namespace detail {
std::atomic<int64_t> g_created[kNumObjectKinds], g_deleted[kNumObjectKinds];
}  // namespace detail

const char* to_string(ObjectKind k) {
  switch (k) {
    case ObjectKind::kBuffer:
      return "buffers";
    case ObjectKind::kVertexArray:
      return "vertex arrays";
    case ObjectKind::kShader:
      return "shaders";
    case ObjectKind::kProgram:
      return "programs";
    case ObjectKind::kFramebuffer:
      return "framebuffers";
    case ObjectKind::kRenderbuffer:
      return "renderbuffers";
    case ObjectKind::kTexture:
      return "textures";
  }
  return "?";
}

ObjectCount object_count(ObjectKind kind) {
  ObjectCount c;
  c.created = detail::g_created[static_cast<int>(kind)].load(std::memory_order_relaxed);
  c.deleted = detail::g_deleted[static_cast<int>(kind)].load(std::memory_order_relaxed);
  return c;
}

std::string object_counts_summary() {
  std::string s;
  for (int i = 0; i < kNumObjectKinds; ++i) {
    const ObjectKind k = static_cast<ObjectKind>(i);
    const ObjectCount c = object_count(k);
    if (!s.empty()) s += ", ";
    s += std::string(to_string(k)) + " " + std::to_string(c.live()) + " live (" + std::to_string(c.created) +
         " created)";
  }
  return s;
}

Buffer make_buffer() {
  GLuint id = 0;
  glGenBuffers(1, &id);
  return Buffer(id);
}
VertexArray make_vertex_array() {
  GLuint id = 0;
  glGenVertexArrays(1, &id);
  return VertexArray(id);
}
Framebuffer make_framebuffer() {
  GLuint id = 0;
  glGenFramebuffers(1, &id);
  return Framebuffer(id);
}
Renderbuffer make_renderbuffer() {
  GLuint id = 0;
  glGenRenderbuffers(1, &id);
  return Renderbuffer(id);
}
Texture make_texture() {
  GLuint id = 0;
  glGenTextures(1, &id);
  return Texture(id);
}

Shader compile_shader(GLenum stage, const std::string& source, const std::string& name) {
  Shader s(glCreateShader(stage));
  if (!s) throw GlError(name + ": glCreateShader failed");
  const char* src = source.c_str();
  glShaderSource(s.id(), 1, &src, nullptr);
  glCompileShader(s.id());
  GLint ok = 0;
  glGetShaderiv(s.id(), GL_COMPILE_STATUS, &ok);
  if (!ok) {
    GLint len = 0;
    glGetShaderiv(s.id(), GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetShaderInfoLog(s.id(), len, nullptr, log.data());
    throw GlError("shader " + name + " did not compile:\n" + log.c_str());
  }
  return s;
}

Program link_program(const std::string& vertex_src, const std::string& fragment_src, const std::string& name) {
  Shader vs = compile_shader(GL_VERTEX_SHADER, vertex_src, name + ".vert");
  Shader fs = compile_shader(GL_FRAGMENT_SHADER, fragment_src, name + ".frag");
  Program p(glCreateProgram());
  glAttachShader(p.id(), vs.id());
  glAttachShader(p.id(), fs.id());
  glLinkProgram(p.id());
  GLint ok = 0;
  glGetProgramiv(p.id(), GL_LINK_STATUS, &ok);
  glDetachShader(p.id(), vs.id());
  glDetachShader(p.id(), fs.id());
  if (!ok) {
    GLint len = 0;
    glGetProgramiv(p.id(), GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetProgramInfoLog(p.id(), len, nullptr, log.data());
    throw GlError("program " + name + " did not link:\n" + log.c_str());
  }
  return p;
}

void check_errors(const char* where) {
  std::string codes;
  for (int i = 0; i < 16; ++i) {
    const GLenum e = glGetError();
    if (e == GL_NO_ERROR) break;
    char buf[16];
    std::snprintf(buf, sizeof(buf), " 0x%04x", e);
    codes += buf;
  }
  if (!codes.empty()) throw GlError(std::string("OpenGL error at ") + where + ":" + codes);
}

namespace {
void GLAD_API_PTR debug_callback(GLenum source, GLenum type, GLuint id, GLenum severity, GLsizei, const GLchar* message,
                                 const void* user) {
  (void)source;
  (void)id;
  if (type != GL_DEBUG_TYPE_ERROR && severity != GL_DEBUG_SEVERITY_HIGH && severity != GL_DEBUG_SEVERITY_MEDIUM) return;
  auto* sink = static_cast<std::vector<std::string>*>(const_cast<void*>(user));
  if (sink && sink->size() < 100) sink->push_back(message);
}
}  // namespace

bool enable_debug_output(std::vector<std::string>* sink) {
  if (!GLAD_GL_KHR_debug || !glDebugMessageCallback) return false;
  glEnable(GL_DEBUG_OUTPUT);
  glEnable(GL_DEBUG_OUTPUT_SYNCHRONOUS);
  glDebugMessageCallback(debug_callback, sink);
  return true;
}

std::vector<uint8_t> read_back_buffer(int w, int h) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 4);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h / 2; ++y)
    std::swap_ranges(px.begin() + static_cast<long>(y * row), px.begin() + static_cast<long>((y + 1) * row),
                     px.begin() + static_cast<long>((h - 1 - y) * row));
  for (size_t i = 3; i < px.size(); i += 4) px[i] = 255;
  return px;
}

bool is_software_rasterizer(const std::string& renderer) {
  for (const char* name : {"llvmpipe", "softpipe", "Software", "SwiftShader"})
    if (renderer.find(name) != std::string::npos) return true;
  return false;
}

int max_image_side() {
  GLint rb = 0, vp[2] = {0, 0};
  glGetIntegerv(GL_MAX_RENDERBUFFER_SIZE, &rb);
  glGetIntegerv(GL_MAX_VIEWPORT_DIMS, vp);
  return static_cast<int>(std::min({rb, vp[0], vp[1]}));
}

void OffscreenTarget::resize(int width, int height, int samples) {
  const int max_side = max_image_side();
  if (width > max_side || height > max_side) {
    throw GlError(std::to_string(width) + "x" + std::to_string(height) +
                  " pixels is larger than this OpenGL driver draws: at most " + std::to_string(max_side) +
                  " per side (GL_MAX_RENDERBUFFER_SIZE / GL_MAX_VIEWPORT_DIMS)");
  }
  GLint max_samples = 0;
  glGetIntegerv(GL_MAX_SAMPLES, &max_samples);
  samples = std::clamp(samples, 0, std::max(0, static_cast<int>(max_samples)));
  if (width == width_ && height == height_ && samples == samples_ && fbo_) return;
  width_ = width;
  height_ = height;
  samples_ = samples;
  fbo_ = make_framebuffer();
  colour_ = make_renderbuffer();
  depth_ = make_renderbuffer();
  glBindRenderbuffer(GL_RENDERBUFFER, colour_.id());
  if (samples > 1)
    glRenderbufferStorageMultisample(GL_RENDERBUFFER, samples, GL_RGBA8, width, height);
  else
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
  glBindRenderbuffer(GL_RENDERBUFFER, depth_.id());
  if (samples > 1)
    glRenderbufferStorageMultisample(GL_RENDERBUFFER, samples, GL_DEPTH24_STENCIL8, width, height);
  else
    glRenderbufferStorage(GL_RENDERBUFFER, GL_DEPTH24_STENCIL8, width, height);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_.id());
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, colour_.id());
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_DEPTH_STENCIL_ATTACHMENT, GL_RENDERBUFFER, depth_.id());
  if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
    throw GlError("offscreen framebuffer incomplete (" + std::to_string(width) + "x" + std::to_string(height) + ", " +
                  std::to_string(samples) + " samples)");
  resolve_fbo_.reset();
  resolve_colour_.reset();
  if (samples > 1) {
    resolve_fbo_ = make_framebuffer();
    resolve_colour_ = make_renderbuffer();
    glBindRenderbuffer(GL_RENDERBUFFER, resolve_colour_.id());
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
    glBindFramebuffer(GL_FRAMEBUFFER, resolve_fbo_.id());
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, resolve_colour_.id());
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
      throw GlError("resolve framebuffer incomplete");
  }
  glBindRenderbuffer(GL_RENDERBUFFER, 0);
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  check_errors("OffscreenTarget::resize");
}

void OffscreenTarget::bind() const {
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_.id());
  glViewport(0, 0, width_, height_);
}

std::vector<uint8_t> OffscreenTarget::read_rgba() {
  GLuint src = fbo_.id();
  if (samples_ > 1) {
    glBindFramebuffer(GL_READ_FRAMEBUFFER, fbo_.id());
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, resolve_fbo_.id());
    glBlitFramebuffer(0, 0, width_, height_, 0, 0, width_, height_, GL_COLOR_BUFFER_BIT, GL_NEAREST);
    src = resolve_fbo_.id();
  }
  glBindFramebuffer(GL_READ_FRAMEBUFFER, src);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  std::vector<uint8_t> px(static_cast<size_t>(width_) * height_ * 4);
  glReadPixels(0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  // GL's origin is bottom-left; images are stored top row first.
  const size_t row = static_cast<size_t>(width_) * 4;
  std::vector<uint8_t> tmp(row);
  for (int y = 0; y < height_ / 2; ++y) {
    uint8_t* a = &px[static_cast<size_t>(y) * row];
    uint8_t* b = &px[static_cast<size_t>(height_ - 1 - y) * row];
    std::memcpy(tmp.data(), a, row);
    std::memcpy(a, b, row);
    std::memcpy(b, tmp.data(), row);
  }
  check_errors("OffscreenTarget::read_rgba");
  return px;
}

}  // namespace kvscope::gl
