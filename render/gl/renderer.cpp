#include "render/gl/renderer.h"

#include <cstddef>
#include <glm/gtc/type_ptr.hpp>

#include "kvscope_shaders.h"

namespace kvscope {

namespace {

const char* src(const unsigned char* s) {
  return reinterpret_cast<const char*>(s);
}

// Per-instance data as the shaders read it.
struct GpuBlock {
  float center[3];
  float size[3];
  float colour[4];  // rgb + fill
  float glow;
  float bands;  // stripes across a quantized row (0: none)
};
struct GpuRay {
  float from[3];
  float to[3];
  float weight;
  float colour[4];  // rgb + fade
};
static_assert(sizeof(GpuBlock) == 12 * sizeof(float), "tightly packed");
static_assert(sizeof(GpuRay) == 11 * sizeof(float), "tightly packed");

constexpr int kArcSegments = 20;  // smooth enough; each segment costs triangle setup on llvmpipe

void attrib(GLuint loc, int n, size_t stride, size_t offset, bool per_instance) {
  glEnableVertexAttribArray(loc);
  glVertexAttribPointer(loc, n, GL_FLOAT, GL_FALSE, static_cast<GLsizei>(stride),
                        reinterpret_cast<const void*>(offset));
  glVertexAttribDivisor(loc, per_instance ? 1 : 0);
}

GLint uniform(const gl::Program& p, const char* name) {
  return glGetUniformLocation(p.id(), name);
}

// A unit cube, 4 vertices per face so each face has its own normal:
// `vertices` (24, pos3 + normal3), `indices` two triangles per face.
void unit_cube(std::vector<float>& vertices, std::vector<unsigned short>& indices) {
  const int axes[6][3] = {{0, 1, 2}, {0, 1, 2}, {1, 2, 0}, {1, 2, 0}, {2, 0, 1}, {2, 0, 1}};
  for (int f = 0; f < 6; ++f) {
    const int n_axis = axes[f][2];
    const float sign = (f % 2 == 0) ? 0.5f : -0.5f;
    const unsigned short base = static_cast<unsigned short>(vertices.size() / 6);
    const float corners[4][2] = {{-0.5f, -0.5f}, {0.5f, -0.5f}, {0.5f, 0.5f}, {-0.5f, 0.5f}};
    for (const auto& c : corners) {
      float p[3], n[3] = {0, 0, 0};
      p[axes[f][0]] = c[0];
      p[axes[f][1]] = c[1];
      p[n_axis] = sign;
      n[n_axis] = sign * 2.0f;
      vertices.insert(vertices.end(), {p[0], p[1], p[2], n[0], n[1], n[2]});
    }
    // Counter-clockwise seen from outside (culling is off anyway: outlines
    // of empty slots show their back edges).
    const auto at = [base](int k) { return static_cast<unsigned short>(base + k); };
    if (sign > 0)
      indices.insert(indices.end(), {base, at(1), at(2), base, at(2), at(3)});
    else
      indices.insert(indices.end(), {base, at(2), at(1), base, at(3), at(2)});
  }
}

// Frustum planes (a, b, c, d), a*x + b*y + c*z + d >= 0 inside, in world
// space (vp includes the camera's stretch), normalised so the left side
// is a world distance.
void frustum_planes(const glm::mat4& vp, glm::vec4 (&planes)[6]) {
  const glm::mat4 t = glm::transpose(vp);
  planes[0] = t[3] + t[0];
  planes[1] = t[3] - t[0];
  planes[2] = t[3] + t[1];
  planes[3] = t[3] - t[1];
  planes[4] = t[3] + t[2];
  planes[5] = t[3] - t[2];
  for (glm::vec4& p : planes) p /= glm::length(glm::vec3(p));
}

}  // namespace

struct Renderer::Batch {
  gl::VertexArray vao;
  gl::Buffer instances;
};

Renderer::Renderer() {
  link_programs();
  std::vector<float> cube;
  std::vector<unsigned short> idx;
  unit_cube(cube, idx);
  cube_vbo_ = gl::make_buffer();
  glBindBuffer(GL_ARRAY_BUFFER, cube_vbo_.id());
  glBufferData(GL_ARRAY_BUFFER, static_cast<GLsizeiptr>(cube.size() * sizeof(float)), cube.data(), GL_STATIC_DRAW);
  cube_ebo_ = gl::make_buffer();
  // The element buffer is bound to each VAO; fill it once through the first.
  tokens_ = make_block_batch();
  glBindVertexArray(tokens_->vao.id());
  glBufferData(GL_ELEMENT_ARRAY_BUFFER, static_cast<GLsizeiptr>(idx.size() * sizeof(unsigned short)), idx.data(),
               GL_STATIC_DRAW);
  glBindVertexArray(0);
  kv_ = make_block_batch();
  markers_ = make_block_batch();
  outlines_ = make_block_batch();
  make_ray_batch();
  make_ground();
  gl::check_errors("Renderer::Renderer");
}

void Renderer::link_programs() {
  blocks_prog_ = gl::link_program(src(shaders::kShaderBlocksVert), src(shaders::kShaderBlocksFrag), "blocks");
  // The outline variant: the same source with KVSCOPE_OUTLINE defined
  // right after the #version line.
  std::string frag = src(shaders::kShaderBlocksFrag);
  const size_t eol = frag.find('\n');
  frag.insert(eol + 1, "#define KVSCOPE_OUTLINE 1\n");
  outline_prog_ = gl::link_program(src(shaders::kShaderBlocksVert), frag, "blocks_outline");
  rays_prog_ = gl::link_program(src(shaders::kShaderRaysVert), src(shaders::kShaderRaysFrag), "rays");
  grid_prog_ = gl::link_program(src(shaders::kShaderGridVert), src(shaders::kShaderGridFrag), "grid");
}

// The cube's vertices and element buffer, and one GpuBlock per instance.
std::unique_ptr<Renderer::Batch> Renderer::make_block_batch() {
  auto b = std::make_unique<Batch>();
  b->vao = gl::make_vertex_array();
  b->instances = gl::make_buffer();
  glBindVertexArray(b->vao.id());
  glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, cube_ebo_.id());
  glBindBuffer(GL_ARRAY_BUFFER, cube_vbo_.id());
  attrib(0, 3, 6 * sizeof(float), 0, false);
  attrib(1, 3, 6 * sizeof(float), 3 * sizeof(float), false);
  glBindBuffer(GL_ARRAY_BUFFER, b->instances.id());
  attrib(2, 3, sizeof(GpuBlock), offsetof(GpuBlock, center), true);
  attrib(3, 3, sizeof(GpuBlock), offsetof(GpuBlock, size), true);
  attrib(4, 4, sizeof(GpuBlock), offsetof(GpuBlock, colour), true);
  attrib(5, 1, sizeof(GpuBlock), offsetof(GpuBlock, glow), true);
  attrib(6, 1, sizeof(GpuBlock), offsetof(GpuBlock, bands), true);
  glBindVertexArray(0);
  return b;
}

