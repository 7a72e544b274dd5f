// Attention rays: one instanced triangle strip per ray, bent into a
// quadratic arc from the write head to a key's KV block. Width and brightness
// grow with the ray's real attention weight.
layout(location = 0) in vec2 a_param;   // x: t along the arc in [0, 1], y: side -1 / +1
layout(location = 1) in vec3 i_from;
layout(location = 2) in vec3 i_to;
layout(location = 3) in float i_weight;
layout(location = 4) in vec4 i_colour; // rgb + fade

uniform mat4 u_view_proj;
uniform vec2 u_viewport;      // pixels
uniform float u_width_scale;  // pixels for weight 1
uniform float u_arc;          // arc height per unit of length
uniform float u_stretch_y;    // the camera's vertical exaggeration (arcs keep their look)

out vec4 v_colour;
out float v_side;
out float v_t;

vec3 arc(float t) {
  vec3 mid = 0.5 * (i_from + i_to);
  float len = length(i_to - i_from);
  // Bowed up and towards the viewer's side of the row, so rays reach the
  // blocks' front faces instead of cutting through the stacks (the same
  // curve as ray_arc_point in render/scene/scene.cpp, where tags sit on it).
  vec3 ctrl = mid + vec3(0.0, (u_arc * len * 0.5 + 0.2) / u_stretch_y, min(u_arc * len * 0.6, 3.0));
  float s = 1.0 - t;
  return s * s * i_from + 2.0 * s * t * ctrl + t * t * i_to;
}

void main() {
  float t = a_param.x;
  vec4 c0 = u_view_proj * vec4(arc(t), 1.0);
  vec4 c1 = u_view_proj * vec4(arc(min(t + 0.01, 1.0)), 1.0);
  vec4 cm = u_view_proj * vec4(arc(max(t - 0.01, 0.0)), 1.0);
  vec2 s0 = cm.xy / max(cm.w, 1e-4) * u_viewport;
  vec2 s1 = c1.xy / max(c1.w, 1e-4) * u_viewport;
  vec2 dir = s1 - s0;
  dir = length(dir) > 1e-5 ? normalize(dir) : vec2(1.0, 0.0);
  vec2 normal = vec2(-dir.y, dir.x);
  float w = sqrt(clamp(i_weight, 0.0, 1.0));
  float width_px = 2.5 + u_width_scale * w;
  vec2 offset = normal * a_param.y * width_px * 0.5;
  gl_Position = c0 + vec4(offset / u_viewport * 2.0 * c0.w, 0.0, 0.0);
  // Brightness from the weight; the write-head end is a little brighter.
  float intensity = clamp(0.18 + 1.8 * w, 0.0, 1.0) * i_colour.a;
  v_colour = vec4(i_colour.rgb * intensity * (1.0 - 0.25 * t), 1.0);
  v_side = a_param.y;
  v_t = t;
}
