#include "render/scene/scene.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "render/scene/scene_format.h"
#include "render/scene/scene_kv.h"

namespace kvscope {

const char* to_string(KvState s) {
  switch (s) {
    case KvState::kEmpty:
      return "empty";
    case KvState::kResident:
      return "resident";
    case KvState::kNew:
      return "new";
    case KvState::kPrefill:
      return "prefill";
    case KvState::kRefill:
      return "refill";
    case KvState::kRecomputed:
      return "recomputed";
    case KvState::kNewDropped:
      return "new_dropped";
    case KvState::kEvicting:
      return "evicting";
    case KvState::kEvicted:
      return "evicted";
  }
  return "?";
}

bool is_flash(KvState s) {
  return s == KvState::kNew || s == KvState::kPrefill || s == KvState::kRefill || s == KvState::kRecomputed ||
         s == KvState::kNewDropped || s == KvState::kEvicting;
}

bool is_held(KvState s) {
  return s == KvState::kResident || s == KvState::kNew || s == KvState::kPrefill || s == KvState::kRefill;
}

namespace {

// The weight of the `n` strongest rays, written where they land.
void label_strongest_rays(Scene& s, int n) {
  const Palette& pal = s.palette;
  std::vector<const RayInstance*> order;
  for (const RayInstance& b : s.rays) order.push_back(&b);
  const size_t k = std::min(order.size(), static_cast<size_t>(std::max(0, n)));
  std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                    [](const RayInstance* a, const RayInstance* b) { return a->weight > b->weight; });
  for (size_t i = 0; i < k; ++i) {
    Label lab;
    lab.kind = LabelKind::kRay;
    lab.pos = order[i]->key;
    char text[24];
    // An aggregated column's ray carries the sum over its keys.
    std::snprintf(text, sizeof(text), order[i]->span > 1 ? "\xCE\xA3 %.2f" : "%.2f",
                  static_cast<double>(order[i]->weight));
    lab.text = text;
    lab.anchor = order[i]->to + glm::vec3(0.0f, 0.0f, 0.45f);
    lab.colour = glm::vec4(pal.ray, 1.0f);
    s.labels.push_back(std::move(lab));
  }
}

}  // namespace

glm::vec3 ray_arc_point(const RayInstance& b, float t, float arc, float stretch_y) {
  const glm::vec3 mid = 0.5f * (b.from + b.to);
  const float len = glm::length(b.to - b.from);
  const glm::vec3 ctrl =
      mid + glm::vec3(0.0f, (arc * len * 0.5f + 0.2f) / std::max(stretch_y, 1e-3f), std::min(arc * len * 0.6f, 3.0f));
  const float s = 1.0f - t;
  return s * s * b.from + 2.0f * s * t * ctrl + t * t * b.to;
}

glm::vec3 Layout::ray_target(int pos, int layer, int n_layer) const {
  const int l = layer >= 0 ? layer : n_layer / 2;
  return {x(pos), kv_bottom(l) + kv_h * 0.5f, block_w * 0.5f};
}

float attention_weight(const StepRecord& rec, int layer, int head, int key) {
  if (rec.n_rows <= 0 || key < 0 || key >= rec.seq_len) return 0.0f;
  const int row = rec.n_rows - 1;  // the newest query position
  const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? rec.n_layer : layer + 1;
  const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? rec.n_head : head + 1;
  double sum = 0;
  for (int l = l0; l < l1; ++l)
    for (int h = h0; h < h1; ++h) sum += rec.attention(l, h, row, key);
  return static_cast<float>(sum / ((l1 - l0) * (h1 - h0)));
}

// ---------------------------------------------------------------------------
// The scene.

