#include "scene.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "scene_kv.h"

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

// The weight of the `n` strongest beams, written where they land.
void label_strongest_beams(Scene& s, int n) {
  std::vector<const BeamInstance*> order;
  for (const BeamInstance& b : s.beams) order.push_back(&b);
  const size_t k = std::min(order.size(), static_cast<size_t>(std::max(0, n)));
  std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                    [](const BeamInstance* a, const BeamInstance* b) { return a->weight > b->weight; });
  for (size_t i = 0; i < k; ++i) {
    Label lab;
    lab.kind = LabelKind::kBeam;
    lab.pos = order[i]->key;
    char text[16];
    std::snprintf(text, sizeof(text), "%.2f", static_cast<double>(order[i]->weight));
    lab.text = text;
    lab.anchor = order[i]->to + glm::vec3(0.0f, 0.0f, 0.45f);
    lab.colour = glm::vec4(palette::kBeam, 1.0f);
    s.labels.push_back(std::move(lab));
  }
}

}  // namespace

glm::vec3 Layout::beam_target(int pos, int layer, int n_layer) const {
  const int l = layer >= 0 ? layer : n_layer / 2;
  return {x(pos), kv_bottom(l) + kv_h * 0.5f, block_w * 0.5f};
}

// ---------------------------------------------------------------------------
// The sequence state.

void append_record(SequenceState& seq, const RecordPtr& rec) {
  if (!rec) return;
  const StepRecord& r = *rec;
  if (r.prefill || seq.n_records == 0) {
    seq = SequenceState();
    seq.n_layer = r.n_layer;
    seq.n_head = r.n_head;
    seq.n_embd = r.n_embd;
    seq.n_kv_head = r.n_kv_head > 0 ? r.n_kv_head : r.n_head;
    seq.kv_dim = r.n_kv_head > 0 && r.head_dim > 0 ? r.n_kv_head * r.head_dim : r.n_embd;
    seq.n_prompt = r.n_prompt;
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
      TokenInfo t;
      t.id = r.prompt_tokens[i];
      t.piece = i < r.prompt_pieces.size() ? r.prompt_pieces[i] : std::string();
      t.prompt = true;
      seq.tokens.push_back(std::move(t));
    }
    seq.k_norm_max.assign(static_cast<size_t>(seq.n_layer), 0.0f);
  }
  // The chosen token lands at position seq_len; anything after it belongs to
  // another branch of history and is dropped.
  seq.tokens.resize(static_cast<size_t>(r.seq_len));
  TokenInfo t;
  t.id = r.token;
  t.piece = r.piece;
  t.prob = r.prob;
  t.chosen_at = r.index;
  seq.tokens.push_back(std::move(t));

  const size_t n_pos = seq.tokens.size();
  seq.k_norm.resize(n_pos * seq.n_layer, -1.0f);
  seq.v_norm.resize(n_pos * seq.n_layer, -1.0f);
  // The newest token has no K/V yet.
  for (int l = 0; l < seq.n_layer; ++l) {
    seq.k_norm[(n_pos - 1) * seq.n_layer + l] = -1.0f;
    seq.v_norm[(n_pos - 1) * seq.n_layer + l] = -1.0f;
  }
  // K/V rows written by this forward: positions [seq_len - n_kv, seq_len),
  // stored (layer, n_kv, n_kv_head * head_dim); GPT-2's are n_embd wide.
  const int d = r.n_kv_head > 0 && r.head_dim > 0 ? r.n_kv_head * r.head_dim : r.n_embd;
  if (r.k.size() >= static_cast<size_t>(r.n_layer) * r.n_kv * d &&
      r.v.size() >= static_cast<size_t>(r.n_layer) * r.n_kv * d) {
    for (int l = 0; l < r.n_layer && l < seq.n_layer; ++l) {
      for (int i = 0; i < r.n_kv; ++i) {
        const int pos = r.seq_len - r.n_kv + i;
        if (pos < 0 || static_cast<size_t>(pos) >= n_pos) continue;
        const float* k = &r.k[(static_cast<size_t>(l) * r.n_kv + i) * d];
        const float* v = &r.v[(static_cast<size_t>(l) * r.n_kv + i) * d];
        double sk = 0, sv = 0;
        for (int e = 0; e < d; ++e) {
          sk += static_cast<double>(k[e]) * k[e];
          sv += static_cast<double>(v[e]) * v[e];
        }
        const float nk = static_cast<float>(std::sqrt(sk));
        seq.k_norm[static_cast<size_t>(pos) * seq.n_layer + l] = nk;
        seq.v_norm[static_cast<size_t>(pos) * seq.n_layer + l] = static_cast<float>(std::sqrt(sv));
        seq.k_norm_max[l] = std::max(seq.k_norm_max[l], nk);
      }
    }
  }
  append_cache_state(seq, r);
  seq.current = rec;
  seq.n_records++;
}

