// A long generation's step history stays within its memory budget. Every
// decode step's record holds the newest query's attention over all earlier
// positions (and, for the cache picture, the positions held), so kept whole
// the records of a generation grow with the square of its length. The window
// keeps them in a BranchTree whose budget drops the oldest records' detail;
// here a Llama-family model at a long context generates thousands of steps
// into one, and the heap in use (malloc's own count, not record_bytes) must
// stay within the budget.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "app/lessons/decode.h"
#include "app/session/branches.h"
#include "app/session/history.h"
#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"
#include "numpy_ref_util.h"
#include "render/scene/scene.h"
#include "render/scene/scene_kv.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

// Bytes malloc has handed out and not had back (0 where the allocator does
// not say, e.g. under a sanitizer's allocator).
uint64_t heap_in_use() {
  return static_cast<uint64_t>(mallinfo2().uordblks);
}

// The heap grew since `heap0` by at most `allowed` bytes (plus 1 MiB for the
// engine's scratch and the token lists). Where the allocator does not report
// its heap, only the test's budget checks apply; the property says so.
void expect_heap_growth_within(uint64_t heap0, uint64_t allowed) {
  const uint64_t heap1 = heap_in_use();
  if (heap0 == 0 || heap1 == 0) {
    ::testing::Test::RecordProperty("heap_check", "not available: this allocator does not report mallinfo2");
    return;
  }
  EXPECT_LE(heap1, heap0 + allowed + (1ull << 20)) << "heap grew by " << (heap1 - heap0) << " bytes";
}

