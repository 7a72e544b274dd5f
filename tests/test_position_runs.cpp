// PositionRuns (held positions as intervals) against a plain std::set of the
// same positions: membership, count, iteration, expansion and the runs
// themselves (maximal stretches of consecutive positions, counted by hand).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "model/core/error.h"
#include "model/decoding/step_record.h"

namespace kvscope {
namespace {

TEST(PositionRuns, AgreeWithASetOfThePositions) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::set<int> ref;
    const int span = 1 + static_cast<int>(rng() % 80);
    const unsigned keep = 1 + rng() % 4;  // keep ~1/keep of [0, span)
    for (int p = 0; p < span; ++p)
      if (rng() % keep == 0) ref.insert(p);
    const std::vector<int> sorted(ref.begin(), ref.end());
    const PositionRuns runs = PositionRuns::from_sorted(sorted);
    EXPECT_EQ(runs.count(), static_cast<int>(ref.size()));
    EXPECT_EQ(runs.empty(), ref.empty());
    EXPECT_EQ(runs.positions(), sorted);
    EXPECT_EQ(std::vector<int>(runs.begin(), runs.end()), sorted);
    for (int p = -2; p < span + 2; ++p) EXPECT_EQ(runs.contains(p), ref.count(p) == 1) << p;
    // Runs: one per position whose predecessor is not held.
    size_t starts = 0;
    for (int p : ref) starts += ref.count(p - 1) == 0;
    ASSERT_EQ(runs.runs().size(), starts);
    for (const PositionRuns::Run& r : runs.runs()) {
      EXPECT_GE(r.n, 1);
      EXPECT_EQ(ref.count(r.first - 1), 0u);
      EXPECT_EQ(ref.count(r.first + r.n), 0u);
    }
  }
}

TEST(PositionRuns, AWindowWithSinksIsTwoRunsAndADenseCacheOne) {
  // Sinks [0, 4) and a window of 8 over 100 positions: [92, 100).
  std::vector<int> held = {0, 1, 2, 3};
  for (int p = 92; p < 100; ++p) held.push_back(p);
  const PositionRuns w = PositionRuns::from_sorted(held);
  ASSERT_EQ(w.runs().size(), 2u);
  EXPECT_EQ(w.runs()[0], (PositionRuns::Run{0, 4}));
  EXPECT_EQ(w.runs()[1], (PositionRuns::Run{92, 8}));
  EXPECT_FALSE(w.contains(4));
  EXPECT_FALSE(w.contains(91));
  EXPECT_TRUE(w.contains(99));
  PositionRuns dense;
  for (int p = 0; p < 1000; ++p) dense.push_back(p);
  EXPECT_EQ(dense.runs().size(), 1u);
  EXPECT_EQ(dense.count(), 1000);
}

TEST(PositionRuns, RefusesPositionsOutOfOrder) {
  PositionRuns r;
  r.push_back(3);
  EXPECT_THROW(r.push_back(3), Error);
  EXPECT_THROW(r.push_back(1), Error);
  EXPECT_THROW(PositionRuns::from_sorted({5, 2}), Error);
  // from_sorted reads stretches of consecutive positions: a repeat or a step
  // back right after one is refused too.
  EXPECT_THROW(PositionRuns::from_sorted({1, 2, 3, 3}), Error);
  EXPECT_THROW(PositionRuns::from_sorted({1, 2, 3, 2, 3}), Error);
  EXPECT_THROW(PositionRuns::from_sorted({7, 8, 0, 1}), Error);
}

}  // namespace
}  // namespace kvscope
