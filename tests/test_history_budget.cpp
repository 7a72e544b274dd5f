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

#include <filesystem>
#include <string>

#include "generator.h"
#include "model.h"
#include "numpy_ref_util.h"
#include "teach_branch.h"
#include "teach_history.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

// Bytes malloc has handed out and not had back (0 where the allocator does
// not say, e.g. under a sanitizer's allocator).
uint64_t heap_in_use() {
  return static_cast<uint64_t>(mallinfo2().uordblks);
}

TEST(HistoryBudget, ThousandsOfStepsAtLongContextStayWithinTheBudget) {
  testutil::TempDir tmp("history-budget");
  const std::string dir = tmp / "llama-long";
  fs::copy(testutil::llama_suite_dir() + "/llama_gqa1_f32_tied_single", dir, fs::copy_options::recursive);
  testutil::json c = testutil::read_json(dir + "/config.json");
  c["max_position_embeddings"] = 4096;  // RoPE: no learned table to grow
  testutil::write_file(dir + "/config.json", c.dump(1));
  LoadControl control;
  control.context = 2400;
  const std::shared_ptr<const Model> m = load_model(dir, control);

  constexpr uint64_t kBudget = 4ull << 20;
  constexpr int kKeepRecent = 8;
  constexpr int kSteps = 2200;
  BranchTree tree(kBudget, kKeepRecent);
  tree.start();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = kSteps;
  opt.ignore_eos = true;
  opt.keep_history = false;  // the tree owns the records, as in the window
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
  EXPECT_EQ(h.detail(1) & kDetailKV, 0u);  // the oldest went further: K/V rows and the cache map too
  // The heap agrees with the count: what the history holds grew by no more
  // than the budget (the engine's scratch and the generator's token list aside).
  const uint64_t heap1 = heap_in_use();
  if (heap0 == 0 || heap1 == 0) GTEST_SKIP() << "this allocator does not report its heap (mallinfo2)";
  EXPECT_LE(heap1, heap0 + kBudget + (1ull << 20)) << "heap grew by " << (heap1 - heap0) << " bytes";
}

}  // namespace
}  // namespace kvscope