namespace {

float smoothstep(float e0, float e1, float x) {
  float t = std::clamp((x - e0) / (e1 - e0), 0.0f, 1.0f);
  return t * t * (3.0f - 2.0f * t);
}

float ease_out_cubic(float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  return 1.0f - (1.0f - t) * (1.0f - t) * (1.0f - t);
}

// What (pos, layer) holds after record r. Every layer holds the same
// positions except under eviction by score, where each layer has its own.
KvState kv_state(const SequenceState& seq, const StepRecord& r, int pos, int layer) {
  if (pos >= r.seq_len) return KvState::kEmpty;  // the newest token: computed next step
  const bool computed = pos >= r.first && pos < r.first + r.n_new;
  const bool again = computed && pos < r.first + r.recomputed;
  if (r.mode == CacheMode::kKV) {
    if (r.kv_layout.evicting() && evicted_from_cache(r, pos, layer))
      return seq.dropped_at_step(pos, layer) == r.index ? KvState::kEvicting : KvState::kEvicted;
    if (!r.kv_layout.evicting() && evicted_from_cache(r, pos)) {
      const bool now = static_cast<size_t>(pos) < seq.evicted_at.size() && seq.evicted_at[pos] == r.index;
      return now ? KvState::kEvicting : KvState::kEvicted;
    }
    // (a chat turn's prefill keeps what the cache held of earlier turns: resident, not computed)
    if (r.prefill) return pos < r.first ? KvState::kResident : KvState::kPrefill;
    if (again) return KvState::kRefill;
    if (computed) return KvState::kNew;
    return KvState::kResident;
  }
  if (again) return KvState::kRecomputed;
  if (computed) return KvState::kNewDropped;
  return KvState::kEmpty;
}

Phase phase_of(const StepRecord& r) {
  if (r.prefill) return Phase::kPrefill;
  if (r.mode == CacheMode::kNoCache) return Phase::kDecodeNoCache;
  if (r.refill) return Phase::kRefill;
  return Phase::kDecodeKV;
}

glm::vec4 with_fill(const glm::vec3& c, float fill) {
  return {c.x, c.y, c.z, fill};
}

}  // namespace

