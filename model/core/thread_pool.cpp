#include "model/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

namespace kvscope {
namespace {

// How long a thread spins for the next job before sleeping. A decode step
// issues its parallel products back to back, microseconds apart.
constexpr auto kSpin = std::chrono::microseconds(50);

std::atomic<int> g_default_threads{0};  // set_default_threads' n; 0: not set

// $KVSCOPE_THREADS: 0 when unset or empty, -1 unless digits only, 1..kMaxThreads.
int env_threads() {
  const char* env = std::getenv("KVSCOPE_THREADS");
  if (!env || !*env) return 0;
  const std::string s = env;
  if (s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int n = std::stoi(s);
  return n >= 1 && n <= ThreadPool::kMaxThreads ? n : -1;
}

}  // namespace

void ThreadPool::set_default_threads(int n) {
  g_default_threads = std::clamp(n, 1, kMaxThreads);
}

bool ThreadPool::default_threads_chosen() {
  return g_default_threads.load() > 0 || env_threads() > 0;
}

std::string ThreadPool::threads_env_problem() {
  if (env_threads() >= 0) return "";
  return "KVSCOPE_THREADS: expected a whole number of threads in 1.." + std::to_string(kMaxThreads) + ", got \"" +
         std::getenv("KVSCOPE_THREADS") + "\" (unset it for the default)";
}

int ThreadPool::default_threads() {
  if (const int n = g_default_threads.load(); n > 0) return n;
  if (const int n = env_threads(); n > 0) return n;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = default_threads();
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t cost) noexcept {
  const int64_t max_parts = std::min<int64_t>({static_cast<int64_t>(size()), n, cost / kMinShareCost});
  const int parts = static_cast<int>(std::max<int64_t>(1, max_parts));
  if (parts == 1 || cost < kMinParallelCost) {
    if (n > 0) fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_.store(parts - 1);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  fn(0, n / parts);  // the caller's share
  const auto t0 = std::chrono::steady_clock::now();
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (std::chrono::steady_clock::now() - t0 > kSpin) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return pending_.load() == 0; });
      break;
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next job, then sleep until woken.
    const auto t0 = std::chrono::steady_clock::now();
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() - t0 < kSpin) {
    }
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int parts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      seen = generation_.load();
      if (stop_) return;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index >= parts) continue;  // a small job: fewer shares than threads
    (*job)(n * index / parts, n * (index + 1) / parts);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace kvscope
