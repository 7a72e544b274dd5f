// One instanced draw per kind of block (tokens, KV blocks, markers): a unit
// cube scaled and moved per instance.
layout(location = 0) in vec3 a_pos;     // cube corner, in [-0.5, 0.5]^3
layout(location = 1) in vec3 a_normal;  // face normal
layout(location = 2) in vec3 i_center;  // world
layout(location = 3) in vec3 i_size;    // world
layout(location = 4) in vec4 i_colour;  // rgb + fill (1 solid, 0 outline only)
layout(location = 5) in float i_glow;   // 0..1 added light
layout(location = 6) in float i_bands;  // stripes across a quantized row (0: none)

uniform mat4 u_view_proj;

out vec3 v_local;
out vec3 v_normal;
out vec3 v_size;
out vec4 v_colour;
out float v_glow;
out float v_bands;
out vec3 v_world;

void main() {
  vec3 world = i_center + a_pos * i_size;
  gl_Position = u_view_proj * vec4(world, 1.0);
  v_local = a_pos;
  v_normal = a_normal;
  v_size = i_size;
  v_colour = i_colour;
  v_glow = i_glow;
  v_bands = i_bands;
  v_world = world;
}