namespace {

// Eviction by score: what the forward read, and what each layer kept after it.
std::string evict_banner_sub(const StepRecord& r) {
  const KVLayout& lay = r.kv_layout;
  const int T = r.seq_len;
  const std::string rule = evict_name(lay.evict);
  const std::string read = r.prefill ? std::to_string(T) + " prompt positions computed in one pass"
                                     : "1 new position \xC2\xB7 reads " + std::to_string(lay.visible_count(T - 1) - 1) +
                                           " cached K/V rows per layer";
  const std::string dropped = std::to_string(r.evicted) + (r.evicted == 1 ? " row" : " rows");
  // SnapKV compresses the prompt once, per K/V head, and evicts nothing while decoding.
  if (lay.evict == KVEvict::kSnapKV)
    return r.prefill ? read + " \xC2\xB7 then each K/V head keeps " + std::to_string(lay.budget) +
                           " (SnapKV), dropped " + dropped + " of heads"
                     : "1 new position \xC2\xB7 each K/V head reads the rows it kept \xC2\xB7 SnapKV compressed the "
                       "prompt once: decoding drops nothing";
  return read + " \xC2\xB7 then each layer keeps " + std::to_string(lay.budget) + " (" + rule + "), dropped " + dropped;
}

void set_banner(Scene& s, const StepRecord& r) {
  const int T = r.seq_len;
  switch (s.phase) {
    case Phase::kPrefill:
      s.banner = "PREFILL";
      s.banner_sub = r.first > 0  // a chat turn: the cache kept the positions before `first`
                         ? std::to_string(T - r.first) + " new prompt positions computed in one pass \xC2\xB7 " +
                               std::to_string(r.first) + " reused from the KV cache"
                         : std::to_string(T) + " prompt positions computed in one parallel pass" +
                               (r.mode == CacheMode::kKV ? " \xC2\xB7 all kept in the KV cache"
                                                         : " \xC2\xB7 NO CACHE: nothing kept");
      break;
    case Phase::kDecodeKV:
      s.banner = "DECODE \xC2\xB7 KV CACHE";
      // A sliding window's query reads only the rows it can see, not every position so far.
      s.banner_sub = "1 new position computed \xC2\xB7 reads " + std::to_string(r.kv_layout.visible_count(T - 1) - 1) +
                     " cached K/V rows per layer";
      break;
    case Phase::kDecodeNoCache:
      s.banner = "DECODE \xC2\xB7 NO CACHE \xE2\x80\x94 recomputing " + std::to_string(r.recomputed) + " positions";
      s.banner_sub = "nothing is kept: all " + std::to_string(T) + " positions are computed again, then thrown away";
      break;
    case Phase::kRefill:
      s.banner = "REFILL \xC2\xB7 KV CACHE";
      s.banner_sub = "back to KV CACHE: the cache is rebuilt, " + std::to_string(T) + " positions in one pass";
      break;
    case Phase::kNone:
      break;
  }
  if (r.mode == CacheMode::kKV && r.kv_layout.evicting() && (s.phase == Phase::kPrefill || s.phase == Phase::kDecodeKV))
    s.banner_sub = evict_banner_sub(r);
}

// The state a column shows: its newest position's, or evicting when any of
// its positions is evicted by this step.
KvState column_state(const SequenceState& seq, const StepRecord& r, int p0, int p1, int layer) {
  for (int p = p0; p < p1 - 1; ++p)
    if (kv_state(seq, r, p, layer) == KvState::kEvicting) return KvState::kEvicting;
  return kv_state(seq, r, p1 - 1, layer);
}

// The column's K norm at `layer`: the mean over its positions that have one (-1: none).
float column_knorm(const SequenceState& seq, int p0, int p1, int layer) {
  double sum = 0;
  int n = 0;
  for (int p = p0; p < p1; ++p) {
    const float k = seq.knorm(p, layer);
    if (k < 0) continue;
    sum += k;
    ++n;
  }
  return n > 0 ? static_cast<float>(sum / n) : -1.0f;
}

// Colour, glow and size of a KV block in state `st`; `frac` is its K norm
// relative to the layer's largest (-1: unknown), `flash` the compute flash.
// `heat` (eviction by score; -1: none) colours a held block by the score its
// layer keeps it by, relative to the layer's highest, instead of by |K|.
void style_kv_block(BlockInstance& b, const Palette& pal, const Layout& L, KvState st, float frac, float flash,
                    float heat = -1.0f) {
  const float h = frac >= 0 ? L.kv_h * (L.kv_min_frac + (1.0f - L.kv_min_frac) * frac) : L.kv_h * 0.5f;
  const glm::vec3 held = heat >= 0 ? glm::mix(pal.cache_low, pal.ray, heat)
                                   : glm::mix(pal.cache_low, pal.cache_high, std::max(frac, 0.0f));
  const glm::vec3 centre = b.center;  // x and z of the column
  float y_shift = 0;
  b.size.y = h;
  switch (st) {
    case KvState::kResident:
      b.colour = with_fill(held, 1.0f);
      break;
    case KvState::kPrefill:
      b.colour = with_fill(glm::mix(held, pal.prefill, std::min(1.0f, 0.85f + flash)), 1.0f);
      b.glow = flash;
      break;
    case KvState::kRefill:
      b.colour = with_fill(glm::mix(held, pal.refill, std::min(1.0f, 0.45f + flash)), 1.0f);
      b.glow = flash;
      break;
    case KvState::kNew:
      b.colour = with_fill(glm::mix(held, pal.new_kv, std::min(1.0f, 0.7f + flash)), 1.0f);
      b.glow = 0.25f + 0.75f * flash;
      break;
    case KvState::kRecomputed:
      // Flashes solid, then fades to an outline: computed, then thrown away.
      b.colour = with_fill(pal.recomputed, 0.3f + 0.7f * flash);
      b.glow = 0.15f + 0.85f * flash;
      break;
    case KvState::kNewDropped:
      b.colour = with_fill(pal.new_kv, 0.3f + 0.7f * flash);
      b.glow = 0.15f + 0.85f * flash;
      break;
    case KvState::kEmpty:
      b.colour = with_fill(pal.empty, 0.0f);
      b.size.y = L.kv_h * 0.5f;
      b.bands = 0;
      break;
    case KvState::kEvicting:
      // Leaves the cache: turns red, sinks and shrinks to the evicted outline.
      // (it stays dimly filled for this step: evicted now, not earlier)
      b.colour = with_fill(glm::mix(pal.evicted, held, flash * 0.5f), 0.25f + 0.75f * flash);
      b.glow = 0.6f * flash;
      b.size.y = h * (0.5f + 0.5f * flash);
      y_shift = -0.15f * (1.0f - flash);
      break;
    case KvState::kEvicted:
      b.colour = with_fill(pal.evicted, 0.0f);
      b.size.y = h * 0.5f;
      y_shift = -0.15f;
      b.bands = 0;
      break;
  }
  b.center = L.kv_center(0, b.layer, b.size.y);
  b.center.x = centre.x;
  b.center.z = centre.z;
  b.center.y += y_shift;
}

// Eviction by score: a held block's score against its layer's highest, in
// [0, 1]; -1 for other layouts and for blocks the layer does not hold.
float score_heat(const StepRecord& r, int pos, int layer) {
  double score = 0;
  if (!r.kv_layout.evicting() || !held_score(r, pos, layer, &score)) return -1.0f;
  const double top = max_held_score(r, layer);
  return top > 0 ? static_cast<float>(std::clamp(score / top, 0.0, 1.0)) : 0.0f;
}

// One column of KV blocks (every layer; grouped-query models: one sub-block
// per K/V head, the one `read_head` reads standing out when a query head is chosen).
void add_kv_column(Scene& s, const SequenceState& seq, const StepRecord& r, const Layout& L, int col, int read_head,
                   bool head_chosen, float flash) {
  const Columns& cols = L.columns;
  const int p0 = cols.first(col), p1 = cols.end(col);
  const int G = seq.n_kv_head;
  const bool gqa = G > 1 && G < seq.n_head;
  for (int l = 0; l < seq.n_layer; ++l) {
    const KvState st = p1 - p0 == 1 ? kv_state(seq, r, p0, l) : column_state(seq, r, p0, p1, l);
    const float norm = p1 - p0 == 1 ? seq.knorm(p0, l) : column_knorm(seq, p0, p1, l);
    const float mx = seq.k_norm_max[l];
    BlockInstance b;
    b.pos = p0;
    b.span = p1 - p0;
    b.layer = l;
    b.state = st;
    b.center = {L.x(p0), 0.0f, 0.0f};
    b.size = {L.block_w, 0.0f, L.block_w};
    b.bands = kv_bands(r.kv_layout.dtype);
    style_kv_block(b, s.palette, L, st, (norm >= 0 && mx > 0) ? norm / mx : -1.0f, flash,
                   p1 - p0 == 1 ? score_heat(r, p0, l) : -1.0f);
    if (!gqa) {
      s.kv.push_back(b);
      continue;
    }
    for (int g = 0; g < G; ++g) {
      BlockInstance sub = b;
      sub.kv_head = g;
      sub.center.x += L.kv_head_dx(g, G);
      sub.size.x = L.kv_head_w(G);
      if (head_chosen && g != read_head) {
        sub.colour = glm::vec4(glm::vec3(sub.colour) * 0.45f, sub.colour.a);
        sub.glow = 0;
      }
      s.kv.push_back(sub);
    }
  }
}

// Token blocks, one per column; the newest travels from the write head to
// its slot. An aggregated column's block is lower and unlabelled, coloured by
// its share of prompt tokens.
void add_tokens(Scene& s, const SequenceState& seq, const ViewOptions& view, const Layout& L, float drop) {
  const Palette& pal = s.palette;
  const Columns& cols = L.columns;
  const int NL = seq.n_layer;
  for (int col = 0; col < cols.count(); ++col) {
    const int p0 = cols.first(col), p1 = cols.end(col);
    BlockInstance b;
    b.pos = p0;
    b.span = p1 - p0;
    b.center = L.token_center(p0, NL);
    b.size = {L.block_w, L.token_h, L.block_w};
    if (b.span > 1) {
      int n_prompt = 0;
      for (int p = p0; p < p1; ++p) n_prompt += seq.tokens[static_cast<size_t>(p)].prompt ? 1 : 0;
      const float f = static_cast<float>(n_prompt) / static_cast<float>(b.span);
      b.size.y = L.token_h * 0.45f;
      b.center.y = L.token_bottom(NL) + b.size.y * 0.5f;
      b.colour = with_fill(glm::mix(pal.generated_token, pal.prompt_token, f) * 0.8f, 1.0f);
      s.tokens.push_back(b);
      continue;
    }
    const int p = p0;
    const TokenInfo& t = seq.tokens[static_cast<size_t>(p)];
    glm::vec3 c = t.prompt ? pal.prompt_token : pal.generated_token;
    if (p == s.slot) {
      b.center = glm::mix(s.head_pos, b.center, drop);
      b.center.y += std::sin(drop * 3.14159265f) * 0.8f;
      b.size *= 0.35f + 0.65f * drop;
      c = pal.new_token;
      b.glow = 0.6f * (1.0f - drop) + 0.3f;
    }
    const bool hidden = p == s.slot && view.hide_newest;  // predict mode: the class guesses first
    if (hidden) c = pal.empty;
    b.colour = with_fill(c, 1.0f);
    s.tokens.push_back(b);

    Label lab;
    lab.kind = LabelKind::kToken;
    lab.pos = p;
    lab.text = hidden ? std::string("?") : visible_piece(t.piece);
    lab.anchor = {b.center.x, b.center.y + b.size.y * 0.5f + 0.12f, b.center.z};
    lab.colour = glm::vec4(
        p == s.slot ? pal.new_token : (t.prompt ? glm::vec3(0.70f, 0.76f, 0.88f) : glm::vec3(1.0f, 0.80f, 0.45f)),
        1.0f);
    s.labels.push_back(std::move(lab));
  }
  if (!cols.binned()) return;
  // What the aggregated columns are, over them.
  Label lab;
  lab.kind = LabelKind::kCacheMark;
  lab.pos = 0;
  lab.text = "positions 0\xE2\x80\x93" + std::to_string(cols.n_binned - 1) + ": " + std::to_string(cols.bin) +
             " per column \xC2\xB7 mean |K| \xC2\xB7 rays summed";
  lab.anchor = {0.5f * (L.x(0) + L.x(cols.n_binned - 1)), L.token_bottom(NL) + L.token_h + 0.5f, 0.0f};
  lab.colour = glm::vec4(0.75f, 0.8f, 0.9f, 1.0f);
  s.labels.push_back(std::move(lab));
}

// `hidden` (predict mode): the tag names neither the token nor its probability.
// A negative prob: the next token was not chosen by this step (a served
// request's prompt chunk that stops mid-prompt feeds its next prompt token).
void add_write_head(Scene& s, const StepRecord& r, const Layout& L, float flash, bool hidden) {
  const Palette& pal = s.palette;
  BlockInstance head;
  head.center = s.head_pos;
  head.size = glm::vec3(0.62f);
  head.colour = with_fill(pal.head, 1.0f);
  head.glow = 0.6f + 0.4f * flash;
  s.markers.push_back(head);
  BlockInstance plate;  // a flat marker on the ground under the slot
  plate.center = {L.x(s.slot), -0.04f, 0.0f};
  plate.size = {L.block_w * 1.15f, 0.05f, L.block_w * 1.15f};
  plate.colour = with_fill(pal.head, 1.0f);
  plate.glow = 0.4f;
  s.markers.push_back(plate);
  Label lab;
  lab.kind = LabelKind::kHead;
  lab.pos = s.slot;
  const std::string prob = r.prob < 0 ? std::string() : "  " + percent_text(r.prob, 0);
  lab.text = hidden ? std::string("next: ?") : "next: " + visible_piece(r.piece) + prob;
  lab.anchor = s.head_pos + glm::vec3(0.0f, 0.45f, 0.0f);
  lab.colour = glm::vec4(pal.head, 1.0f);
  s.labels.push_back(std::move(lab));
}

// Attention rays: the newest query reading every cached key of the chosen
// layer (the weight is the record's, unscaled; an aggregated column's ray
// carries the sum over its keys).
void add_rays(Scene& s, const StepRecord& r, const ViewOptions& view, const Layout& L, int n_layer, float read_dx,
              float fade) {
  const Palette& pal = s.palette;
  const Columns& cols = L.columns;
  const int T = r.seq_len;
  s.rays.reserve(static_cast<size_t>(std::min(T, cols.count())));
  for (int col = 0; col < cols.count(); ++col) {
    const int k0 = cols.first(col), k1 = std::min(cols.end(col), T);
    if (k0 >= T) break;
    double w = 0;
    for (int key = k0; key < k1; ++key) w += attention_weight(r, view.layer, view.head, key);
    if (static_cast<float>(w) < view.min_weight) continue;
    RayInstance b;
    b.from = s.head_pos;
    b.to = L.ray_target(k0, view.layer, n_layer);
    b.to.x += read_dx;  // grouped-query: lands on the K/V head it reads
    b.weight = static_cast<float>(w);
    b.colour = glm::vec4(pal.ray, fade);
    b.key = k0;
    b.span = k1 - k0;
    s.rays.push_back(b);
  }
  label_strongest_rays(s, view.label_rays);
}

// Row captions and layer numbers on the left.
void add_side_labels(Scene& s, const SequenceState& seq, const ViewOptions& view, const Layout& L, int read_head) {
  const int NL = seq.n_layer;
  const float left = L.x(0) - L.pitch * 0.9f;
  add_layer_labels(s, L, NL, view.layer);
  Label lab;
  lab.kind = LabelKind::kCaption;
  lab.text = "tokens";
  lab.anchor = {left, L.token_bottom(NL) + L.token_h * 0.5f, 0.0f};
  lab.colour = glm::vec4(0.75f, 0.8f, 0.9f, 1.0f);
  s.labels.push_back(lab);
  lab.text = "KV cache";
  lab.anchor = {left - L.pitch * 0.9f, (L.kv_bottom(NL - 1) + L.kv_h) * 0.5f, 0.0f};
  lab.pos = -2;
  s.labels.push_back(lab);
  const int G = seq.n_kv_head;
  if (G > 1 && G < seq.n_head) {
    // Grouped-query attention: which query heads share the K/V head shown.
    const int group = seq.n_head / G;
    lab.text = read_head >= 0 ? "K/V head " + std::to_string(read_head) + " \xE2\x86\x90 q heads " +
                                    std::to_string(read_head * group) + "\xE2\x80\x93" +
                                    std::to_string(read_head * group + group - 1)
                              : std::to_string(G) + " K/V heads \xC3\x97 " + std::to_string(group) + " q heads";
    lab.anchor.y -= L.layer_pitch * 0.6f;
    lab.pos = -3;
    s.labels.push_back(lab);
  }
}

}  // namespace

