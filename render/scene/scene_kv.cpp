#include "render/scene/scene_kv.h"

#include <algorithm>

namespace kvscope {

bool evicted_from_cache(const StepRecord& r, int pos, int layer) {
  const KVLayout& lay = r.kv_layout;
  if (r.mode != CacheMode::kKV || !(lay.windowed() || lay.evicting()) || pos < 0 || pos >= r.seq_len) return false;
  if (lay.evicting() && layer >= 0) {
    if (static_cast<size_t>(layer) >= r.kv_held_by_layer.size()) return false;  // not recorded: nothing to say
    const std::vector<int>& h = r.kv_held_by_layer[static_cast<size_t>(layer)];
    return !std::binary_search(h.begin(), h.end(), pos);
  }
  return !r.kv_held.contains(pos);
}

bool held_score(const StepCache& r, int pos, int layer, double* score) {
  if (layer < 0 || static_cast<size_t>(layer) >= r.kv_held_by_layer.size() ||
      static_cast<size_t>(layer) >= r.kv_score_by_layer.size())
    return false;
  const std::vector<int>& h = r.kv_held_by_layer[static_cast<size_t>(layer)];
  const std::vector<double>& sc = r.kv_score_by_layer[static_cast<size_t>(layer)];
  const auto it = std::lower_bound(h.begin(), h.end(), pos);
  if (it == h.end() || *it != pos || sc.size() != h.size()) return false;
  *score = sc[static_cast<size_t>(it - h.begin())];
  return true;
}

double max_held_score(const StepCache& r, int layer) {
  if (layer < 0 || static_cast<size_t>(layer) >= r.kv_score_by_layer.size()) return 0;
  const std::vector<double>& sc = r.kv_score_by_layer[static_cast<size_t>(layer)];
  return sc.empty() ? 0.0 : *std::max_element(sc.begin(), sc.end());
}

float kv_bands(KVDtype d) {
  switch (d) {
    case KVDtype::kF32:
      return 0;
    case KVDtype::kF16:
      return 16;
    case KVDtype::kQ8_0:
      return 8;
    case KVDtype::kQ4_0:
      return 4;
  }
  return 0;
}

namespace {

// Eviction by score: which record dropped each (position, layer), and the
// score it was dropped with (kv_dropped_by_layer; -1 where the record lacks it).
void append_dropped(SequenceState& seq, const StepRecord& r) {
  const size_t n_pos = seq.tokens.size();
  const int L = seq.n_layer;
  seq.dropped_at.resize(n_pos * L, -1);
  seq.dropped_score.resize(n_pos * L, -1.0);
  auto at = [&](int p, int l) { return static_cast<size_t>(p) * L + l; };
  // The newest token and the positions this forward computes start over (held).
  for (int l = 0; l < L; ++l) seq.dropped_at[at(static_cast<int>(n_pos) - 1, l)] = -1;
  for (int p = std::max(0, r.first); p < r.first + r.n_new && static_cast<size_t>(p) < n_pos; ++p)
    for (int l = 0; l < L; ++l) seq.dropped_at[at(p, l)] = -1;
  if (!r.kv_layout.evicting() || r.mode != CacheMode::kKV) return;
  for (int l = 0; l < L; ++l) {
    for (int p = 0; p < r.seq_len && static_cast<size_t>(p) < n_pos; ++p) {
      if (seq.dropped_at[at(p, l)] >= 0 || !evicted_from_cache(r, p, l)) continue;
      seq.dropped_at[at(p, l)] = r.index;
      seq.dropped_score[at(p, l)] = -1.0;
      if (static_cast<size_t>(l) >= r.kv_dropped_by_layer.size()) continue;
      for (const KVDrop& d : r.kv_dropped_by_layer[static_cast<size_t>(l)])
        if (d.pos == p) seq.dropped_score[at(p, l)] = d.score;
    }
  }
}

}  // namespace

void append_cache_state(SequenceState& seq, const StepRecord& r) {
  const size_t n_pos = seq.tokens.size();
  const int L = seq.n_layer;
  if (n_pos == 0 || L <= 0) return;
  seq.qerr.resize(n_pos * L * 4, -1.0f);
  seq.evicted_at.resize(n_pos, -1);
  // The newest token has no K/V yet (a fork may reuse a position).
  std::fill(seq.qerr.begin() + static_cast<std::ptrdiff_t>((n_pos - 1) * L * 4), seq.qerr.end(), -1.0f);
  seq.evicted_at[n_pos - 1] = -1;
  // Rows this forward wrote: positions [seq_len - n_kv, seq_len), as in StepRecord::kv_qerr.
  const size_t n_kv = static_cast<size_t>(std::max(0, r.n_kv));
  const bool have_err = r.kv_qerr.size() == static_cast<size_t>(r.n_layer) * n_kv * 4 && r.n_layer == L;
  for (size_t i = 0; i < n_kv; ++i) {
    const int pos = r.seq_len - static_cast<int>(n_kv) + static_cast<int>(i);
    if (pos < 0 || static_cast<size_t>(pos) >= n_pos) continue;
    for (int l = 0; l < L; ++l) {
      float* dst = &seq.qerr[(static_cast<size_t>(pos) * L + l) * 4];
      for (int e = 0; e < 4; ++e) dst[e] = have_err ? r.kv_qerr[(static_cast<size_t>(l) * n_kv + i) * 4 + e] : -1.0f;
    }
  }
  // A forward that computes a position puts it back until a window evicts it again.
  for (int p = std::max(0, r.first); p < r.first + r.n_new && static_cast<size_t>(p) < n_pos; ++p)
    seq.evicted_at[static_cast<size_t>(p)] = -1;
  for (int p = 0; p < r.seq_len && static_cast<size_t>(p) < n_pos; ++p)
    if (seq.evicted_at[static_cast<size_t>(p)] < 0 && evicted_from_cache(r, p))
      seq.evicted_at[static_cast<size_t>(p)] = r.index;
  append_dropped(seq, r);
}

bool page_of(const StepCache& r, int pos, int* page, int* refs) {
  const PageRun* run = r.kv_layout.paged() ? r.page_at(pos) : nullptr;
  if (!run) return false;
  *page = run->block;
  *refs = run->refs;
  return true;
}

namespace {

// Ground marks lie between the grid (y = -0.07) and the first layer (y = 0);
// their labels on the ground in front of the position ticks.
constexpr float kBarTop = -0.012f, kBarH = 0.05f, kFrameBottom = -0.066f;
constexpr float kLabelY = -0.07f, kBarLabelDz = 1.0f, kPageLabelDz = 1.45f;
// Score bars (eviction by score) sit in the gap under each layer's blocks.
constexpr float kScoreH = 0.15f, kScoreGap = 0.025f, kScoreOverhang = 0.24f;

void add_label(Scene& s, const glm::vec3& at, std::string text, const glm::vec3& c, int pos,
               std::string short_text = "") {
  Label lab;
  lab.short_text = std::move(short_text);
  lab.kind = LabelKind::kCacheMark;
  lab.pos = pos;
  lab.text = std::move(text);
  lab.anchor = at;
  lab.colour = glm::vec4(c, 1.0f);
  s.labels.push_back(std::move(lab));
}

// A bar on the ground under positions [p0, p1), labelled in its middle (unless `text` is empty).
void add_bar(Scene& s, const Layout& L, int p0, int p1, CacheMark mark, std::string text, std::string short_text) {
  const Palette& pal = s.palette;
  const glm::vec3 c = mark == CacheMark::kSinks ? pal.sink : pal.cache_high;
  if (p1 <= p0) return;
  BlockInstance b;
  const float x0 = L.x(p0) - L.block_w * 0.5f, x1 = L.x(p1 - 1) + L.block_w * 0.5f;
  b.center = {(x0 + x1) * 0.5f, kBarTop - kBarH * 0.5f, 0.0f};
  b.size = {x1 - x0, kBarH, L.block_w};
  b.colour = glm::vec4(c, 1.0f);
  b.glow = mark == CacheMark::kSinks ? 0.25f : 0.0f;
  b.pos = p0;
  b.mark = mark;
  s.cache_marks.push_back(b);
  if (!text.empty())
    add_label(s, {(x0 + x1) * 0.5f, kLabelY, L.block_w * 0.5f + kBarLabelDz}, std::move(text), c, p0,
              std::move(short_text));
}

// Sink positions: a glowing outline around their stacks, a bar under them and
// a caption above them (the ground in front of the first positions is where
// the legend sits).
void add_sinks(Scene& s, const Layout& L, int n_sink, int n_layer, float flash) {
  const Palette& pal = s.palette;
  add_bar(s, L, 0, n_sink, CacheMark::kSinks, "", "");
  const float top = L.kv_bottom(n_layer - 1) + L.kv_h + 0.1f, bottom = kFrameBottom;
  const float x0 = L.x(0) - L.block_w * 0.5f - 0.1f, x1 = L.x(n_sink - 1) + L.block_w * 0.5f + 0.1f;
  BlockInstance f;
  f.center = {(x0 + x1) * 0.5f, (top + bottom) * 0.5f, 0.0f};
  f.size = {x1 - x0, top - bottom, L.block_w + 0.2f};
  f.colour = glm::vec4(pal.sink, 0.0f);  // outline only
  f.glow = 0.5f + 0.5f * flash;
  f.pos = 0;
  f.mark = CacheMark::kSinks;
  s.cache_marks.push_back(f);
  add_label(s, {(x0 + x1) * 0.5f, top + 0.08f, L.block_w * 0.5f},
            n_sink == 1 ? "sink" : std::to_string(n_sink) + " sinks", pal.sink, 0);
}

// One outline frame per run of held positions in the same page, and its
// caption. The shared pages' captions come first: where the overlay has no
// room for every caption it keeps the earlier ones, and sharing is what the
// pages teach.
void add_page_frames(Scene& s, const std::vector<PageRun>& runs, const Layout& L, int n_layer, float flash) {
  const Palette& pal = s.palette;
  Scene plain;  // the unshared pages' captions, added after the shared ones'
  const float top = L.kv_bottom(n_layer - 1) + L.kv_h + 0.08f, bottom = kFrameBottom;
  for (const PageRun& run : runs) {
    // Pages are framed where positions have a column each (aggregated columns hold many pages).
    const int p0 = std::max(run.pos, L.columns.n_binned), p1 = run.pos + run.n - 1;
    if (p0 > p1) continue;
    const bool shared = run.refs > 1;
    const glm::vec3 c = shared ? pal.shared : pal.page;
    BlockInstance f;
    const float x0 = L.x(p0) - L.block_w * 0.5f - 0.06f, x1 = L.x(p1) + L.block_w * 0.5f + 0.06f;
    f.center = {(x0 + x1) * 0.5f, (top + bottom) * 0.5f, 0.0f};
    f.size = {x1 - x0, top - bottom, L.block_w + 0.12f};
    f.colour = glm::vec4(c, 0.0f);  // outline only
    f.glow = shared ? 0.3f + 0.5f * flash : 0.0f;
    f.pos = p0;
    f.mark = shared ? CacheMark::kSharedPage : CacheMark::kPage;
    s.cache_marks.push_back(f);
    std::string text = (run.n >= 3 ? "page " : "p") + std::to_string(run.block);
    std::string short_text = "p" + std::to_string(run.block);
    if (shared) {
      text += " \xC2\xB7 shared \xC3\x97" + std::to_string(run.refs);
      short_text += " \xC3\x97" + std::to_string(run.refs);
    }
    add_label(shared ? s : plain, {(x0 + x1) * 0.5f, kLabelY, L.block_w * 0.5f + kPageLabelDz}, std::move(text), c, p0,
              std::move(short_text));
  }
  s.labels.insert(s.labels.end(), plain.labels.begin(), plain.labels.end());
}

// Eviction by score: under each KV block a layer holds, a bar as long as the
// score its rule ranks it by, relative to the layer's highest; under a block
// dropped by this step, in the evicted colour, the score it lost with. An
// outline the full width behind each bar reads as "the layer's highest".
void add_score_bars(Scene& s, const SequenceState& seq, const Layout& L, float flash) {
  const StepRecord& r = *seq.current;
  const Palette& pal = s.palette;
  const Columns& cols = L.columns;
  for (int l = 0; l < seq.n_layer; ++l) {
    const double top = max_held_score(r, l);
    if (top <= 0) continue;
    const float y = L.kv_bottom(l) - kScoreGap - kScoreH * 0.5f;
    for (int col = 0; col < cols.count(); ++col) {
      if (cols.end(col) - cols.first(col) != 1) continue;  // aggregated columns: no single score
      const int p = cols.first(col);
      double score = 0;
      const bool held = held_score(r, p, l, &score);
      const bool now = !held && seq.dropped_at_step(p, l) == r.index;
      if (now) score = seq.dropped_with_score(p, l);
      if ((!held && !now) || score < 0) continue;
      const float frac = static_cast<float>(std::min(1.0, score / top));
      BlockInstance frame;
      frame.center = {L.x(p), y, 0.0f};
      // Deeper than the blocks: from a camera above the row, the block over a bar would hide one no deeper.
      frame.size = {L.block_w, kScoreH, L.block_w + kScoreOverhang};
      frame.colour = glm::vec4(pal.empty, 0.0f);  // outline: the layer's highest
      frame.pos = p;
      frame.layer = l;
      frame.mark = CacheMark::kScore;
      frame.score = score;
      BlockInstance bar = frame;
      // The outline sits just inside the bar where they overlap (a thin face
      // drawn as an outline is all edge and would cover the bar); beyond the
      // bar's end it shows what the layer's highest score would fill.
      frame.size.y *= 0.8f;
      frame.size.z -= 0.04f;
      bar.size.x = std::max(0.02f, L.block_w * frac);
      bar.center.x = L.x(p) - L.block_w * 0.5f + bar.size.x * 0.5f;
      bar.colour = glm::vec4(now ? pal.evicted : glm::mix(pal.cache_low, pal.ray, frac), 1.0f);
      bar.glow = now ? 0.6f * flash : 0.2f * frac;
      s.cache_marks.push_back(bar);
      s.cache_marks.push_back(frame);
    }
  }
}

// What the rule keeps, on the ground in front of the stacks.
void add_evict_caption(Scene& s, const StepRecord& r, const Layout& L, int n_pos) {
  const KVLayout& lay = r.kv_layout;
  const std::string n = std::to_string(lay.budget);
  std::string text, short_text;
  if (lay.evict == KVEvict::kTova) {
    text = "TOVA \xC2\xB7 each layer keeps the " + n +
           " keys its last query weighted most \xC2\xB7 colour, bar = that weight";
    short_text = "TOVA N = " + n + " \xC2\xB7 colour = last weight";
  } else if (lay.per_head()) {
    // A layer's stack shows the union of its K/V heads' positions (held_by_head has each head's).
    text = "SnapKV \xC2\xB7 after the prefill each K/V head keeps " + std::to_string(lay.budget - lay.snap_window) +
           " scored + the last " + std::to_string(lay.snap_window) +
           " prompt keys \xC2\xB7 a layer shows its heads' union";
    short_text = "SnapKV N = " + n + " \xC2\xB7 per head";
  } else {
    const std::string recent = std::to_string(lay.budget / 2), heavy = std::to_string(lay.budget - lay.budget / 2);
    text = "H2O \xC2\xB7 each layer keeps its " + recent + " newest + " + heavy +
           " heaviest keys \xC2\xB7 colour, bar = attention accumulated";
    short_text = "H2O N = " + n + " \xC2\xB7 colour = accumulated";
  }
  const float x = 0.5f * (L.x(0) + L.x(std::max(0, n_pos - 1)));
  add_label(s, {x, kLabelY, L.block_w * 0.5f + kBarLabelDz}, std::move(text), s.palette.ray, 0, std::move(short_text));
}

}  // namespace

void add_cache_marks(Scene& s, const SequenceState& seq, const Layout& L, float flash) {
  if (!seq.current || seq.n_layer <= 0) return;
  const StepRecord& r = *seq.current;
  if (r.mode != CacheMode::kKV) return;  // NO CACHE holds nothing between steps
  const KVLayout& lay = r.kv_layout;
  const int T = r.seq_len;
  if (lay.windowed()) {
    const int n_sink = std::min(lay.sinks, T);
    if (n_sink > 0) add_sinks(s, L, n_sink, seq.n_layer, flash);
    // What the next query sees besides the sinks: the last W positions held.
    const int lo = std::max(n_sink, T - lay.window);
    const std::string w = "W = " + std::to_string(lay.window);
    add_bar(s, L, lo, T, CacheMark::kWindow, "window " + w, w);
  }
  if (lay.evicting()) {
    add_score_bars(s, seq, L, flash);
    add_evict_caption(s, r, L, T);
  }
  if (lay.paged()) add_page_frames(s, r.kv_page_runs, L, seq.n_layer, flash);
}

}  // namespace kvscope
