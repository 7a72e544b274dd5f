// Cell lines between positions (x = p + 0.5), brighter every 10 positions,
// anti-aliased with screen-space derivatives and faded towards the edges.
in vec3 v_world;
uniform vec3 u_background;
uniform vec3 u_line;
uniform vec4 u_extent;
uniform float u_pitch;
out vec4 frag_colour;

float grid_line(float coord, float period, float width_px) {
  float d = abs(fract(coord / period + 0.5) - 0.5) * period;  // distance to the nearest line
  float px = d / max(fwidth(coord), 1e-6);
  return 1.0 - smoothstep(width_px - 0.5, width_px + 0.5, px);
}

void main() {
  float x = v_world.x / u_pitch + 0.5;
  float z = v_world.z / u_pitch;
  float minor = max(grid_line(x, 1.0, 0.5), grid_line(z, 1.0, 0.5));
  float major = max(grid_line(x, 10.0, 1.0), grid_line(z, 10.0, 1.0));
  // Minor lines vanish where they would crowd into moire.
  float crowd = clamp(1.0 - 3.0 * max(fwidth(x), fwidth(z)), 0.0, 1.0);
  float a = max(minor * 0.35 * crowd, major * 0.8);
  vec3 ground = u_background * 1.25 + vec3(0.006, 0.008, 0.014);
  vec3 col = mix(ground, u_line, a);
  // The quad's border melts into the background.
  vec2 c = vec2(clamp((v_world.x - u_extent.x) / (u_extent.z - u_extent.x), 0.0, 1.0),
                clamp((v_world.z - u_extent.y) / (u_extent.w - u_extent.y), 0.0, 1.0));
  float edge = clamp(min(min(c.x, 1.0 - c.x) * 8.0, min(c.y, 1.0 - c.y) * 4.0), 0.0, 1.0);
  frag_colour = vec4(mix(u_background, col, edge), 1.0);
}
