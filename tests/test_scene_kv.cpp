// The cache layout in the scene, from real generations on a test checkpoint:
// the blocks a sliding window evicts (checked against the window's formula,
// not the cache's own list), the sink and window bars, the stripes of a
// quantized row format, the quantization error each row carries (checked
// against the float64 reference quantizer) and the page frames of a paged cache.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "numpy_ref_util.h"
#include "render/scene/scene.h"
#include "render/scene/scene_kv.h"

namespace kvscope {
namespace {

constexpr const char* kCkpt = "l2h2d32_f32_prefix_buffers";

std::vector<RecordPtr> generate(const KVLayout& kv, int steps, const std::vector<CacheMode>& modes = {}) {
  Generator gen(load_model(testutil::suite_checkpoint(kCkpt)));
  GenerateOptions opt;
  opt.max_new = steps + 1;
  opt.sampler.greedy = true;
  opt.ignore_eos = true;
  opt.kv = kv;
  gen.start_tokens({1, 2, 3, 4, 5, 6}, opt);
  std::vector<RecordPtr> out;
  for (size_t s = 0;; ++s) {
    if (s < modes.size()) gen.set_mode(modes[s]);
    RecordPtr r = gen.step();
    if (!r) break;
    out.push_back(r);
  }
  return out;
}

// Positions a cache with window W and S sinks holds after a forward over T
// positions: what the next query (at T) can still see, the formula of the layout.
std::set<int> held_by_formula(int T, int W, int S) {
  std::set<int> held;
  for (int p = 0; p < std::min(S, T); ++p) held.insert(p);
  for (int p = std::max(0, T - W); p < T; ++p) held.insert(p);
  return held;
}

const BlockInstance* find_mark(const Scene& s, CacheMark m) {
  for (const BlockInstance& b : s.cache_marks)
    if (b.mark == m) return &b;
  return nullptr;
}

TEST(SceneKv, WindowEvictsWhatNoQueryCanSee) {
  const int W = 4, S = 1;
  KVLayout kv;
  kv.window = W;
  kv.sinks = S;
  const std::vector<CacheMode> modes = {CacheMode::kKV,      CacheMode::kKV, CacheMode::kKV,
                                        CacheMode::kNoCache, CacheMode::kKV, CacheMode::kKV};
  const auto recs = generate(kv, 6, modes);
  ASSERT_EQ(recs.size(), 7u);
  std::set<int> held_before;  // after the previous forward (NO CACHE: nothing)
  const Layout L;
  for (size_t i = 0; i < recs.size(); ++i) {
    const StepRecord& r = *recs[i];
    const Scene settled = build_scene(recs, i + 1, ViewOptions(), 1.0f);
    const Scene start = build_scene(recs, i + 1, ViewOptions(), 0.0f);
    const int T = r.seq_len;
    const bool kv_mode = r.mode == CacheMode::kKV;
    const std::set<int> held = kv_mode ? held_by_formula(T, W, S) : std::set<int>();
    for (size_t b = 0; b < settled.kv.size(); ++b) {
      const BlockInstance& k = settled.kv[b];
      const std::string where = "step " + std::to_string(i) + " pos " + std::to_string(k.pos);
      if (k.pos >= T || !kv_mode) {
        EXPECT_NE(k.state, KvState::kEvicting) << where;
        EXPECT_NE(k.state, KvState::kEvicted) << where;
        continue;
      }
      if (held.count(k.pos)) {
        EXPECT_TRUE(is_held(k.state)) << where << " " << to_string(k.state);
        continue;
      }
      // Evicted by this forward: held before it, or computed by it.
      const bool now = held_before.count(k.pos) || (k.pos >= r.first && k.pos < r.first + r.n_new);
      EXPECT_EQ(k.state, now ? KvState::kEvicting : KvState::kEvicted) << where;
      // An evicting block starts solid and fades to a dim fill; an evicted one is an outline.
      if (now) {
        EXPECT_GT(start.kv[b].colour.a, 0.5f) << where;
        EXPECT_GT(k.colour.a, 0.0f) << where;
        EXPECT_LT(k.colour.a, 0.5f) << where;
      } else {
        EXPECT_EQ(k.colour.a, 0.0f) << where;
      }
    }
    held_before = held;
    // A decode step's banner counts the cached rows its query reads: what the
    // window holds, less the position it just wrote.
    if (kv_mode && !r.prefill && !r.refill) {
      const std::string want = "reads " + std::to_string(held.size() - 1) + " cached K/V rows";
      EXPECT_NE(settled.banner_sub.find(want), std::string::npos) << "step " << i << ": " << settled.banner_sub;
    }
    // The sink and window bars span exactly their positions (KV CACHE only).
    const BlockInstance* sink = find_mark(settled, CacheMark::kSinks);
    const BlockInstance* win = find_mark(settled, CacheMark::kWindow);
    if (!kv_mode) {
      EXPECT_TRUE(settled.cache_marks.empty()) << "step " << i;
      continue;
    }
    ASSERT_TRUE(sink && win) << "step " << i;
    EXPECT_NEAR(sink->center.x - sink->size.x * 0.5f, L.x(0) - L.block_w * 0.5f, 1e-5);
    EXPECT_NEAR(sink->center.x + sink->size.x * 0.5f, L.x(S - 1) + L.block_w * 0.5f, 1e-5);
    EXPECT_NEAR(win->center.x - win->size.x * 0.5f, L.x(std::max(S, T - W)) - L.block_w * 0.5f, 1e-5);
    EXPECT_NEAR(win->center.x + win->size.x * 0.5f, L.x(T - 1) + L.block_w * 0.5f, 1e-5);
  }
}

// The error the window shows for each stored row equals the float64
// reference quantizer's, row by row.
TEST(SceneKv, QuantErrorMatchesReference) {
  for (KVDtype dt : {KVDtype::kF16, KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    KVLayout kv;
    kv.dtype = dt;
    const auto recs = generate(kv, 3);
    const StepRecord& r0 = *recs[0];
    const int L = r0.n_layer, d = r0.n_kv_head * r0.head_dim;
    std::string raw;
    std::vector<float> got;
    for (const RecordPtr& r : recs) {
      ASSERT_EQ(r->kv_qerr.size(), static_cast<size_t>(L) * r->n_kv * 4) << to_string(dt);
      for (int l = 0; l < L; ++l)
        for (int i = 0; i < r->n_kv; ++i)
          for (int kv_i = 0; kv_i < 2; ++kv_i) {
            const std::vector<float>& rows = kv_i == 0 ? r->k : r->v;
            raw.append(reinterpret_cast<const char*>(&rows[(static_cast<size_t>(l) * r->n_kv + i) * d]),
                       static_cast<size_t>(d) * 4);
            const float* e = &r->kv_qerr[(static_cast<size_t>(l) * r->n_kv + i) * 4 + kv_i * 2];
            got.insert(got.end(), {e[0], e[1]});
          }
    }
    testutil::TempDir tmp("scene-kv-qerr");
    testutil::write_file(tmp / "rows.f32", raw);
    testutil::run_numpy_ref(std::string("qerr --dtype ") + to_string(dt) + " --n " + std::to_string(d) + " --rows " +
                                (tmp / "rows.f32") + " --out " + (tmp / "err.f64"),
                            tmp / "qerr.log");
    const std::string want_raw = testutil::read_file(tmp / "err.f64");
    ASSERT_EQ(want_raw.size(), got.size() * 8) << to_string(dt);
    std::vector<double> want(got.size());
    std::memcpy(want.data(), want_raw.data(), want_raw.size());
    double worst = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      EXPECT_NEAR(got[j], want[j], 1e-6 + 1e-5 * want[j]) << to_string(dt) << " value " << j;
      worst = std::max(worst, want[j]);
    }
    EXPECT_GT(worst, 0.0) << to_string(dt) << ": a quantized row with no error at all";
    // The scene's sequence state carries the same numbers, and the blocks the stripes.
    const SequenceState seq = build_sequence(recs, recs.size());
    const StepRecord& last = *recs.back();
    const int pos = last.seq_len - 1;
    const float* e = seq.quant_error(pos, L - 1);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e[3], last.kv_qerr[(static_cast<size_t>(L - 1) * last.n_kv + last.n_kv - 1) * 4 + 3]);
    const Scene s = build_scene(seq, ViewOptions());
    for (const BlockInstance& b : s.kv) {
      if (is_held(b.state)) {
        EXPECT_EQ(b.bands, kv_bands(dt)) << to_string(dt);
      }
    }
  }
  // f32 rows are stored exactly: no error to show, no stripes.
  const auto recs = generate(KVLayout(), 2);
  EXPECT_TRUE(recs.back()->kv_qerr.empty());
  for (const BlockInstance& b : build_scene(recs, recs.size(), ViewOptions()).kv) EXPECT_EQ(b.bands, 0.0f);
}

TEST(SceneKv, PagesFrameTheirPositions) {
  const int B = 4;
  KVLayout kv;
  kv.block = B;
  const auto recs = generate(kv, 5);
  const Scene s = build_scene(recs, recs.size(), ViewOptions());
  const StepRecord& r = *recs.back();
  const int T = r.seq_len;
  const Layout L;
  // Positions [0, T) in pages of B: ceil(T / B) frames, each around its B positions.
  std::vector<const BlockInstance*> frames;
  for (const BlockInstance& b : s.cache_marks)
    if (b.mark == CacheMark::kPage) frames.push_back(&b);
  ASSERT_EQ(static_cast<int>(frames.size()), (T + B - 1) / B);
  ASSERT_EQ(static_cast<int>(frames.size()), r.kv_blocks);
  std::set<int> ids;
  for (size_t f = 0; f < frames.size(); ++f) {
    const int p0 = static_cast<int>(f) * B, p1 = std::min(T, p0 + B) - 1;
    EXPECT_EQ(frames[f]->pos, p0);
    EXPECT_EQ(frames[f]->colour.a, 0.0f);  // an outline
    EXPECT_LT(frames[f]->center.x - frames[f]->size.x * 0.5f, L.x(p0) - L.block_w * 0.5f);
    EXPECT_GT(frames[f]->center.x + frames[f]->size.x * 0.5f, L.x(p1) + L.block_w * 0.5f);
    int page = -1, refs = 0;
    ASSERT_TRUE(page_of(r, p0, &page, &refs));
    EXPECT_EQ(refs, 1);
    ids.insert(page);
    bool labelled = false;
    for (const Label& l : s.labels)
      labelled |=
          l.kind == LabelKind::kCacheMark && l.pos == p0 && l.text.find(std::to_string(page)) != std::string::npos;
    EXPECT_TRUE(labelled) << "page " << page;
  }
  EXPECT_EQ(ids.size(), frames.size());  // distinct blocks of the pool
  // A page another sequence also references is drawn as shared (here the
  // last one), and its caption comes first: the overlay keeps the earlier
  // captions where it has no room for all.
  auto shared = std::make_shared<StepRecord>(r);
  const int last_page = (T - 1) / B * B;
  for (PageRun& run : shared->kv_page_runs)
    if (run.pos >= last_page) run.refs = 2;
  std::vector<RecordPtr> recs2(recs.begin(), recs.end() - 1);
  recs2.push_back(shared);
  const Scene s2 = build_scene(recs2, recs2.size(), ViewOptions());
  int n_shared = 0;
  for (const BlockInstance& b : s2.cache_marks) n_shared += b.mark == CacheMark::kSharedPage;
  EXPECT_EQ(n_shared, 1);
  const auto caption =
      std::find_if(s2.labels.begin(), s2.labels.end(), [](const Label& l) { return l.kind == LabelKind::kCacheMark; });
  ASSERT_NE(caption, s2.labels.end());
  EXPECT_EQ(caption->pos, last_page);
  EXPECT_NE(caption->text.find("shared \xC3\x97"
                               "2"),
            std::string::npos)
      << caption->text;
}

}  // namespace
}  // namespace kvscope
