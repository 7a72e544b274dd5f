// The scene builder: a pure function from the engine's step records (plus view
// options and an animation phase) to flat instance lists that the renderer
// draws. No GL here, so tests can check exactly what will be on screen.
//
// Layout (world units, y up):
//   x = position * pitch                      (the sequence runs left to right)
//   KV stack of position p: layer l is a block at y in [l * layer_pitch, ...)
//   token block of position p sits on top of its stack
//   the write head hovers in front (+z) of the slot being generated and fans
//   attention rays back to the selected layer's KV block of every earlier
//   position.
#pragma once

#include <glm/glm.hpp>
#include <memory>
#include <string>
#include <vector>

#include "model/core/index_check.h"
#include "model/decoding/step_record.h"
#include "render/scene/scene_lod.h"
#include "render/scene/view_defaults.h"

namespace kvscope {

// What a KV block holds in the step being shown.
enum class KvState {
  kEmpty,       // nothing held: not computed yet, or NO CACHE at rest
  kResident,    // held in the cache from an earlier step
  kNew,         // computed for the first time in this step (kept in KV CACHE mode)
  kPrefill,     // computed in the prefill burst, kept
  kRefill,      // recomputed to rebuild the cache after NO CACHE, kept
  kRecomputed,  // NO CACHE: computed again this step, then thrown away
  kNewDropped,  // NO CACHE: computed for the first time this step, then thrown away
  kEvicting,    // evicted by this step's forward (animates out): sliding window, or this layer's score rule
  kEvicted,     // evicted by an earlier step, gone from the cache (evicting by score: from this layer)
};
const char* to_string(KvState s);
// True for the states that are drawn flashing in this step.
bool is_flash(KvState s);
// True when the K/V are in the resident cache after the step.
bool is_held(KvState s);

enum class Phase { kNone, kPrefill, kDecodeKV, kDecodeNoCache, kRefill };

// Per-position facts accumulated from the records, in sequence order.
struct TokenInfo {
  int id = 0;
  std::string piece;  // display-safe (partial UTF-8 escaped as \xNN)
  bool prompt = false;
  float prob = -1;     // probability when it was chosen; -1 for prompt tokens
  int chosen_at = -1;  // index of the record that chose it; -1 for prompt tokens
};

// Everything the scene needs about one generation up to a given record.
// Built incrementally (append) so the UI does not rescan the history each frame.
struct SequenceState {
  int n_layer = 0, n_head = 0, n_embd = 0;
  int n_kv_head = 0, kv_dim = 0;  // K/V heads (grouped-query: fewer than n_head) and a K row's width
  int n_prompt = 0;
  std::vector<TokenInfo> tokens;  // positions [0, seq_len]: the last is the newest chosen token
  std::vector<float> k_norm;      // (position, layer) L2 norm of the K row; -1 = never computed
  std::vector<float> v_norm;      // (position, layer) L2 norm of the V row; -1 = never computed
  std::vector<float> k_norm_max;  // (layer) max over known positions, for height scaling
  // Quantized caches: (position, layer, 4) the stored row's error against the
  // row as computed: K max|d|, K rms d, V max|d|, V rms d; -1 = not known.
  std::vector<float> qerr;
  std::vector<int> evicted_at;  // (position) record index whose forward evicted it; -1 = not evicted
  // Eviction by score (TOVA, H2O), each layer on its own: (position, layer)
  // the record index whose forward dropped the row from that layer (-1 =
  // held or not computed) and the score that ranked it then (-1 = not known).
  std::vector<int> dropped_at;
  std::vector<double> dropped_score;
  RecordPtr current;  // the record being shown (null before the prefill)
  int n_records = 0;