// Rays: a strip of (t, side) pairs shared by every instance, one GpuRay per instance.
void Renderer::make_ray_batch() {
  std::vector<float> strip;
  for (int i = 0; i <= kArcSegments; ++i) {
    const float t = static_cast<float>(i) / kArcSegments;
    strip.insert(strip.end(), {t, -1.0f, t, 1.0f});
  }
  strip_vertices_ = static_cast<int>(strip.size() / 2);
  strip_vbo_ = gl::make_buffer();
  glBindBuffer(GL_ARRAY_BUFFER, strip_vbo_.id());
  glBufferData(GL_ARRAY_BUFFER, static_cast<GLsizeiptr>(strip.size() * sizeof(float)), strip.data(), GL_STATIC_DRAW);
  rays_ = std::make_unique<Batch>();
  rays_->vao = gl::make_vertex_array();
  rays_->instances = gl::make_buffer();
  glBindVertexArray(rays_->vao.id());
  glBindBuffer(GL_ARRAY_BUFFER, strip_vbo_.id());
  attrib(0, 2, 2 * sizeof(float), 0, false);
  glBindBuffer(GL_ARRAY_BUFFER, rays_->instances.id());
  attrib(1, 3, sizeof(GpuRay), offsetof(GpuRay, from), true);
  attrib(2, 3, sizeof(GpuRay), offsetof(GpuRay, to), true);
  attrib(3, 1, sizeof(GpuRay), offsetof(GpuRay, weight), true);
  attrib(4, 4, sizeof(GpuRay), offsetof(GpuRay, colour), true);
  glBindVertexArray(0);
}