void add_layer_labels(Scene& s, const Layout& L, int n_layer, int highlighted) {
  const Palette& pal = s.palette;
  const float left = L.x(0) - L.pitch * 0.9f;
  for (int l = 0; l < n_layer; ++l) {
    Label lab;
    lab.kind = LabelKind::kLayer;
    lab.pos = l;
    lab.text = "L" + std::to_string(l);
    lab.anchor = {left, L.kv_bottom(l) + L.kv_h * 0.5f, 0.0f};
    lab.colour = glm::vec4(highlighted == l ? pal.ray : glm::vec3(0.6f, 0.65f, 0.75f), 1.0f);
    s.labels.push_back(std::move(lab));
  }
}

Scene build_scene(const SequenceState& seq, const ViewOptions& view_in, float anim, const Layout& layout) {
  // A layer/head the model does not have (e.g. after loading a smaller
  // model) falls back to the mean rather than reading past the record.
  ViewOptions view = view_in;
  if (view.layer >= seq.n_layer) view.layer = -1;
  if (view.head >= seq.n_head) view.head = -1;
  Scene s;
  s.palette = view.palette;
  s.n_layer = seq.n_layer;
  if (!seq.current) return s;
  const StepRecord& r = *seq.current;
  anim = std::clamp(anim, 0.0f, 1.0f);
  const int slot = r.seq_len;
  const int n_pos = std::min<int>(static_cast<int>(seq.tokens.size()), slot + 1);
  const int NL = seq.n_layer;
  Layout L = layout;
  L.columns = plan_columns(n_pos, view.max_columns, view.detail);
  s.columns = L.columns;
  s.seq_len = r.seq_len;
  s.slot = slot;
  s.phase = phase_of(r);
  set_banner(s, r);

  const float flash = 1.0f - smoothstep(0.0f, AnimTiming::kFlashEnd, anim);
  const float ray_fade = smoothstep(AnimTiming::kRayStart, AnimTiming::kRayEnd, anim);
  const float drop = ease_out_cubic((anim - AnimTiming::kDropStart) / (1.0f - AnimTiming::kDropStart));

  const int G = seq.n_kv_head;
  const bool gqa = G > 1 && G < seq.n_head;
  const int read_head = gqa && view.head >= 0 ? view.head / (seq.n_head / G) : -1;  // the K/V head view.head reads
  s.kv.reserve(static_cast<size_t>(L.columns.count()) * NL * (gqa ? G : 1));
  for (int col = 0; col < L.columns.count(); ++col) add_kv_column(s, seq, r, L, col, read_head, view.head >= 0, flash);
  add_cache_marks(s, seq, L, flash);

  s.head_pos = L.write_head(slot, NL);
  add_tokens(s, seq, view, L, drop);
  add_write_head(s, r, L, flash, view.hide_newest);
  if (view.rays && r.n_rows > 0)
    add_rays(s, r, view, L, NL, read_head >= 0 ? L.kv_head_dx(read_head, G) : 0.0f, ray_fade);
  add_side_labels(s, seq, view, L, read_head);

  const float left = L.x(0) - L.pitch * 0.9f;
  const float token_top = L.token_bottom(NL) + L.token_h;
  s.bounds_min = {left - L.pitch * 2.2f, -0.1f, -L.block_w};
  // Room above for the labels and the write head's caption.
  s.bounds_max = {L.x(slot) + L.pitch, std::max(token_top + 0.4f, s.head_pos.y + 1.0f),
                  s.cache_marks.empty() ? L.head_z + 0.3f : L.block_w * 0.5f + 1.6f};
  return s;
}