  int seq_len() const { return current ? current->seq_len : 0; }  // positions with K/V computed
  float knorm(int pos, int layer) const {
    KVSCOPE_CHECK_INDEX("K norm position", pos, tokens.size());
    KVSCOPE_CHECK_INDEX("K norm layer", layer, n_layer);
    return k_norm[static_cast<size_t>(pos) * n_layer + layer];
  }
  float vnorm(int pos, int layer) const {
    KVSCOPE_CHECK_INDEX("V norm position", pos, tokens.size());
    KVSCOPE_CHECK_INDEX("V norm layer", layer, n_layer);
    return v_norm[static_cast<size_t>(pos) * n_layer + layer];
  }
  // The 4 error values above for (pos, layer), or nullptr when not known.
  const float* quant_error(int pos, int layer) const;
  // Eviction by score: the record that dropped (pos, layer) and its score then; -1 when not dropped.
  int dropped_at_step(int pos, int layer) const;
  double dropped_with_score(int pos, int layer) const;
};

// Adds one record (in generation order). The first must be the prefill.
void append_record(SequenceState& seq, const RecordPtr& rec);
// The state after records [0, count).
SequenceState build_sequence(const std::vector<RecordPtr>& records, size_t count);

// Makes a token piece visible on screen: leading spaces become U+00B7 '·',
// a newline becomes U+21B5 '↵', a tab U+2192 '→', a carriage return "\r",
// other control characters (C0, DEL, C1) \xNN per byte. The rest passes
// through (display_piece has already escaped invalid UTF-8 as \xNN).
std::string visible_piece(const std::string& piece);
// The same for running text (a branch, a beam, a request in a panel): spaces
// stay spaces; the rest as visible_piece does. `text` is bytes as generated:
// bytes that are not complete UTF-8 become \xNN here too.
std::string visible_text(const std::string& text);

// The scene's colours, a value: the builders take it in their options and
// copy it into Scene::palette, so the overlay's legend, the renderer's
// background and the blocks all come from the one palette a scene was built
// with (no global to switch and restore).
struct Palette {
  glm::vec3 background;
  glm::vec3 prompt_token;
  glm::vec3 generated_token;
  glm::vec3 new_token;
  glm::vec3 cache_low, cache_high;  // K-norm gradient of held blocks
  glm::vec3 new_kv;
  glm::vec3 prefill;
  glm::vec3 refill;
  glm::vec3 recomputed;
  glm::vec3 empty;
  glm::vec3 ray;
  glm::vec3 head;
  glm::vec3 evicted;  // K/V evicted by the sliding window
  glm::vec3 sink;     // sink positions, kept forever
  glm::vec3 page;     // page frames
  glm::vec3 shared;   // pages shared by more than one sequence
};
// The default colours, or (true) a colour-blind-safe, projector-safe set.
const Palette& palette_for(bool colour_blind);

struct ViewOptions {
  int layer = -1;           // -1 = mean over layers
  int head = -1;            // -1 = mean over heads
  float min_weight = 0.0f;  // rays below this weight are not drawn
  bool rays = true;
  // Predict mode (the class guesses first): the newest step's chosen token(s)
  // are a grey "?" until revealed, and no label, tag or banner of any builder
  // (build_scene, build_beam_scene, build_spec_scene) names them or their
  // probability. The one place the scene learns it: every producer of
  // next-token text reads this flag.
  bool hide_newest = false;
  int label_rays = 3;  // the strongest rays get their weight written at the key (0 = none)
  // Level of detail (scene_lod.h): at most this many columns of stacks (0 =
  // one per position, however many), the newest `detail` positions one each.
  int max_columns = 160;
  int detail = 64;
  Palette palette = palette_for(false);
};

// World-space geometry, shared by the builder, the camera and the tests.
struct Layout {
  float pitch = 1.0f;        // x distance between positions
  float block_w = 0.78f;     // block width (x) and depth (z)
  float kv_h = 0.7f;         // tallest KV block (the layer's largest K norm)
  float kv_min_frac = 0.3f;  // smallest KV block, as a fraction of kv_h
  float layer_pitch = 0.9f;  // y distance between layers
  float token_gap = 0.4f;    // between the top of the stack and the token block
  float token_h = 0.9f;
  float head_z = 1.1f;       // write head a little in front of the row
  float head_lift = 2.7f;    // write head raised above the token row centre: the rays fan down from it
  float drop_height = 3.5f;  // where a new token starts its fall
  Columns columns;           // which column each position is drawn in (default: its own)

