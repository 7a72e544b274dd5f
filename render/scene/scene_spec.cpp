#include "render/scene/scene_spec.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/decoding/speculative_accept.h"

namespace kvscope {

const glm::vec3 kDraftColour{0.62f, 0.45f, 1.00f};

namespace {

float clamp01(float x) {
  return std::clamp(x, 0.0f, 1.0f);
}

std::string fmt2(const char* f, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

BlockInstance token_block(const Layout& L, int pos, int n_layer, const glm::vec3& c, float fill) {
  BlockInstance b;
  b.pos = pos;
  b.center = L.token_center(pos, n_layer);
  b.size = {L.block_w, L.token_h, L.block_w};
  b.colour = glm::vec4(c, fill);
  return b;
}

Label piece_label(const BlockInstance& b, const std::string& text, const glm::vec3& c, float a) {
  Label lab;
  lab.kind = LabelKind::kToken;
  lab.pos = b.pos;
  lab.text = visible_piece(text);
  lab.anchor = b.center + glm::vec3(0.0f, b.size.y * 0.5f + 0.12f, 0.0f);
  lab.colour = glm::vec4(c, a);
  return lab;
}

}  // namespace

float spec_stage_anim(int stage) {
  switch (stage) {
    case 0:
      return 0.3f;  // every ghost up (they appear over [0, kDraftEnd))
    case 1:
      return 0.5f;
    default:
      return 1.0f;
  }
}

namespace {

// Where the shown iteration is in its three stages (SpecTiming).
struct SpecStages {
  float draft_t, verify_t, resolve_t;  // each stage's progress, 0..1
  bool verifying, resolved;            // the verify stage has begun; the verdict is in
};

SpecStages spec_stages(float anim) {
  SpecStages st;
  st.draft_t = clamp01(anim / SpecTiming::kDraftEnd);
  st.verify_t = clamp01((anim - SpecTiming::kDraftEnd) / (SpecTiming::kVerifyEnd - SpecTiming::kDraftEnd));
  st.resolve_t = clamp01((anim - SpecTiming::kVerifyEnd) / (1.0f - SpecTiming::kVerifyEnd));
  st.verifying = anim >= SpecTiming::kDraftEnd;
  st.resolved = anim >= SpecTiming::kVerifyEnd;
  return st;
}

// K/V stacks: cached before the iteration [0, first - 1); the verify
// forward computes [first - 1, first + k); rejected positions roll back.
void add_spec_kv(Scene& s, const SpecIteration& it, const SpecStages& st, const Layout& L) {
  const Palette& pal = s.palette;
  const int first = it.first, NL = it.n_target_layers;
  const int kept = first + it.n_accepted;  // cached positions after the rollback: [0, kept)
  const int computed_end = st.verifying ? first + it.k : first - 1;
  for (int p = 0; p < computed_end; ++p) {
    const bool fresh = p >= first - 1;
    const bool rolled = st.resolved && p >= kept;
    for (int l = 0; l < NL; ++l) {
      BlockInstance b;
      b.pos = p;
      b.layer = l;
      const float h = L.kv_h * 0.8f;
      b.center = L.kv_center(p, l, h);
      b.size = {L.block_w, h, L.block_w};
      if (rolled) {
        b.state = KvState::kNewDropped;
        b.colour = glm::vec4(pal.recomputed, 0.9f * (1.0f - st.resolve_t));
        b.glow = 0.5f * (1.0f - st.resolve_t);
      } else if (fresh) {
        b.state = KvState::kNew;
        b.colour = glm::vec4(pal.new_kv, 1.0f);
        b.glow = st.resolved ? 0.2f : 0.3f + 0.7f * (1.0f - st.verify_t);
      } else {
        b.state = KvState::kResident;
        b.colour = glm::vec4(glm::mix(pal.cache_low, pal.cache_high, 0.6f), 1.0f);
      }
      s.kv.push_back(b);
    }
  }
}

// The committed tokens [0, it.first): the prompt, then what earlier iterations emitted.
void add_committed_tokens(Scene& s, const std::vector<SpecIterationPtr>& its, size_t count, const Layout& L) {
  const Palette& pal = s.palette;
  const SpecIteration& it = *its[count - 1];
  std::vector<std::string> pieces = its[0]->prompt_pieces;
  const int P = static_cast<int>(pieces.size());
  for (size_t i = 0; i + 1 < count; ++i)
    for (const std::string& p : its[i]->emitted_pieces) pieces.push_back(p);
  for (int p = 0; p < it.first; ++p) {
    const BlockInstance b = token_block(L, p, it.n_target_layers, p < P ? pal.prompt_token : pal.generated_token, 1.0f);
    s.tokens.push_back(b);
    s.labels.push_back(piece_label(b, pieces[static_cast<size_t>(p)],
                                   p < P ? glm::vec3(0.70f, 0.76f, 0.88f) : glm::vec3(1.0f, 0.80f, 0.45f), 1.0f));
  }
}

// Drafted token i's tag, which is also its label: the token, then q while
// drafting, p and q once verified, then the verdict. Short lines (the token
// over p over q over the verdict): narrow enough to sit over their own
// token; the overlay lifts one that would still cover a neighbour's, or
// takes the wide form (short_text). One
// box for the token and its numbers, so a large text scale cannot hide the
// token under its own numbers. `a`: the token's opacity as it falls away.
Label draft_tag(const SpecIteration& it, int i, const SpecStages& st, bool accepted, bool rejected, float a,
                const Layout& L, const Palette& pal) {
  const DraftVerdict& d = it.drafted[static_cast<size_t>(i)];
  const bool tested = d.r >= 0;
  Label pq;
  pq.kind = LabelKind::kHead;
  pq.pos = it.first + i;
  const char* verdict = !st.resolved ? "" : (d.r < 0 ? "\nuntested" : (d.accepted ? "\nok" : "\nno"));
  const std::string piece = visible_piece(it.drafted_pieces[static_cast<size_t>(i)]);
  pq.text = piece + "\n" + (st.verifying ? fmt2("p %.2f\nq %.2f", d.p, d.q) : fmt2("q %.2f", d.q, 0.0)) + verdict;
  // Its wide form, two lines (the token and its verdict over p and q), for
  // the overlay where the tall one would have to shrink (little room above
  // the row at a large text scale).
  pq.short_text = piece + (verdict[0] ? std::string("  ") + (verdict + 1) : std::string()) + "\n" +
                  (st.verifying ? fmt2("p %.2f q %.2f", d.p, d.q) : fmt2("q %.2f", d.q, 0.0));
  pq.anchor = L.token_center(pq.pos, it.n_target_layers) + glm::vec3(0.0f, L.token_h * 0.5f + 0.12f, 0.0f);
  // The verdict of the tested, rejected token stays readable after it fell.
  pq.colour =
      glm::vec4(accepted ? pal.new_kv : (rejected ? pal.recomputed : kDraftColour), rejected && tested ? 1.0f : a);
  return pq;
}

// Drafted tokens: ghosts, then solid (accepted) or falling (rejected).
void add_drafted_tokens(Scene& s, const SpecIteration& it, const SpecStages& st, const Layout& L) {
  const Palette& pal = s.palette;
  const int k = it.k;
  for (int i = 0; i < k; ++i) {
    const float appear = clamp01(st.draft_t * static_cast<float>(k) - static_cast<float>(i));
    if (appear <= 0) continue;
    const DraftVerdict& d = it.drafted[static_cast<size_t>(i)];
    BlockInstance b = token_block(L, it.first + i, it.n_target_layers, kDraftColour, 0.45f);
    b.glow = 0.3f;
    b.size *= 0.5f + 0.5f * appear;
    const bool accepted = st.resolved && d.accepted && i < it.n_accepted;
    const bool rejected = st.resolved && !accepted;
    if (accepted) {
      b.colour = glm::vec4(glm::mix(kDraftColour, pal.generated_token, st.resolve_t), 1.0f);
      b.glow = 0.3f * (1.0f - st.resolve_t);
    } else if (rejected) {
      b.center.y -= 2.5f * st.resolve_t * st.resolve_t;
      b.colour = glm::vec4(pal.recomputed, 0.45f * (1.0f - st.resolve_t));
    }
    s.tokens.push_back(b);
    s.drafts = true;
    s.rolled_back |= rejected;
    const float a = rejected ? 1.0f - st.resolve_t : 1.0f;
    if (rejected && d.r < 0 && a <= 0.05f) continue;  // gone, and never tested: nothing to say
    s.labels.push_back(draft_tag(it, i, st, accepted, rejected, a, L, s.palette));
  }
}

// The replacement or bonus token drops in.
void add_next_token(Scene& s, const SpecIteration& it, const SpecStages& st, const Layout& L) {
  const Palette& pal = s.palette;
  if (!st.resolved) return;
  BlockInstance b = token_block(L, it.first + it.n_accepted, it.n_target_layers, pal.new_token, 1.0f);
  const glm::vec3 to = b.center;
  b.center = glm::mix(to + glm::vec3(0.0f, L.drop_height, L.head_z), to, st.resolve_t);
  b.glow = 0.5f;
  if (!it.bonus) b.center.z += 0.001f;  // drawn over the falling rejected ghost
  s.tokens.push_back(b);
  s.labels.push_back(piece_label(b, it.next_piece, pal.new_token, 1.0f));
}

// The banner: which stage, and what it costs or gained.
void set_spec_banner(Scene& s, const SpecIteration& it, const SpecStages& st) {
  const int k = it.k;
  const double alpha = measured_rate(it.accepted_total, it.drafted_total);  // NaN: "n/a" (nothing drafted yet)
  s.phase = st.resolved ? Phase::kDecodeKV : (st.verifying ? Phase::kPrefill : Phase::kNone);
  s.banner = "SPECULATIVE DECODING \xC2\xB7 iteration " + std::to_string(it.index);
  if (it.draft_context_full && !st.resolved) {
    s.banner_sub = "the draft's context is shorter than the text: nothing drafted, the target decodes alone";
  } else if (!st.verifying) {
    s.banner_sub = "the draft proposes " + std::to_string(k) + " tokens, one small forward each";
  } else if (!st.resolved) {
    s.banner_sub = "the target checks all " + std::to_string(k) + " drafted tokens in ONE forward over " +
                   std::to_string(it.target_positions) + " positions";
  } else {
    s.banner_sub = std::to_string(it.n_accepted) + " of " + std::to_string(k) + " accepted" +
                   // The emitted token by name: the replacement drops in under the
                   // rejected token's tag, which covers its label.
                   (it.bonus ? ", bonus token " + visible_piece(it.next_piece)
                             : ", replaced by " + visible_piece(it.next_piece) + ", " +
                                   std::to_string(it.target_rolled_back) + " K/V rows rolled back") +
                   " \xC2\xB7 \xCE\xB1 = " + rate_text(alpha, 2) + " \xC2\xB7 target forwards " +
                   std::to_string(it.target_forwards) + " for " + std::to_string(it.generated) + " tokens (" +
                   std::to_string(std::max(0, it.generated - it.target_forwards)) + " saved)";
  }
}

}  // namespace

Scene build_spec_scene(const std::vector<SpecIterationPtr>& its, size_t count, float anim, const ViewOptions& view,
                       const Layout& L) {
  Scene s;
  s.palette = view.palette;
  count = std::min(count, its.size());
  if (count == 0) return s;
  const SpecIteration& it = *its[count - 1];
  const int NL = it.n_target_layers;
  s.n_layer = NL;
  // (predict mode: held just before the target's verify forward)
  const SpecStages st =
      spec_stages(view.hide_newest ? std::min(clamp01(anim), SpecTiming::kDraftEnd * 0.999f) : clamp01(anim));
  add_spec_kv(s, it, st, L);
  add_committed_tokens(s, its, count, L);
  add_drafted_tokens(s, it, st, L);
  add_next_token(s, it, st, L);
  set_spec_banner(s, it, st);
  const int first = it.first;  // = the committed pieces
  s.seq_len = first;
  s.slot = first + it.n_accepted;
  s.head_pos = L.write_head(first, NL);
  add_layer_labels(s, L, NL);
  const float left = L.x(0) - L.pitch * 0.9f;
  s.bounds_min = {left - L.pitch * 1.5f, -0.6f, -L.block_w};
  // Room above the tokens for the drafted tokens' p / q tags.
  s.bounds_max = {L.x(first + it.k) + L.pitch, L.token_bottom(NL) + L.token_h + (it.k > 0 ? 1.6f : 0.6f),
                  L.block_w + 0.5f};
  return s;
}

}  // namespace kvscope
