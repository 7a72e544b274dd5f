#include "app/worker/kv_scoring.h"

#include <exception>

namespace kvscope {

std::vector<KVLayout> layouts_to_compare(const KVLayout& run, const KVLayout& dense) {
  std::vector<KVLayout> out = {dense};
  if (run != dense) out.push_back(run);
  if (run.evicting()) {
    // The same budget under the other rule, and a window holding as many
    // positions per layer (4 of them sinks when the budget has room).
    KVLayout win = run;
    win.evict = KVEvict::kNone;
    win.budget = 0;
    win.snap_window = win.snap_pool = 0;
    win.sinks = run.budget - 4 > 4 ? 4 : 0;  // (sinks < window)
    win.window = run.budget - win.sinks;
    out.push_back(win);
    KVLayout other = run;  // last: the plot marks where its budget starts to evict
    other.evict = run.evict == KVEvict::kTova ? KVEvict::kH2O : KVEvict::kTova;
    other.snap_window = other.snap_pool = 0;  // SnapKV's run: compared with TOVA at the same budget
    out.push_back(other);
  }
  if (run.windowed() && run.window > 4) {
    KVLayout other = run;
    other.sinks = run.sinks > 0 ? 0 : 4;
    out.push_back(other);
  }
  return out;
}

LayoutScorer::~LayoutScorer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LayoutScorer::request(LayoutScoreRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::make_unique<LayoutScoreRequest>(std::move(r));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
}

bool LayoutScorer::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || pending_ != nullptr;
}

std::shared_ptr<const LayoutScoreResult> LayoutScorer::result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

void LayoutScorer::run() {
  for (;;) {
    std::unique_ptr<LayoutScoreRequest> req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || pending_ != nullptr; });
      if (stop_) return;
      req = std::move(pending_);
      running_ = true;
    }
    auto res = std::make_shared<LayoutScoreResult>();
    res->request = *req;
    try {
      Engine engine(*req->model);
      KVCache dense(req->layouts.at(0));
      for (size_t i = 0; i < req->layouts.size(); ++i) {
        KVCache cache(req->layouts[i]);
        res->scores.push_back(score_layout(engine, cache, i == 0 ? nullptr : &dense, req->tokens));
      }
    } catch (const std::exception& e) {
      res->error = e.what();
      res->scores.clear();
    }
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(res);
    running_ = false;
  }
}

}  // namespace kvscope
