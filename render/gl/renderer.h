// Draws a Scene with OpenGL 3.3 core: the ground grid, every kind of block in
// one instanced draw each, all attention rays in one instanced draw. This is
// the only file that issues draw calls for the 3D view; text goes through
// the ImGui overlay (render/overlay/overlay.h).
#pragma once

#include <memory>

#include "render/gl/gl_objects.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"

namespace kvscope {

struct RenderStyle {
  float ray_width_px = 26.0f;  // extra width of a ray of weight 1 (pixels, before dpi scale; by sqrt(weight))
  float ray_arc = kRayArc;     // arc height per unit of ray length (ray_arc_point)
  float dpi_scale = 1.0f;      // multiplies pixel sizes (projectors, HiDPI)
  bool grid = true;
  bool fog = true;  // distant blocks fade towards the background
};

struct DrawStats {
  int draw_calls = 0;
  int blocks = 0;         // drawn (inside the view)
  int blocks_culled = 0;  // outside the view, not sent
  int rays = 0;
};

class Renderer {
 public:
  // Needs a current OpenGL 3.3 core context with glad loaded. Throws
  // gl::GlError (with the info log) when a shader fails.
  Renderer();
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Clears and draws into the bound framebuffer, viewport (0, 0, width, height).
  void draw(const Scene& scene, const Camera& camera, int width, int height, const RenderStyle& style = RenderStyle()) {
    draw(scene, camera, 0, 0, width, height, style);
  }
  // Same, into the viewport (x, y, width, height) (GL pixels, origin bottom-left);
  // only that rectangle is cleared.
  void draw(const Scene& scene, const Camera& camera, int x, int y, int width, int height,
            const RenderStyle& style = RenderStyle());
  const DrawStats& stats() const { return stats_; }

 private:
  struct Batch;
  // Set-up: the shaders, the shared geometry and one vertex array per batch.
  void link_programs();
  std::unique_ptr<Batch> make_block_batch();
  void make_ray_batch();
  void make_ground();
  // The passes of draw(), in order; vp = projection * view.
  void draw_ground(const Scene& scene, const glm::mat4& vp);
  void draw_all_blocks(const Scene& scene, const Camera& camera, const glm::mat4& vp, const RenderStyle& style);
  void draw_rays(const Scene& scene, const Camera& camera, const glm::mat4& vp, int width, int height,
                 const RenderStyle& style);
  // Uploads the blocks inside the view (`planes`: the frustum) and draws
  // them: the solid ones in one instanced call, outline-only ones (empty
  // slots, fill 0) in a second one with the outline shader.
  void draw_blocks(Batch& batch, const std::vector<BlockInstance>& blocks, const glm::vec4 (&planes)[6]);
  void upload_and_draw(Batch& batch, const std::vector<float>& packed, int count);

  gl::Program blocks_prog_, outline_prog_, rays_prog_, grid_prog_;
  gl::Buffer cube_vbo_, cube_ebo_, strip_vbo_, quad_vbo_;
  std::unique_ptr<Batch> tokens_, kv_, markers_, outlines_, rays_;
  gl::VertexArray grid_vao_;
  int strip_vertices_ = 0;
  DrawStats stats_;
};

}  // namespace kvscope