  float x(int pos) const { return columns.slot_of(pos) * pitch; }
  float kv_bottom(int layer) const { return static_cast<float>(layer) * layer_pitch; }
  float token_bottom(int n_layer) const {
    return static_cast<float>(n_layer) * layer_pitch - (layer_pitch - kv_h) + token_gap;
  }
  glm::vec3 token_center(int pos, int n_layer) const { return {x(pos), token_bottom(n_layer) + token_h * 0.5f, 0.0f}; }
  // Centre of a KV block of the given height.
  glm::vec3 kv_center(int pos, int layer, float height) const {
    return {x(pos), kv_bottom(layer) + height * 0.5f, 0.0f};
  }
  // Where rays land on position `pos`: the front face of the layer's block
  // (for the mean over layers, the block of the middle layer).
  glm::vec3 ray_target(int pos, int layer, int n_layer) const;
  // Grouped-query models split a KV block into n_kv_head sub-blocks side by
  // side: the x offset of sub-block g's centre from the block's, and its width.
  float kv_head_dx(int g, int n_kv_head) const {
    return (static_cast<float>(g) + 0.5f) * block_w / static_cast<float>(n_kv_head) - block_w * 0.5f;
  }
  float kv_head_w(int n_kv_head) const { return block_w / static_cast<float>(n_kv_head) * 0.82f; }
  glm::vec3 write_head(int slot, int n_layer) const {
    return {x(slot), token_bottom(n_layer) + token_h * 0.5f + head_lift, head_z};
  }
};

// What a block of Scene::cache_marks shows.
// kScore: eviction by score, the bar under a KV block whose length is the
// score its layer's rule ranks it by (relative to the layer's highest).
enum class CacheMark { kNone, kSinks, kWindow, kPage, kSharedPage, kScore };

struct BlockInstance {
  glm::vec3 center{0.0f};
  glm::vec3 size{1.0f};
  glm::vec4 colour{1.0f};  // rgb + fill: 1 = solid, 0 = outline only (an empty slot)
  float glow = 0;          // 0..1, added light (flashes, the newest token)
  int pos = -1;            // sequence position (-1 for markers); an aggregated column's first
  int span = 1;            // positions [pos, pos + span) shown by this block (> 1: an aggregated column)
  int layer = -1;          // KV layer, -1 for token blocks
  int kv_head = -1;        // grouped-query models: the K/V head of this sub-block; -1 = the whole row
  KvState state = KvState::kEmpty;
  float bands = 0;  // quantized rows: dark stripes across the block (f16 16, q8_0 8, q4_0 4: bits per value)
  CacheMark mark = CacheMark::kNone;
  double score = 0;  // kScore: the score itself (TOVA: weight; H2O: accumulated weight)
};

struct RayInstance {
  glm::vec3 from{0.0f}, to{0.0f};
  float weight = 0;        // the real attention weight (exact, unscaled)
  glm::vec4 colour{1.0f};  // alpha = animation fade
  int key = 0;             // the key position the ray lands on (an aggregated column's first)
  int span = 1;            // keys [key, key + span): weight is their summed attention
};

// How high a ray's arc bows per unit of its length (the renderer's default).
constexpr float kRayArc = 0.16f;
// The point at `t` along a ray's arc (0: the write head, 1: the key's
// block): the quadratic curve the rays' vertex shader draws (bowed up and
// towards the viewer's side of the row, `arc` per unit of length; up divided
// by the camera's vertical `stretch_y`), so tags can sit on their ray.
glm::vec3 ray_arc_point(const RayInstance& b, float t, float arc = kRayArc, float stretch_y = 1.0f);

enum class LabelKind { kToken, kLayer, kCaption, kHead, kRay, kCacheMark };

struct Label {
  glm::vec3 anchor{0.0f};
  std::string text;  // UTF-8, already made visible
  glm::vec4 colour{1.0f};
  LabelKind kind = LabelKind::kToken;
  int pos = -1;
  // Tags (kHead): drawn right of the anchor, centred on it vertically, rather
  // than above it (a ray's score beside its tip, clear of the tip's label).
  bool beside = false;
  // Tokens in a scene of several lanes (the beam tree): how far (world units
  // toward -z, the next lane) the label may reach before it would cover
  // another lane's blocks; 0 where nothing lies that way.
  float band = 0;
  // Captions (kCacheMark): the same facts in fewer characters ("p3 \u00d72"
  // for "page 3 \u00b7 shared \u00d72"), for a row with no room for the full
  // text; "" when the text has no shorter form. Drafted tokens' tags
  // (kHead): a wider, lower form of the text (fewer lines).
  std::string short_text;
};

struct Scene {
  Phase phase = Phase::kNone;
  std::string banner;      // e.g. "PREFILL", "DECODE · KV CACHE"
  std::string banner_sub;  // one line saying what happened in this step
  int seq_len = 0;         // positions with K/V computed by the shown step
  int slot = -1;           // write-head slot (= seq_len), -1 before the prefill
  int n_layer = 0;
  Columns columns;                     // positions [0, slot] in columns (scene_lod.h)
  std::vector<BlockInstance> tokens;   // one per column, the newest may be falling
  std::vector<BlockInstance> kv;       // (column, layer) for positions [0, slot]
  std::vector<BlockInstance> markers;  // the write head
  // The cache's layout on the ground and around the stacks: sink and window
  // bars, page frames (outlines) of a paged cache, shared pages highlighted.
  std::vector<BlockInstance> cache_marks;
  std::vector<RayInstance> rays;  // one per key position over min_weight
  std::vector<Label> labels;
  glm::vec3 bounds_min{0.0f}, bounds_max{0.0f};
  glm::vec3 head_pos{0.0f};
  // Speculative decoding's pieces on screen, for the legend: drafted tokens
  // in the draft's colour; rejected drafts and the K/V rolled back for them.
  bool drafts = false;
  bool rolled_back = false;
  // The chat view (scene_chat.h): token blocks tinted by role; the legend names the roles.
  bool chat = false;
  Palette palette = palette_for(false);  // the colours it was built with (the legend and background use them)
};

// The attention weight of the newest query row for key `key`, for a layer /
// head or the mean (-1) over them.
float attention_weight(const StepRecord& rec, int layer, int head, int key);

// Animation timing: `anim` runs from 0 (the record just arrived) to 1 (settled).
struct AnimTiming {
  static constexpr float kFlashEnd = 0.55f;   // compute flash fades by here
  static constexpr float kRayStart = 0.15f;   // rays fade in from here...
  static constexpr float kRayEnd = 0.5f;      // ...to here
  static constexpr float kDropStart = 0.45f;  // the new token starts falling
};

// The layer numbers L0.. left of the KV stacks, as every scene builder
// draws them; layer `highlighted` (-1: none) in the rays' colour.
void add_layer_labels(Scene& s, const Layout& L, int n_layer, int highlighted = -1);

// The scene for `seq` (as of its current record), animation phase in [0, 1].
Scene build_scene(const SequenceState& seq, const ViewOptions& view, float anim = 1.0f,
                  const Layout& layout = Layout());
// Convenience: from the first `count` records.
Scene build_scene(const std::vector<RecordPtr>& records, size_t count, const ViewOptions& view, float anim = 1.0f,
                  const Layout& layout = Layout());

// What is under a ray (for hover tooltips): the nearest block hit.
struct Pick {
  enum Kind { kNothing, kToken, kKv } kind = kNothing;
  int pos = -1;
  int span = 1;  // an aggregated column: positions [pos, pos + span)
  int layer = -1;
  int kv_head = -1;  // grouped-query models: the K/V head under the ray
  KvState state = KvState::kEmpty;
};
Pick pick(const Scene& scene, const glm::vec3& ray_origin, const glm::vec3& ray_dir);

}  // namespace kvscope
