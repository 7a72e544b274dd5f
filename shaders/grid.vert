// The ground: one quad; the grid lines are drawn per pixel in grid.frag.
layout(location = 0) in vec2 a_xz;  // in [0, 1]^2
uniform mat4 u_view_proj;
uniform vec4 u_extent;  // x0, z0, x1, z1
uniform float u_y;
out vec3 v_world;

void main() {
  vec3 world = vec3(mix(u_extent.x, u_extent.z, a_xz.x), u_y, mix(u_extent.y, u_extent.w, a_xz.y));
  v_world = world;
  gl_Position = u_view_proj * vec4(world, 1.0);
}