const float* SequenceState::quant_error(int pos, int layer) const {
  const size_t i = (static_cast<size_t>(pos) * n_layer + layer) * 4;
  if (pos < 0 || layer < 0 || layer >= n_layer || i + 4 > qerr.size() || qerr[i] < 0) return nullptr;
  return &qerr[i];
}

SequenceState build_sequence(const std::vector<RecordPtr>& records, size_t count) {
  SequenceState seq;
  count = std::min(count, records.size());
  for (size_t i = 0; i < count; ++i) append_record(seq, records[i]);
  return seq;
}

std::string visible_piece(const std::string& piece) {
  auto hex = [](unsigned char b) {
    static const char* digits = "0123456789abcdef";
    return std::string{'\\', 'x', digits[b >> 4], digits[b & 15]};
  };
  std::string out;
  size_t i = 0;
  for (; i < piece.size() && piece[i] == ' '; ++i) out += "\xC2\xB7";  // U+00B7
  for (; i < piece.size(); ++i) {
    const char c = piece[i];
    if (c == '\n') {
      out += "\xE2\x86\xB5";  // U+21B5
    } else if (c == '\t') {
      out += "\xE2\x86\x92";  // U+2192
    } else if (c == '\r') {
      out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += hex(static_cast<unsigned char>(c));  // no glyph: the font would draw U+FFFD
    } else if (static_cast<unsigned char>(c) == 0xc2 && i + 1 < piece.size() &&
               static_cast<unsigned char>(piece[i + 1]) >= 0x80 && static_cast<unsigned char>(piece[i + 1]) < 0xa0) {
      // C1 controls (U+0080..U+009F, e.g. NEL) likewise, as their two UTF-8 bytes.
      out += hex(0xc2) + hex(static_cast<unsigned char>(piece[++i]));
    } else {
      out += c;
    }
  }
  return out;
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

KvState kv_state(const SequenceState& seq, const StepRecord& r, int pos) {
  if (pos >= r.seq_len) return KvState::kEmpty;  // the newest token: computed next step
  const bool computed = pos >= r.first && pos < r.first + r.n_new;
  const bool again = computed && pos < r.first + r.recomputed;
  if (r.mode == CacheMode::kKV) {
    if (evicted_from_cache(r, pos)) {
      const bool now = static_cast<size_t>(pos) < seq.evicted_at.size() && seq.evicted_at[pos] == r.index;
      return now ? KvState::kEvicting : KvState::kEvicted;
    }
    if (r.prefill) return KvState::kPrefill;
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

Scene build_scene(const SequenceState& seq, const ViewOptions& view_in, float anim, const Layout& L) {
  // A layer/head the model does not have (e.g. after loading a smaller
  // model) falls back to the mean rather than reading past the record.
  ViewOptions view = view_in;
  if (view.layer >= seq.n_layer) view.layer = -1;
  if (view.head >= seq.n_head) view.head = -1;
  Scene s;
  s.n_layer = seq.n_layer;
  if (!seq.current) return s;
  const StepRecord& r = *seq.current;
  anim = std::clamp(anim, 0.0f, 1.0f);
  const int T = r.seq_len;
  const int slot = T;
  const int n_pos = std::min<int>(static_cast<int>(seq.tokens.size()), slot + 1);
  const int NL = seq.n_layer;
  s.seq_len = T;
  s.slot = slot;
  s.phase = phase_of(r);

  const float flash = 1.0f - smoothstep(0.0f, AnimTiming::kFlashEnd, anim);
  const float beam_fade = smoothstep(AnimTiming::kBeamStart, AnimTiming::kBeamEnd, anim);
  const float drop = ease_out_cubic((anim - AnimTiming::kDropStart) / (1.0f - AnimTiming::kDropStart));

  switch (s.phase) {
    case Phase::kPrefill:
      s.banner = "PREFILL";
      s.banner_sub =
          std::to_string(T) + " prompt positions computed in one parallel pass" +
          (r.mode == CacheMode::kKV ? " \xC2\xB7 all kept in the KV cache" : " \xC2\xB7 NO CACHE: nothing kept");
      break;
    case Phase::kDecodeKV:
      s.banner = "DECODE \xC2\xB7 KV CACHE";
      s.banner_sub = "1 new position computed \xC2\xB7 reads " + std::to_string(T - 1) + " cached K/V rows per layer";
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

  // KV stacks.
  const int G = seq.n_kv_head;
  const bool gqa = G > 1 && G < seq.n_head;
  const int read_head = gqa && view.head >= 0 ? view.head / (seq.n_head / G) : -1;  // the K/V head view.head reads
  s.kv.reserve(static_cast<size_t>(n_pos) * NL * (gqa ? G : 1));
  for (int p = 0; p < n_pos; ++p) {
    const KvState st = kv_state(seq, r, p);
    for (int l = 0; l < NL; ++l) {
      const float norm = seq.knorm(p, l);
      const float mx = seq.k_norm_max[l];
      const float frac = (norm >= 0 && mx > 0) ? norm / mx : -1.0f;
      const float h = frac >= 0 ? L.kv_h * (L.kv_min_frac + (1.0f - L.kv_min_frac) * frac) : L.kv_h * 0.5f;
      const glm::vec3 held = glm::mix(palette::kCacheLow, palette::kCacheHigh, std::max(frac, 0.0f));
      BlockInstance b;
      b.pos = p;
      b.layer = l;
      b.state = st;
      b.center = L.kv_center(p, l, h);
      b.size = {L.block_w, h, L.block_w};
      b.bands = kv_bands(r.kv_layout.dtype);
      switch (st) {
        case KvState::kResident:
          b.colour = with_fill(held, 1.0f);
          break;
        case KvState::kPrefill:
          b.colour = with_fill(glm::mix(held, palette::kPrefill, std::min(1.0f, 0.85f + flash)), 1.0f);
          b.glow = flash;
          break;
        case KvState::kRefill:
          b.colour = with_fill(glm::mix(held, palette::kRefill, std::min(1.0f, 0.45f + flash)), 1.0f);
          b.glow = flash;
          break;
        case KvState::kNew:
          b.colour = with_fill(glm::mix(held, palette::kNewKV, std::min(1.0f, 0.7f + flash)), 1.0f);
          b.glow = 0.25f + 0.75f * flash;
          break;
        case KvState::kRecomputed:
          // Flashes solid, then fades to an outline: computed, then thrown away.
          b.colour = with_fill(palette::kRecomputed, 0.3f + 0.7f * flash);
          b.glow = 0.15f + 0.85f * flash;
          break;
        case KvState::kNewDropped:
          b.colour = with_fill(palette::kNewKV, 0.3f + 0.7f * flash);
          b.glow = 0.15f + 0.85f * flash;
          break;
        case KvState::kEmpty:
          b.colour = with_fill(palette::kEmpty, 0.0f);
          b.size.y = L.kv_h * 0.5f;
          b.center = L.kv_center(p, l, b.size.y);
          b.bands = 0;
          break;
        case KvState::kEvicting:
          // Leaves the cache: turns red, sinks and shrinks to the evicted outline.
          // (it stays dimly filled for this step: evicted now, not earlier)
          b.colour = with_fill(glm::mix(palette::kEvicted, held, flash * 0.5f), 0.25f + 0.75f * flash);
          b.glow = 0.6f * flash;
          b.size.y = h * (0.5f + 0.5f * flash);
          b.center = L.kv_center(p, l, b.size.y);
          b.center.y -= 0.15f * (1.0f - flash);
          break;
        case KvState::kEvicted:
          b.colour = with_fill(palette::kEvicted, 0.0f);
          b.size.y = h * 0.5f;
          b.center = L.kv_center(p, l, b.size.y);
          b.center.y -= 0.15f;
          b.bands = 0;
          break;
      }
      if (!gqa) {
        s.kv.push_back(b);
        continue;
      }
      // Grouped-query attention: one sub-block per K/V head; with a query head
      // chosen, the K/V head it reads stands out and the others dim.
      for (int g = 0; g < G; ++g) {
        BlockInstance sub = b;
        sub.kv_head = g;
        sub.center.x += L.kv_head_dx(g, G);
        sub.size.x = L.kv_head_w(G);
        if (view.head >= 0 && g != read_head) {
          sub.colour = glm::vec4(glm::vec3(sub.colour) * 0.45f, sub.colour.a);
          sub.glow = 0;
        }
        s.kv.push_back(sub);
      }
    }
  }

  add_cache_marks(s, seq, L, flash);

  // Token blocks; the newest one travels from the write head to its slot.
  s.head_pos = L.write_head(slot, NL);
  const float token_top = L.token_bottom(NL) + L.token_h;
  s.tokens.reserve(static_cast<size_t>(n_pos));
  for (int p = 0; p < n_pos; ++p) {
    const TokenInfo& t = seq.tokens[p];
    BlockInstance b;
    b.pos = p;
    b.center = L.token_center(p, NL);
    b.size = {L.block_w, L.token_h, L.block_w};
    glm::vec3 c = t.prompt ? palette::kPromptToken : palette::kGeneratedToken;
    if (p == slot) {
      const glm::vec3 from = s.head_pos;
      b.center = glm::mix(from, b.center, drop);
      b.center.y += std::sin(drop * 3.14159265f) * 0.8f;
      b.size *= 0.35f + 0.65f * drop;
      c = palette::kNewToken;
      b.glow = 0.6f * (1.0f - drop) + 0.3f;
    }
    const bool hidden = p == slot && view.hide_newest;  // predict mode: the class guesses first
    if (hidden) c = palette::kEmpty;
    b.colour = with_fill(c, 1.0f);
    s.tokens.push_back(b);

    Label lab;
    lab.kind = LabelKind::kToken;
    lab.pos = p;
    lab.text = hidden ? std::string("?") : visible_piece(t.piece);
    lab.anchor = {b.center.x, b.center.y + b.size.y * 0.5f + 0.12f, b.center.z};
    lab.colour = glm::vec4(
        p == slot ? palette::kNewToken : (t.prompt ? glm::vec3(0.70f, 0.76f, 0.88f) : glm::vec3(1.0f, 0.80f, 0.45f)),
        1.0f);
    s.labels.push_back(std::move(lab));
  }

  // The write head and the slot it writes to.
  {
    BlockInstance head;
    head.center = s.head_pos;
    head.size = glm::vec3(0.62f);
    head.colour = with_fill(palette::kHead, 1.0f);
    head.glow = 0.6f + 0.4f * flash;
    s.markers.push_back(head);
    BlockInstance plate;  // a flat marker on the ground under the slot
    plate.center = {L.x(slot), -0.04f, 0.0f};
    plate.size = {L.block_w * 1.15f, 0.05f, L.block_w * 1.15f};
    plate.colour = with_fill(palette::kHead, 1.0f);
    plate.glow = 0.4f;
    s.markers.push_back(plate);
    Label lab;
    lab.kind = LabelKind::kHead;
    lab.pos = slot;
    char prob[32];
    std::snprintf(prob, sizeof(prob), "  %.0f%%", static_cast<double>(r.prob) * 100.0);
    lab.text = "next: " + visible_piece(r.piece) + prob;
    lab.anchor = s.head_pos + glm::vec3(0.0f, 0.45f, 0.0f);
    lab.colour = glm::vec4(palette::kHead, 1.0f);
    s.labels.push_back(std::move(lab));
  }

  // Attention beams: the newest query reading every cached key of the chosen
  // layer (the weight is the record's, unscaled).
  if (view.beams && r.n_rows > 0) {
    s.beams.reserve(static_cast<size_t>(T));
    for (int key = 0; key < T; ++key) {
      const float w = attention_weight(r, view.layer, view.head, key);
      if (w < view.min_weight) continue;
      BeamInstance b;
      b.from = s.head_pos;
      b.to = L.beam_target(key, view.layer, NL);
      if (read_head >= 0) b.to.x += L.kv_head_dx(read_head, G);  // lands on the K/V head it reads
      b.weight = w;
      b.colour = glm::vec4(palette::kBeam, beam_fade);
      b.key = key;
      s.beams.push_back(b);
    }
    label_strongest_beams(s, view.label_beams);
  }

  // Row captions and layer numbers on the left.
  const float left = L.x(0) - L.pitch * 0.9f;
  for (int l = 0; l < NL; ++l) {
    Label lab;
    lab.kind = LabelKind::kLayer;
    lab.pos = l;
    lab.text = "L" + std::to_string(l);
    lab.anchor = {left, L.kv_bottom(l) + L.kv_h * 0.5f, 0.0f};
    lab.colour = glm::vec4(view.layer == l ? palette::kBeam : glm::vec3(0.6f, 0.65f, 0.75f), 1.0f);
    s.labels.push_back(std::move(lab));
  }
  {
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
    if (gqa) {
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
