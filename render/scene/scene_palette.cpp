#include "render/scene/scene.h"

namespace kvscope {

namespace {

Palette standard_palette() {
  Palette p;
  p.background = {0.030f, 0.035f, 0.055f};
  p.prompt_token = {0.36f, 0.44f, 0.60f};
  p.generated_token = {1.00f, 0.60f, 0.10f};
  p.new_token = {1.00f, 0.92f, 0.35f};
  p.cache_low = {0.04f, 0.30f, 0.48f};
  p.cache_high = {0.30f, 0.88f, 1.00f};
  p.new_kv = {0.35f, 1.00f, 0.45f};
  p.prefill = {1.00f, 0.86f, 0.45f};
  p.refill = {0.72f, 0.50f, 1.00f};
  p.recomputed = {1.00f, 0.16f, 0.14f};
  p.empty = {0.34f, 0.36f, 0.42f};
  p.ray = {1.00f, 0.32f, 0.86f};
  p.head = {1.00f, 0.40f, 0.90f};
  p.evicted = {0.70f, 0.26f, 0.28f};
  p.sink = {1.00f, 0.80f, 0.25f};
  p.page = {0.55f, 0.58f, 0.82f};
  p.shared = {0.95f, 0.95f, 1.00f};
  return p;
}

// Okabe & Ito's colour-blind-safe set, brightened for projectors: no
// red/green pair carries meaning, and every pair differs in lightness.
Palette colour_blind_palette() {
  Palette p;
  p.background = {0.020f, 0.024f, 0.040f};
  p.prompt_token = {0.55f, 0.58f, 0.66f};
  p.generated_token = {0.90f, 0.62f, 0.00f};  // orange
  p.new_token = {0.94f, 0.89f, 0.26f};        // yellow
  p.cache_low = {0.00f, 0.27f, 0.45f};
  p.cache_high = {0.34f, 0.71f, 0.91f};  // sky blue
  p.new_kv = {0.25f, 0.80f, 0.62f};      // bluish green, lighter than the vermillion
  p.prefill = {0.94f, 0.89f, 0.26f};
  p.refill = {0.80f, 0.47f, 0.65f};      // reddish purple
  p.recomputed = {0.84f, 0.37f, 0.00f};  // vermillion
  p.empty = {0.45f, 0.47f, 0.52f};
  p.ray = {1.00f, 1.00f, 1.00f};  // white: brightness = weight
  p.head = {0.80f, 0.47f, 0.65f};
  p.evicted = {0.84f, 0.37f, 0.00f};  // vermillion, like thrown-away K/V
  p.sink = {0.94f, 0.89f, 0.26f};
  p.page = {0.55f, 0.58f, 0.66f};
  p.shared = {1.00f, 1.00f, 1.00f};
  return p;
}

}  // namespace

const Palette& palette_for(bool colour_blind) {
  static const Palette standard = standard_palette();
  static const Palette safe = colour_blind_palette();
  return colour_blind ? safe : standard;
}

}  // namespace kvscope
