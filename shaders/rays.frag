// Additive blending: overlapping rays add up, like light.
in vec4 v_colour;
in float v_side;
in float v_t;
out vec4 frag_colour;

void main() {
  // A bright core (over half the width: it reads from the back of a room)
  // and a soft glow around it.
  float a = abs(v_side);
  float core = 1.0 - smoothstep(0.3, 0.62, a);
  float glow = 0.45 * (1.0 - a) * (1.0 - a);
  frag_colour = vec4(v_colour.rgb * (core + glow), 1.0);
}
