#include "render/scene/scene.h"

namespace kvscope {

namespace palette {
// Mutable so the window can switch to the colour-blind-safe set (set_palette);
// only the UI thread reads them.
glm::vec3 kBackground{0.030f, 0.035f, 0.055f};
glm::vec3 kPromptToken{0.36f, 0.44f, 0.60f};
glm::vec3 kGeneratedToken{1.00f, 0.60f, 0.10f};
glm::vec3 kNewToken{1.00f, 0.92f, 0.35f};
glm::vec3 kCacheLow{0.04f, 0.30f, 0.48f};
glm::vec3 kCacheHigh{0.30f, 0.88f, 1.00f};
glm::vec3 kNewKV{0.35f, 1.00f, 0.45f};
glm::vec3 kPrefill{1.00f, 0.86f, 0.45f};
glm::vec3 kRefill{0.72f, 0.50f, 1.00f};
glm::vec3 kRecomputed{1.00f, 0.16f, 0.14f};
glm::vec3 kEmpty{0.34f, 0.36f, 0.42f};
glm::vec3 kBeam{1.00f, 0.32f, 0.86f};
glm::vec3 kHead{1.00f, 0.40f, 0.90f};
glm::vec3 kEvicted{0.70f, 0.26f, 0.28f};
glm::vec3 kSink{1.00f, 0.80f, 0.25f};
glm::vec3 kPage{0.55f, 0.58f, 0.82f};
glm::vec3 kShared{0.95f, 0.95f, 1.00f};

void set_palette(bool colour_blind) {
  if (colour_blind) {
    // Okabe & Ito's colour-blind-safe set, brightened for projectors: no
    // red/green pair carries meaning, and every pair differs in lightness.
    kBackground = {0.020f, 0.024f, 0.040f};
    kPromptToken = {0.55f, 0.58f, 0.66f};
    kGeneratedToken = {0.90f, 0.62f, 0.00f};  // orange
    kNewToken = {0.94f, 0.89f, 0.26f};        // yellow
    kCacheLow = {0.00f, 0.27f, 0.45f};
    kCacheHigh = {0.34f, 0.71f, 0.91f};  // sky blue
    kNewKV = {0.25f, 0.80f, 0.62f};      // bluish green, lighter than the vermillion
    kPrefill = {0.94f, 0.89f, 0.26f};
    kRefill = {0.80f, 0.47f, 0.65f};      // reddish purple
    kRecomputed = {0.84f, 0.37f, 0.00f};  // vermillion
    kEmpty = {0.45f, 0.47f, 0.52f};
    kBeam = {1.00f, 1.00f, 1.00f};  // white: brightness = weight
    kHead = {0.80f, 0.47f, 0.65f};
    kEvicted = {0.84f, 0.37f, 0.00f};  // vermillion, like thrown-away K/V
    kSink = {0.94f, 0.89f, 0.26f};
    kPage = {0.55f, 0.58f, 0.66f};
    kShared = {1.00f, 1.00f, 1.00f};
  } else {
    kBackground = {0.030f, 0.035f, 0.055f};
    kPromptToken = {0.36f, 0.44f, 0.60f};
    kGeneratedToken = {1.00f, 0.60f, 0.10f};
    kNewToken = {1.00f, 0.92f, 0.35f};
    kCacheLow = {0.04f, 0.30f, 0.48f};
    kCacheHigh = {0.30f, 0.88f, 1.00f};
    kNewKV = {0.35f, 1.00f, 0.45f};
    kPrefill = {1.00f, 0.86f, 0.45f};
    kRefill = {0.72f, 0.50f, 1.00f};
    kRecomputed = {1.00f, 0.16f, 0.14f};
    kEmpty = {0.34f, 0.36f, 0.42f};
    kBeam = {1.00f, 0.32f, 0.86f};
    kHead = {1.00f, 0.40f, 0.90f};
    kEvicted = {0.70f, 0.26f, 0.28f};
    kSink = {1.00f, 0.80f, 0.25f};
    kPage = {0.55f, 0.58f, 0.82f};
    kShared = {0.95f, 0.95f, 1.00f};
  }
}
}  // namespace palette

}  // namespace kvscope
