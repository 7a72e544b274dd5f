// The engine's fork-join pool: every index of [0, n) is handed out exactly
// once, in contiguous shares; small jobs stay on the caller or use fewer
// shares than threads; back-to-back jobs (a decode step issues dozens) never
// mix. Also built into kvscope_worker_tests, so it runs under ThreadSanitizer.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "model/core/thread_pool.h"

namespace kvscope {
namespace {

// Runs one job and returns the shares it was split into, sorted.
std::vector<std::pair<int64_t, int64_t>> shares_of(ThreadPool& pool, int64_t n, int64_t cost,
                                                   std::vector<int>* hits = nullptr) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> shares;
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        if (hits)
          for (int64_t i = b; i < e; ++i) (*hits)[static_cast<size_t>(i)] += 1;  // disjoint shares: no race
        std::lock_guard<std::mutex> lock(mu);
        shares.emplace_back(b, e);
      },
      cost);
  std::sort(shares.begin(), shares.end());
  return shares;
}

TEST(ThreadPool, EveryIndexExactlyOnceInContiguousShares) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000}) {
      for (int64_t cost : {int64_t{0}, ThreadPool::kMinParallelCost, 3 * ThreadPool::kMinShareCost, INT64_MAX}) {
        std::vector<int> hits(static_cast<size_t>(n), 0);
        const auto shares = shares_of(pool, n, cost, &hits);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "index " << i;
        // Shares tile [0, n) in order, none empty.
        int64_t next = 0;
        for (const auto& [b, e] : shares) {
          EXPECT_EQ(b, next);
          EXPECT_LT(b, e);
          next = e;
        }
        EXPECT_EQ(next, n);
        // How many: one below the threshold; otherwise at most one per
        // thread, per index and per kMinShareCost of work.
        const int64_t want =
            cost < ThreadPool::kMinParallelCost
                ? 1
                : std::max<int64_t>(1, std::min<int64_t>({threads, n, cost / ThreadPool::kMinShareCost}));
        EXPECT_EQ(static_cast<int64_t>(shares.size()), want) << threads << " threads, n " << n << ", cost " << cost;
      }
    }
  }
}

TEST(ThreadPool, SmallJobsRunOnTheCallerAlone) {
  ThreadPool pool(4);
  std::thread::id ran_on;
  int calls = 0;
  pool.parallel_for(
      100,
      [&](int64_t b, int64_t e) {
        ran_on = std::this_thread::get_id();
        ++calls;
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 100);
      },
      ThreadPool::kMinParallelCost - 1);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  pool.parallel_for(0, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1) << "an empty range runs nothing";
}

TEST(ThreadPool, BackToBackJobsNeverMix) {
  // Alternating big and small jobs, as a decode step does, with results
  // checked after each: a worker still on job k must not run job k + 1's
  // function or miss its share.
  ThreadPool pool(3);
  std::vector<int64_t> out(600);
  for (int round = 0; round < 3000; ++round) {
    const int64_t n = round % 3 == 0 ? 600 : 2 + round % 50;
    const int64_t cost = round % 2 ? INT64_MAX : ThreadPool::kMinShareCost * 2;
    std::fill(out.begin(), out.end(), -1);
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = round * 1000 + i;
        },
        cost);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], round * 1000 + i) << "round " << round;
    for (int64_t i = n; i < 600; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], -1) << "round " << round;
  }
}

// $KVSCOPE_THREADS is a whole number in 1..kMaxThreads; anything else is
// named for the front end to report and never sizes a pool.
TEST(ThreadPool, ThreadsEnvOutsideItsRangeIsNamed) {
  const char* old = std::getenv("KVSCOPE_THREADS");
  const std::string saved = old ? old : "";
  unsetenv("KVSCOPE_THREADS");
  const int fallback = ThreadPool::default_threads();
  for (const char* bad : {"abc", "-1", "0", "100000", "257", "4x", " 4"}) {
    setenv("KVSCOPE_THREADS", bad, 1);
    const std::string p = ThreadPool::threads_env_problem();
    EXPECT_NE(p.find("KVSCOPE_THREADS: expected a whole number of threads in 1..256, got \"" + std::string(bad) + "\""),
              std::string::npos)
        << bad << ": " << p;
    EXPECT_EQ(ThreadPool::default_threads(), fallback) << bad << ": passed over, as if unset";
  }
  setenv("KVSCOPE_THREADS", "", 1);  // empty reads as unset, as for every KVSCOPE_ variable
  EXPECT_EQ(ThreadPool::threads_env_problem(), "");
  EXPECT_EQ(ThreadPool::default_threads(), fallback);
  for (const char* good : {"1", "16", "256"}) {
    setenv("KVSCOPE_THREADS", good, 1);
    EXPECT_EQ(ThreadPool::threads_env_problem(), "") << good;
    EXPECT_TRUE(ThreadPool::default_threads_chosen());
  }
  unsetenv("KVSCOPE_THREADS");
  EXPECT_EQ(ThreadPool::threads_env_problem(), "");
  if (old) setenv("KVSCOPE_THREADS", saved.c_str(), 1);
}

}  // namespace
}  // namespace kvscope
