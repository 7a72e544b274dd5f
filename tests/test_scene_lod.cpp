// Level of detail for long sequences: a SmolLM2-shaped model (30 layers, 9
// query heads sharing 3 K/V heads) at thousands of positions. The records are
// made by hand so every expected number (K norms, attention sums) is known
// without the scene builder: the instance lists stay bounded, the newest
// token and the write head are still drawn, and a beam to an aggregated
// column carries the summed attention of its keys.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/decoding/generator.h"
#include "render/scene/scene.h"

namespace kvscope {
namespace {

constexpr int kL = 30, kH = 9, kG = 3, kHd = 2;  // SmolLM2-135M's layers and heads; narrow heads

// |K| of position p at layer l in the records below.
double knorm_of(int p, int l) {
  return 1.0 + p % 7 + l;
}

// A record whose forward computed positions [first, seq_len) (a prefill when
// first == 0) and kept the newest query row's attention only, as the
// generator does for long prompts.
RecordPtr smol_record(int index, int first, int seq_len, int n_prompt) {
  auto r = std::make_shared<StepRecord>();
  r->index = index;
  r->prefill = first == 0;
  r->mode = CacheMode::kKV;
  r->first = first;
  r->n_new = seq_len - first;
  r->seq_len = seq_len;
  r->n_prompt = n_prompt;
  if (r->prefill)
    for (int i = 0; i < seq_len; ++i) {
      r->prompt_tokens.push_back(10 + i % 50);
      r->prompt_pieces.push_back(" w" + std::to_string(i));
    }
  r->token = 7;
  r->piece = " next";
  r->raw_piece = r->piece;
  r->prob = 0.5f;
  r->n_layer = kL;
  r->n_head = kH;
  r->n_kv_head = kG;
  r->head_dim = kHd;
  r->n_embd = kH * kHd;
  r->n_rows = 1;
  r->attn.assign(static_cast<size_t>(kL) * kH * seq_len, 0.0f);
  std::mt19937 rng(77 + index);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int lh = 0; lh < kL * kH; ++lh) {
    float* row = &r->attn[static_cast<size_t>(lh) * seq_len];
    double sum = 0;
    for (int k = 0; k < seq_len; ++k) sum += row[k] = u(rng) * u(rng) * u(rng);
    row[0] += static_cast<float>(sum);  // a sink: key 0 takes about half
    sum *= 2;
    for (int k = 0; k < seq_len; ++k) row[k] = static_cast<float>(row[k] / sum);
  }
  r->n_kv = r->n_new;
  const int d = kG * kHd;
  r->k.assign(static_cast<size_t>(kL) * r->n_kv * d, 0.0f);
  r->v.assign(r->k.size(), 0.5f);
  for (int l = 0; l < kL; ++l)
    for (int i = 0; i < r->n_kv; ++i)
      r->k[(static_cast<size_t>(l) * r->n_kv + i) * d] = static_cast<float>(knorm_of(first + i, l));
  r->kv_positions = seq_len;
  return r;
}

// A prompt of `n_prompt` positions, then `n_steps` decode steps.
std::vector<RecordPtr> smol_history(int n_prompt, int n_steps) {
  std::vector<RecordPtr> h{smol_record(0, 0, n_prompt, n_prompt)};
  for (int i = 1; i <= n_steps; ++i) h.push_back(smol_record(i, n_prompt + i - 1, n_prompt + i, n_prompt));
  return h;
}

// The newest query row's attention to keys [k0, k1), averaged over layers
// and heads as the view's "mean" does, read straight from the record.
double summed_attention(const StepRecord& r, int layer, int head, int k0, int k1) {
  const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? r.n_layer : layer + 1;
  const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? r.n_head : head + 1;
  double sum = 0;
  for (int l = l0; l < l1; ++l)
    for (int h = h0; h < h1; ++h)
      for (int k = k0; k < k1; ++k) sum += r.attn[(static_cast<size_t>(l) * r.n_head + h) * r.seq_len + k];
  return sum / ((l1 - l0) * (h1 - h0));
}

TEST(SceneLod, ColumnsCoverEveryPositionOnceAndStayBounded) {
  for (int n_pos : {1, 100, 160, 161, 1000, 4097, 8193, 100000}) {
    const Columns c = plan_columns(n_pos, 160, 64);
    ASSERT_LE(c.count(), 160) << n_pos;
    EXPECT_EQ(c.binned(), n_pos > 160) << n_pos;
    int next = 0;
    for (int col = 0; col < c.count(); ++col) {
      ASSERT_EQ(c.first(col), next) << n_pos << " column " << col;
      ASSERT_GT(c.end(col), c.first(col));
      for (int p = c.first(col); p < c.end(col); ++p) ASSERT_EQ(c.column(p), col);
      next = c.end(col);
    }
    EXPECT_EQ(next, n_pos);
    // The newest positions keep a column each, and the newest is the last column.
    EXPECT_EQ(c.n_pos - c.n_binned, c.binned() ? 64 : n_pos) << n_pos;
    EXPECT_EQ(c.column(n_pos - 1), c.count() - 1);
  }
  // Bin edges stay put while the sequence grows (until the bin size doubles).
  const Columns a = plan_columns(4000, 160, 64), b = plan_columns(4050, 160, 64);
  ASSERT_EQ(a.bin, b.bin);
  EXPECT_EQ(a.bin & (a.bin - 1), 0);
  for (int p = 0; p < a.n_binned; p += 13) EXPECT_EQ(a.column(p), b.column(p));
  // Unlimited: one column per position.
  EXPECT_EQ(plan_columns(5000, 0, 64).count(), 5000);
}

TEST(SceneLod, SmolLm2ShapedAt4096PositionsStaysBoundedAndLegible) {
  const std::vector<RecordPtr> h = smol_history(4090, 6);
  const StepRecord& last = *h.back();
  ASSERT_EQ(last.seq_len, 4096);
  ViewOptions view;  // defaults: the window's
  const Layout L;
  const Scene s = build_scene(h, h.size(), view, 1.0f, L);
  const int max_cols = view.max_columns;
  ASSERT_TRUE(s.columns.binned());
  EXPECT_LE(s.columns.count(), max_cols);
  EXPECT_LE(s.tokens.size(), static_cast<size_t>(max_cols));
  EXPECT_LE(s.kv.size(), static_cast<size_t>(max_cols) * kL * kG);
  EXPECT_LE(s.rays.size(), static_cast<size_t>(max_cols));
  size_t token_labels = 0;
  for (const Label& l : s.labels) token_labels += l.kind == LabelKind::kToken;
  EXPECT_LE(token_labels, static_cast<size_t>(max_cols));

  // The newest token: its own column, at the write head's x, labelled.
  const int slot = last.seq_len;
  ASSERT_EQ(s.slot, slot);
  const BlockInstance* newest = nullptr;
  for (const BlockInstance& b : s.tokens)
    if (b.pos == slot) newest = &b;
  ASSERT_NE(newest, nullptr);
  EXPECT_EQ(newest->span, 1);
  EXPECT_FLOAT_EQ(newest->center.x, s.head_pos.x);
  ASSERT_GE(s.markers.size(), 1u);
  EXPECT_FLOAT_EQ(s.markers[0].center.x, s.head_pos.x);
  bool newest_label = false, head_label = false;
  for (const Label& l : s.labels) {
    newest_label |= l.kind == LabelKind::kToken && l.pos == slot;
    head_label |= l.kind == LabelKind::kHead;
  }
  EXPECT_TRUE(newest_label);
  EXPECT_TRUE(head_label);
  // The scene is no wider than its columns (plus the gap), whatever the length.
  EXPECT_LE(s.bounds_max.x - s.bounds_min.x, (max_cols + 6) * L.pitch);

  // Every layer of every column has its 3 K/V sub-blocks; an aggregated
  // block's K norm is the mean over its positions (heights follow it).
  int aggregated = 0;
  for (const BlockInstance& b : s.kv) {
    ASSERT_GE(b.kv_head, 0);
    ASSERT_LT(b.kv_head, kG);
    if (b.span == 1) continue;
    ++aggregated;
    double mean = 0;
    for (int p = b.pos; p < b.pos + b.span; ++p) mean += knorm_of(p, b.layer);
    mean /= b.span;
    double mx = 0;
    for (int p = 0; p < slot; ++p) mx = std::max(mx, knorm_of(p, b.layer));
    const double frac = mean / mx;
    EXPECT_NEAR(b.size.y, L.kv_h * (L.kv_min_frac + (1.0 - L.kv_min_frac) * frac), 1e-4);
    EXPECT_EQ(b.state, KvState::kResident);
  }
  EXPECT_GT(aggregated, 0);
  // The position the last step computed is drawn on its own, as new.
  bool new_found = false;
  for (const BlockInstance& b : s.kv) new_found |= b.pos == slot - 1 && b.span == 1 && b.state == KvState::kNew;
  EXPECT_TRUE(new_found);
}

TEST(SceneLod, BeamsToAggregatedColumnsCarryTheSummedWeight) {
  const std::vector<RecordPtr> h = smol_history(4090, 6);
  const StepRecord& last = *h.back();
  for (const auto& [layer, head] : {std::pair{-1, -1}, std::pair{7, 4}, std::pair{29, -1}}) {
    ViewOptions view;
    view.layer = layer;
    view.head = head;
    const Scene s = build_scene(h, h.size(), view, 1.0f);
    double total = 0;
    int summed = 0;
    for (const RayInstance& b : s.rays) {
      EXPECT_NEAR(b.weight, summed_attention(last, layer, head, b.key, b.key + b.span), 1e-5)
          << "keys " << b.key << "+" << b.span;
      total += b.weight;
      summed += b.span > 1;
    }
    EXPECT_GT(summed, 0);
    // Nothing lost to binning: the newest row's softmax sums to 1 over every key.
    EXPECT_NEAR(total, 1.0, 1e-4) << "layer " << layer << " head " << head;
    // The strongest beam (the sink's column) is labelled as a sum.
    bool sigma = false;
    for (const Label& l : s.labels) sigma |= l.kind == LabelKind::kRay && l.text.rfind("\xCE\xA3", 0) == 0;
    EXPECT_TRUE(sigma);
  }
}

TEST(SceneLod, PickingAnAggregatedColumnNamesItsPositions) {
  const std::vector<RecordPtr> h = smol_history(2000, 2);
  const Scene s = build_scene(h, h.size(), ViewOptions());
  const BlockInstance* target = nullptr;
  for (const BlockInstance& b : s.kv)
    if (b.span > 1 && b.layer == 3 && b.kv_head == 1 && b.pos > 0) target = &b;
  ASSERT_NE(target, nullptr);
  const Pick p = pick(s, target->center + glm::vec3(0, 0, 5), glm::vec3(0, 0, -1));
  EXPECT_EQ(p.kind, Pick::kKv);
  EXPECT_EQ(p.pos, target->pos);
  EXPECT_EQ(p.span, target->span);
  EXPECT_EQ(p.layer, 3);
}

TEST(SceneLod, ShortSequencesKeepAColumnPerPosition) {
  const std::vector<RecordPtr> h = smol_history(40, 3);
  const Scene s = build_scene(h, h.size(), ViewOptions());
  EXPECT_FALSE(s.columns.binned());
  EXPECT_EQ(s.tokens.size(), 44u);
  EXPECT_EQ(s.kv.size(), 44u * kL * kG);
  for (const RayInstance& b : s.rays) EXPECT_EQ(b.span, 1);
}

TEST(SceneLod, InstanceCountDoesNotGrowWithContext) {
  for (int n : {1024, 2048, 8190}) {
    const std::vector<RecordPtr> h = smol_history(n, 1);
    const Scene s = build_scene(h, h.size(), ViewOptions());
    // Between half and all of the allowed columns, at any length.
    EXPECT_LE(s.columns.count(), 160) << n;
    EXPECT_GE(s.columns.count(), 64 + 96 / 2) << n;
    EXPECT_EQ(s.kv.size(), static_cast<size_t>(s.columns.count()) * kL * kG) << n;
  }
}

}  // namespace
}  // namespace kvscope