// Ground: one quad.
void Renderer::make_ground() {
  const float quad[] = {0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1};
  quad_vbo_ = gl::make_buffer();
  glBindBuffer(GL_ARRAY_BUFFER, quad_vbo_.id());
  glBufferData(GL_ARRAY_BUFFER, sizeof(quad), quad, GL_STATIC_DRAW);
  grid_vao_ = gl::make_vertex_array();
  glBindVertexArray(grid_vao_.id());
  attrib(0, 2, 2 * sizeof(float), 0, false);
  glBindVertexArray(0);
  glBindBuffer(GL_ARRAY_BUFFER, 0);
}

Renderer::~Renderer() = default;

void Renderer::upload_and_draw(Batch& batch, const std::vector<float>& packed, int count) {
  if (count == 0) return;
  glBindBuffer(GL_ARRAY_BUFFER, batch.instances.id());
  glBufferData(GL_ARRAY_BUFFER, static_cast<GLsizeiptr>(packed.size() * sizeof(float)), packed.data(), GL_STREAM_DRAW);
  glBindVertexArray(batch.vao.id());
  glDrawElementsInstanced(GL_TRIANGLES, 36, GL_UNSIGNED_SHORT, nullptr, count);
  stats_.draw_calls++;
  stats_.blocks += count;
}

void Renderer::draw_blocks(Batch& batch, const std::vector<BlockInstance>& blocks, const glm::vec4 (&planes)[6]) {
  if (blocks.empty()) return;
  std::vector<float> solid, outline;  // packed GpuBlock fields
  solid.reserve(blocks.size() * 12);
  int n_solid = 0, n_outline = 0;
  for (const BlockInstance& b : blocks) {
    // Bounding-sphere test against the frustum: a close-up (FOLLOW) sends
    // only the few dozen blocks it shows.
    const float radius = 0.5f * glm::length(b.size);
    bool outside = false;
    for (const glm::vec4& pl : planes) outside |= glm::dot(glm::vec3(pl), b.center) + pl.w < -radius;
    if (outside) {
      stats_.blocks_culled++;
      continue;
    }
    std::vector<float>& out = b.colour.a > 0.0f ? solid : outline;
    (b.colour.a > 0.0f ? n_solid : n_outline)++;
    out.insert(out.end(), {b.center.x, b.center.y, b.center.z, b.size.x, b.size.y, b.size.z, b.colour.r, b.colour.g,
                           b.colour.b, b.colour.a, b.glow, b.bands});
  }
  upload_and_draw(batch, solid, n_solid);
  if (n_outline > 0) {
    glUseProgram(outline_prog_.id());
    upload_and_draw(*outlines_, outline, n_outline);
    glUseProgram(blocks_prog_.id());
  }
}

void Renderer::draw(const Scene& scene, const Camera& camera, int x, int y, int width, int height,
                    const RenderStyle& style) {
  stats_ = DrawStats();
  const float aspect = static_cast<float>(width) / static_cast<float>(std::max(1, height));
  const glm::mat4 vp = camera.proj(aspect) * camera.view();
  const glm::vec3 bg = scene.palette.background;

  glViewport(x, y, width, height);
  glEnable(GL_SCISSOR_TEST);
  glScissor(x, y, width, height);
  glClearColor(bg.r, bg.g, bg.b, 1.0f);
  glClearDepth(1.0);
  glDepthMask(GL_TRUE);
  glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
  glEnable(GL_DEPTH_TEST);
  glDepthFunc(GL_LEQUAL);
  glDepthMask(GL_TRUE);
  glDisable(GL_CULL_FACE);
  glDisable(GL_BLEND);

  if (style.grid) draw_ground(scene, vp);
  draw_all_blocks(scene, camera, vp, style);
  draw_rays(scene, camera, vp, width, height, style);
  glBindVertexArray(0);
  glUseProgram(0);
  glBindBuffer(GL_ARRAY_BUFFER, 0);
  glDisable(GL_SCISSOR_TEST);
}

