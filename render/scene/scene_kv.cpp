#include "render/scene/scene_kv.h"

#include <algorithm>

namespace kvscope {

bool evicted_from_cache(const StepRecord& r, int pos) {
  if (r.mode != CacheMode::kKV || !r.kv_layout.windowed() || pos < 0 || pos >= r.seq_len) return false;
  return !std::binary_search(r.kv_held.begin(), r.kv_held.end(), pos);
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
}

bool page_of(const StepRecord& r, int pos, int* page, int* refs) {
  for (const PageRun& run : page_runs(r)) {
    if (pos < run.pos || pos >= run.pos + run.n) continue;
    *page = run.block;
    *refs = run.refs;
    return true;
  }
  return false;
}

namespace {

// Ground marks lie between the grid (y = -0.07) and the first layer (y = 0);
// their labels on the ground in front of the position ticks.
constexpr float kBarTop = -0.012f, kBarH = 0.05f, kFrameBottom = -0.066f;
constexpr float kLabelY = -0.07f, kBarLabelDz = 1.0f, kPageLabelDz = 1.45f;

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
  if (lay.paged()) add_page_frames(s, page_runs(r), L, seq.n_layer, flash);
}

}  // namespace kvscope