Scene build_scene(const std::vector<RecordPtr>& records, size_t count, const ViewOptions& view, float anim,
                  const Layout& layout) {
  return build_scene(build_sequence(records, count), view, anim, layout);
}

// ---------------------------------------------------------------------------
// Picking.

namespace {
bool ray_box(const glm::vec3& o, const glm::vec3& inv_d, const glm::vec3& bmin, const glm::vec3& bmax, float& t_hit) {
  float t0 = 0.0f, t1 = std::numeric_limits<float>::max();
  for (int a = 0; a < 3; ++a) {
    float ta = (bmin[a] - o[a]) * inv_d[a];
    float tb = (bmax[a] - o[a]) * inv_d[a];
    if (ta > tb) std::swap(ta, tb);
    t0 = std::max(t0, ta);
    t1 = std::min(t1, tb);
    if (t0 > t1) return false;
  }
  t_hit = t0;
  return true;
}
}  // namespace

Pick pick(const Scene& scene, const glm::vec3& o, const glm::vec3& d) {
  Pick best;
  float best_t = std::numeric_limits<float>::max();
  const glm::vec3 inv{1.0f / (d.x != 0 ? d.x : 1e-12f), 1.0f / (d.y != 0 ? d.y : 1e-12f),
                      1.0f / (d.z != 0 ? d.z : 1e-12f)};
  auto test = [&](const BlockInstance& b, Pick::Kind kind) {
    float t;
    if (ray_box(o, inv, b.center - b.size * 0.5f, b.center + b.size * 0.5f, t) && t < best_t) {
      best_t = t;
      best.kind = kind;
      best.pos = b.pos;
      best.span = b.span;
      best.layer = b.layer;
      best.kv_head = b.kv_head;
      best.state = b.state;
    }
  };
  for (const auto& b : scene.tokens) test(b, Pick::kToken);
  for (const auto& b : scene.kv) test(b, Pick::kKv);
  return best;
}

}  // namespace kvscope
