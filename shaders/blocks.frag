// Flat-lit blocks with a crisp outline so neighbours stay distinct at any
// zoom. fill < 1 dims the faces (a block thrown away); fill == 0 keeps only
// the edges (an empty cache slot).
in vec3 v_local;
in vec3 v_normal;
in vec3 v_size;
in vec4 v_colour;
in float v_glow;
in float v_bands;
in vec3 v_world;

uniform vec3 u_light_dir;  // unit, towards the light
uniform vec3 u_eye;
uniform vec3 u_background;
uniform float u_fog_far;   // distance at which blocks have faded into the background by a third

out vec4 frag_colour;

void main() {
  // Distance to the face's border in pixels, along the two in-face axes.
  vec3 n = abs(v_normal);
  vec3 edge_dist = (0.5 - abs(v_local));
  vec3 px = edge_dist / max(fwidth(v_local), vec3(1e-6));
  float border_px = 1e6;
  if (n.x < 0.5) border_px = min(border_px, px.x);
  if (n.y < 0.5) border_px = min(border_px, px.y);
  if (n.z < 0.5) border_px = min(border_px, px.z);
  // Faces that cover few pixels get no outline (it would swallow them).
  vec3 face_px = 1.0 / max(fwidth(v_local), vec3(1e-6));
  float smallest_face = 1e6;
  if (n.x < 0.5) smallest_face = min(smallest_face, face_px.x);
  if (n.y < 0.5) smallest_face = min(smallest_face, face_px.y);
  if (n.z < 0.5) smallest_face = min(smallest_face, face_px.z);
  float outline_w = clamp(smallest_face * 0.08, 0.0, 1.6);
  float on_edge = 1.0 - smoothstep(outline_w - 0.5, outline_w + 0.5, border_px);

  float fill = v_colour.a;
  vec3 base = v_colour.rgb;
  float lambert = 0.55 + 0.45 * max(dot(normalize(v_normal), u_light_dir), 0.0);
  if (v_normal.y > 0.5) lambert += 0.1;  // tops a touch brighter
  vec3 face = base * lambert;
  vec3 col;
#ifdef KVSCOPE_OUTLINE
  // Outline-only blocks (empty cache slots) get their own draw with this
  // variant: `discard` turns off early depth testing, which would slow
  // every solid block on a software rasteriser.
  if (on_edge < 0.05 && outline_w > 0.0) discard;
  col = base * 0.9;
  if (outline_w <= 0.0) col = base * 0.35;  // too small for edges: a faint solid
#else
  {
    vec3 interior = face * mix(0.18, 1.0, fill);
    if (v_bands > 0.5 && n.y < 0.5) {
      // A quantized row: v_bands dark stripes up the side faces (its bits per
      // value). Stripes narrower than ~3 px would alias: they fade to an even tint.
      float t = (v_local.y + 0.5) * v_bands;
      float w = max(fwidth(t), 1e-6);
      float line = 1.0 - smoothstep(0.30 - w, 0.30 + w, fract(t));
      float resolvable = smoothstep(2.5, 5.0, 1.0 / w);
      interior *= mix(0.82, 1.0 - 0.5 * line, resolvable);
    }
    vec3 edge_col = fill < 1.0 ? base * 1.1 : face * 0.45;
    col = mix(interior, edge_col, on_edge);
  }
#endif
  col += base * v_glow * 0.9 + vec3(v_glow * 0.12);
  // Distance fade keeps a long sequence readable towards the horizon.
  float d = length(v_world - u_eye);
  float fog = clamp(d / max(u_fog_far, 1.0), 0.0, 1.0) * 0.33;
  col = mix(col, u_background, fog);
  frag_colour = vec4(col, 1.0);
}
