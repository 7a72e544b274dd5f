#version 330 core
// Additive blending: overlapping beams add up, like light.
in vec4 v_colour;
in float v_side;
in float v_t;
out vec4 frag_colour;

void main() {
  float core = 1.0 - smoothstep(0.35, 1.0, abs(v_side));
  frag_colour = vec4(v_colour.rgb * core, 1.0);
}
