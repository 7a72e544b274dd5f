// A small fork-join pool for the engine's matrix products. OpenMP's default
// spin-waiting collapses when another busy process (or the renderer on the
// UI thread) shares the cores, so the pool spins only briefly, then sleeps.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvscope {

class ThreadPool {
 public:
  // n_threads counts the caller, which always takes a share; 0 = default_threads().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(begin, end) on contiguous, equal shares of [0, n); returns when
  // all are done. Not re-entrant: one parallel_for at a time per pool.
  // `cost` (multiply-adds, roughly) below kMinParallelCost runs on the
  // caller alone: waking a thread costs more than a tiny product. Above it,
  // each share gets at least kMinShareCost, so on many cores a small product
  // is split only as far as that pays. fn must not throw: an exception
  // ends the program (as it would on a worker thread). noexcept also spares
  // the WebAssembly build's JS exception handling a trampoline per call.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t cost = INT64_MAX) noexcept;
  static constexpr int64_t kMinParallelCost = 1 << 16;
  static constexpr int64_t kMinShareCost = 1 << 15;
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // The size of a pool built with 0: set_default_threads' n when set, else
  // $KVSCOPE_THREADS, else the number of cores.
  static int default_threads();
  // For pools built from now on (the window leaves a core to its renderer). n in [1, kMaxThreads].
  static void set_default_threads(int n);
  // True when set_default_threads or a valid $KVSCOPE_THREADS chose the size.
  static bool default_threads_chosen();
  // "" when $KVSCOPE_THREADS is unset or a whole number in 1..kMaxThreads,
  // else a one-line message naming it and that range. default_threads()
  // passes over a bad value; a front end reports it (the CLI: a usage error).
  static std::string threads_env_problem();
  static constexpr int kMaxThreads = 256;

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 1;  // shares of the current job; workers 1 .. job_parts_ - 1 take one each
};

}  // namespace kvscope