// A small Llama-family model at a 2400-position context, with no
// end-of-sequence id (so that beam search runs to its maximum length).
std::shared_ptr<const Model> long_context_model(const testutil::TempDir& tmp) {
  const std::string dir = tmp / "llama-long";
  fs::copy(testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single", dir, fs::copy_options::recursive);
  testutil::json c = testutil::read_json(dir + "/config.json");
  c["max_position_embeddings"] = 4096;  // RoPE: no learned table to grow
  c["eos_token_id"] = nullptr;
  testutil::write_file(dir + "/config.json", c.dump(1));
  LoadControl control;
  control.context = 2400;
  return load_model(dir, control);
}

TEST(HistoryBudget, ThousandsOfStepsAtLongContextStayWithinTheBudget) {
  testutil::TempDir tmp("history-budget");
  const std::shared_ptr<const Model> m = long_context_model(tmp);

  constexpr uint64_t kBudget = 4ull << 20;
  constexpr int kKeepRecent = 8;
  constexpr int kSteps = 2200;
  BranchTree tree(kBudget, kKeepRecent);
  tree.start();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = kSteps;
  opt.ignore_eos = true;
  opt.sampler.greedy = true;
  gen.start_tokens({1, 2, 3, 4, 5}, opt);

  uint64_t whole = 0;  // what the records would hold kept whole
  uint64_t heap0 = 0;
  int steps = 0;
  while (RecordPtr r = gen.step()) {
    whole += record_bytes(*r);
    tree.push(std::move(r));
    ++steps;
    if (steps == 16) heap0 = heap_in_use();  // the engine's buffers and the KV cache are reserved by now
    // The policy's own count: within the budget, the newest records aside.
    const History& h = tree.current_history();
    uint64_t recent = 0;
    for (size_t i = h.size() - std::min<size_t>(h.size(), kKeepRecent); i < h.size(); ++i)
      recent += record_bytes(*h[i]);
    ASSERT_LE(tree.bytes(), std::max(kBudget, recent)) << "step " << steps;
  }
  ASSERT_EQ(steps, kSteps);
  // Kept whole they would not have fit many times over.
  EXPECT_GT(whole, 10 * kBudget);
  // Every token stays, and the newest steps keep all their detail.
  const History& h = tree.current_history();
  ASSERT_EQ(h.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(gen.tokens().size(), 5u + kSteps);
  for (size_t i = 1; i < h.size(); ++i) ASSERT_EQ(h[i]->token, gen.tokens()[5 + i]) << i;
  for (size_t i = h.size() - kKeepRecent; i < h.size(); ++i) EXPECT_EQ(h.detail(i), unsigned{kDetailAll}) << i;
  EXPECT_EQ(h.detail(kSteps / 2) & kDetailAttention, 0u);
  // Dropping attention and logits is enough here: what is left of a step
  // (its K/V rows, a fixed size per step, and its cache picture, one run)
  // does not grow with the context, so the K/V rows stay (pass 2 runs only
  // when pass 1 was not enough; PagedStepsKeepTheirPagesWhenTheirRowsAreDropped
  // makes it run). Held positions stored one int each, 2200 steps would hold
  // 9.7 MB of them: the oldest steps' K/V rows would have had to go.
  EXPECT_EQ(tree.trimmed().kv_dropped, 0) << tree.bytes();
  EXPECT_NE(h.detail(1) & kDetailKV, 0u);
  // Every step keeps its cache picture, which does not grow with the
  // context: a dense cache holds [0, seq_len), one run.
  for (size_t i = 0; i < h.size(); ++i) {
    ASSERT_EQ(h[i]->kv_held.runs().size(), 1u) << i;
    ASSERT_EQ(h[i]->kv_held.runs()[0], (PositionRuns::Run{0, h[i]->seq_len})) << i;
  }
  // The heap agrees with the count: what the history holds grew by no more
  // than the budget (the engine's scratch and the generator's token list aside).
  expect_heap_growth_within(heap0, kBudget);
}

// Beam search's steps go into the same tree under the same budget: each
// holds every beam's whole sequence, so kept whole they too grow with the
// square of the length. Old steps drop those sequences; the panels rebuild
// them from the steps' candidates, the same tokens.
TEST(HistoryBudget, ThousandsOfBeamStepsStayWithinTheBudget) {
  testutil::TempDir tmp("history-budget-beams");
  const std::shared_ptr<const Model> m = long_context_model(tmp);
  constexpr uint64_t kBudget = 8ull << 20;
  constexpr int kKeepRecent = 8;
  constexpr int kSteps = 2200;
  BranchTree tree(kBudget, kKeepRecent);
  tree.start();
  BeamGenerator gen(m);
  BeamOptions opt;
  opt.n_beams = 4;
  opt.max_new = kSteps;
  gen.start_tokens({1, 2, 3, 4, 5}, opt);

  uint64_t whole = 0, heap0 = 0;
  uint64_t cache0 = 0, cache_peak = 0;       // the beams' paged cache grows with them: its blocks are not records
  std::vector<std::vector<int>> running_at;  // one step's beams, as the step recorded them
  const int probe = 300;
  int steps = 0;
  while (BeamRecordPtr r = gen.step()) {
    whole += record_bytes(*r);
    if (r->index == probe)
      for (const Beam& b : r->running) running_at.push_back(b.tokens);
    tree.push_beam(std::move(r));
    ++steps;
    cache_peak = std::max(cache_peak, gen.cache().bytes());
    if (steps == 16) {
      heap0 = heap_in_use();
      cache0 = cache_peak;
    }
    const std::vector<BeamRecordPtr>& h = tree.beam_records();
    uint64_t recent = 0;
    for (size_t i = h.size() - std::min<size_t>(h.size(), kKeepRecent); i < h.size(); ++i)
      recent += record_bytes(*h[i]);
    ASSERT_LE(tree.bytes(), std::max(kBudget, recent)) << "step " << steps;
  }
  ASSERT_EQ(steps, kSteps);
  EXPECT_GT(whole, 8 * kBudget);
  const std::vector<BeamRecordPtr>& h = tree.beam_records();
  EXPECT_GT(tree.trimmed().beam_tokens_dropped, kSteps / 2);
  EXPECT_EQ(beam_tokens_bytes(*h[probe]), 0u);         // dropped ...
  EXPECT_GT(beam_tokens_bytes(*h[h.size() - 1]), 0u);  // ... the newest whole
  ASSERT_EQ(h[probe]->running.size(), running_at.size());
  for (size_t j = 0; j < running_at.size(); ++j)  // ... and rebuilt from the candidates
    EXPECT_EQ(beam_tokens(h, probe, h[probe]->running[j].id), running_at[j]) << j;
  SCOPED_TRACE("the beams' cache grew by " + std::to_string(cache_peak - cache0) + " bytes");
  expect_heap_growth_within(heap0, kBudget + (cache_peak - cache0));
}

// Speculative iterations are counted in the same budget. They hold nothing
// that grows with the context, so the heap grows by what the tree counts.
TEST(HistoryBudget, SpeculativeIterationsAreCountedInTheBudget) {
  testutil::TempDir tmp("history-budget-spec");
  const std::shared_ptr<const Model> m = long_context_model(tmp);
  BranchTree tree(4ull << 20, 8);
  tree.start();
  SpeculativeDecoder dec(m, m);  // the model drafts for itself: every draft is accepted
  SpecOptions opt;
  opt.k = 4;
  opt.max_new = 2200;
  opt.ignore_eos = true;
  opt.sampler.greedy = true;
  dec.start_tokens({1, 2, 3, 4, 5}, opt);
  uint64_t counted = 0, heap0 = 0, bytes0 = 0;
  int n = 0;
  while (SpecIterationPtr it = dec.step()) {
    counted += record_bytes(*it);
    tree.push_spec(std::move(it));
    ASSERT_EQ(tree.bytes(), counted) << "iteration " << n;  // the policy's count: every byte, after every iteration
    ASSERT_LE(tree.bytes(), tree.budget());
    if (++n == 16) {
      heap0 = heap_in_use();
      bytes0 = tree.bytes();
    }
  }
  EXPECT_EQ(dec.n_generated(), 2200);
  EXPECT_EQ(tree.bytes(), counted);
  EXPECT_LE(tree.bytes(), tree.budget());
  expect_heap_growth_within(heap0, tree.bytes() - bytes0);
}

// A paged step whose K/V rows the budget dropped still shows its pages:
// scrubbing back to it draws the same page frames, labels and hover answers
// as the step kept whole.
TEST(HistoryBudget, PagedStepsKeepTheirPagesWhenTheirRowsAreDropped) {
  const std::shared_ptr<const Model> m =
      load_model(testutil::llama_suite_dir() + "/llama_gqa3_bf16_untied_sharded_llama3");
  constexpr int kSteps = 40;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = kSteps;
  opt.ignore_eos = true;
  opt.sampler.greedy = true;
  opt.kv.block = 4;
  gen.start_tokens({1, 2, 3, 4, 5, 6}, opt);
  BranchTree tree(1, 4);       // a budget nothing but the newest records can meet
  std::vector<RecordPtr> all;  // the records whole, to compare with
  while (RecordPtr r = gen.step()) {
    all.push_back(r);
    tree.push(r);
  }
  const History& h = tree.current_history();
  ASSERT_EQ(h.size(), all.size());

  // A budget that holds exactly every record without its K/V rows (page
  // runs kept) and the newest four whole: every older step loses its rows.
  constexpr int kRecent = 4;
  uint64_t budget = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    budget += i + kRecent < all.size()
                  ? record_bytes(*strip_detail(*strip_detail(*all[i], kDetailAttention | kDetailLogits), kDetailKV))
                  : record_bytes(*all[i]);
  }
  BranchTree kept(budget, kRecent);
  for (const RecordPtr& r : all) kept.push(r);
  const History& k = kept.current_history();
  int checked = 0;
  for (size_t i = 0; i + kRecent < k.size(); ++i) {
    const StepRecord& whole = *all[i];
    const StepRecord& light = *k[i];
    ASSERT_TRUE(whole.kv_layout.paged());
    ASSERT_EQ(detail_of(light) & kDetailKV, 0u) << i;
    EXPECT_TRUE(light.k.empty() && light.v.empty()) << i;
    EXPECT_FALSE(light.kv_page_runs.empty()) << i;
    EXPECT_EQ(light.kv_page_runs, whole.kv_page_runs) << i;
    EXPECT_EQ(light.kv_held, whole.kv_held) << i;
    // The picture: the same frames and labels, scrubbed back to step i.
    ViewOptions view;
    const Scene a = build_scene(all, i + 1, view), b = build_scene(k.records(), i + 1, view);
    ASSERT_EQ(a.cache_marks.size(), b.cache_marks.size()) << i;
    ASSERT_GT(a.cache_marks.size(), 0u) << i;
    for (size_t j = 0; j < a.cache_marks.size(); ++j) {
      EXPECT_EQ(a.cache_marks[j].pos, b.cache_marks[j].pos);
      EXPECT_EQ(a.cache_marks[j].mark, b.cache_marks[j].mark);
      EXPECT_EQ(a.cache_marks[j].center, b.cache_marks[j].center);
      EXPECT_EQ(a.cache_marks[j].size, b.cache_marks[j].size);
    }
    std::vector<std::string> la, lb;
    for (const Label& l : a.labels)
      if (l.kind == LabelKind::kCacheMark) la.push_back(l.text);
    for (const Label& l : b.labels)
      if (l.kind == LabelKind::kCacheMark) lb.push_back(l.text);
    EXPECT_EQ(la, lb) << i;
    for (int p = 0; p < whole.seq_len; ++p) {
      int pa = -1, ra = -1, pb = -2, rb = -2;
      ASSERT_TRUE(page_of(whole, p, &pa, &ra));
      ASSERT_TRUE(page_of(light, p, &pb, &rb));
      EXPECT_EQ(pa, pb) << "step " << i << " position " << p;
      EXPECT_EQ(ra, rb);
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(k.size()) - kRecent);

  // A budget too small for anything but the newest records drops the older
  // records' page runs last, after their K/V rows; the newest four keep
  // theirs. Pages of 4 hold ceil(seq_len / 4) runs, each page's positions consecutive.
  EXPECT_GT(tree.trimmed().kv_dropped, 0);
  EXPECT_GT(tree.trimmed().pages_dropped, 0);
  for (size_t i = 0; i < h.size(); ++i) {
    const StepRecord& r = *all[i];
    ASSERT_EQ(r.kv_page_runs.size(), static_cast<size_t>((r.seq_len + 3) / 4)) << i;
    for (size_t j = 0; j < r.kv_page_runs.size(); ++j) {
      EXPECT_EQ(r.kv_page_runs[j].pos, static_cast<int>(j) * 4) << i;
      EXPECT_EQ(r.kv_page_runs[j].n, std::min(4, r.seq_len - static_cast<int>(j) * 4)) << i;
    }
    if (i + 4 >= h.size()) {
      EXPECT_EQ(h[i]->kv_page_runs, r.kv_page_runs) << i;
    } else {
      EXPECT_TRUE(h[i]->kv_page_runs.empty()) << i;
    }
  }
}

}  // namespace
}  // namespace kvscope