// Ground grid under the sequence.
void Renderer::draw_ground(const Scene& scene, const glm::mat4& vp) {
  const glm::vec3 bg = scene.palette.background;
  glUseProgram(grid_prog_.id());
  const float x0 = scene.bounds_min.x - 4.0f, x1 = std::max(scene.bounds_max.x, 8.0f) + 6.0f;
  const float z0 = -6.0f, z1 = 6.0f;
  glUniformMatrix4fv(uniform(grid_prog_, "u_view_proj"), 1, GL_FALSE, glm::value_ptr(vp));
  glUniform4f(uniform(grid_prog_, "u_extent"), x0, z0, x1, z1);
  glUniform1f(uniform(grid_prog_, "u_y"), -0.07f);
  glUniform3f(uniform(grid_prog_, "u_background"), bg.r, bg.g, bg.b);
  glUniform3f(uniform(grid_prog_, "u_line"), 0.20f, 0.26f, 0.38f);
  glUniform1f(uniform(grid_prog_, "u_pitch"), Layout().pitch);
  glBindVertexArray(grid_vao_.id());
  glDrawArrays(GL_TRIANGLES, 0, 6);
  stats_.draw_calls++;
}

// Blocks: tokens, KV stacks, markers. Back faces are culled (closed boxes).
void Renderer::draw_all_blocks(const Scene& scene, const Camera& camera, const glm::mat4& vp,
                               const RenderStyle& style) {
  const glm::vec3 bg = scene.palette.background;
  const glm::vec3 light = glm::normalize(glm::vec3(0.35f, 0.8f, 0.5f));
  const glm::vec3 eye = camera.world_eye();
  for (const gl::Program* p : {&outline_prog_, &blocks_prog_}) {
    glUseProgram(p->id());
    glUniformMatrix4fv(uniform(*p, "u_view_proj"), 1, GL_FALSE, glm::value_ptr(vp));
    glUniform3f(uniform(*p, "u_light_dir"), light.x, light.y, light.z);
    glUniform3f(uniform(*p, "u_eye"), eye.x, eye.y, eye.z);
    glUniform3f(uniform(*p, "u_background"), bg.r, bg.g, bg.b);
    glUniform1f(uniform(*p, "u_fog_far"), style.fog ? camera.distance * 3.0f : 1e30f);
  }
  glEnable(GL_CULL_FACE);
  glCullFace(GL_BACK);
  glFrontFace(GL_CCW);
  glm::vec4 planes[6];
  frustum_planes(vp, planes);
  draw_blocks(*kv_, scene.kv, planes);
  draw_blocks(*tokens_, scene.tokens, planes);
  draw_blocks(*markers_, scene.markers, planes);
  draw_blocks(*markers_, scene.cache_marks, planes);
  glDisable(GL_CULL_FACE);
}

// Rays: additive light, tested against the blocks but not occluding.
void Renderer::draw_rays(const Scene& scene, const Camera& camera, const glm::mat4& vp, int width, int height,
                         const RenderStyle& style) {
  if (scene.rays.empty()) return;
  std::vector<GpuRay> gpu(scene.rays.size());
  for (size_t i = 0; i < scene.rays.size(); ++i) {
    const RayInstance& b = scene.rays[i];
    gpu[i] = GpuRay{{b.from.x, b.from.y, b.from.z},
                    {b.to.x, b.to.y, b.to.z},
                    b.weight,
                    {b.colour.r, b.colour.g, b.colour.b, b.colour.a}};
  }
  glBindBuffer(GL_ARRAY_BUFFER, rays_->instances.id());
  glBufferData(GL_ARRAY_BUFFER, static_cast<GLsizeiptr>(gpu.size() * sizeof(GpuRay)), gpu.data(), GL_STREAM_DRAW);
  glUseProgram(rays_prog_.id());
  glUniformMatrix4fv(uniform(rays_prog_, "u_view_proj"), 1, GL_FALSE, glm::value_ptr(vp));
  glUniform2f(uniform(rays_prog_, "u_viewport"), static_cast<float>(width), static_cast<float>(height));
  glUniform1f(uniform(rays_prog_, "u_width_scale"), style.ray_width_px * style.dpi_scale);
  glUniform1f(uniform(rays_prog_, "u_arc"), style.ray_arc);
  glUniform1f(uniform(rays_prog_, "u_stretch_y"), camera.stretch_y);
  glEnable(GL_BLEND);
  glBlendFunc(GL_ONE, GL_ONE);
  glDepthMask(GL_FALSE);
  glBindVertexArray(rays_->vao.id());
  glDrawArraysInstanced(GL_TRIANGLE_STRIP, 0, strip_vertices_, static_cast<GLsizei>(gpu.size()));
  stats_.draw_calls++;
  stats_.rays = static_cast<int>(gpu.size());
  glDepthMask(GL_TRUE);
  glDisable(GL_BLEND);
}

}  // namespace kvscope
