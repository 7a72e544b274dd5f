#include "app/worker/serve_runner.h"

#include <algorithm>
#include <exception>

namespace kvscope {

int ServeRuns::steps() const {
  size_t n = 0;
  for (const ServeRun& r : runs) n = std::max(n, r.steps.size());
  return static_cast<int>(n);
}

ServeRunner::~ServeRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServeRunner::start(std::shared_ptr<const Model> model, std::vector<std::unique_ptr<Server>> servers) {
  ServeRuns runs;
  for (const auto& s : servers) {
    auto info = std::make_shared<ServeRunInfo>();
    info->model = model;
    info->config = s->scheduler().config();
    info->block = s->scheduler().block();
    info->requests = s->requests();
    runs.runs.push_back(ServeRun{info, {}, s->done()});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs.version = pub_.version + 1;
    pub_ = std::move(runs);
    servers_ = std::move(servers);
    ++start_id_;
    wanted_ = 0;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();
}

void ServeRunner::request_steps(int n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (servers_.empty()) return;
    wanted_ = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(wanted_) + n, 1 << 30));
    pub_.busy = true;
  }
  cv_.notify_all();
}

void ServeRunner::read(ServeRuns& into) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (into.version != pub_.version) into = pub_;
  into.busy = pub_.busy;
}

// One step of every unfinished run, on the engine thread. The servers are
// taken out of the lock while they step, and put back unless a start
// replaced them meanwhile. False when nothing is left to step.
bool ServeRunner::step_all() {
  std::vector<std::unique_ptr<Server>> servers;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    servers = std::move(servers_);
    id = start_id_;
  }
  std::vector<ServeStepPtr> out(servers.size());
  std::string error;
  try {
    for (size_t i = 0; i < servers.size(); ++i)
      if (!servers[i]->done()) out[i] = servers[i]->step();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (id != start_id_) return true;  // replaced: drop these
  bool left = false;
  for (size_t i = 0; i < servers.size(); ++i) {
    if (out[i]) pub_.runs[i].steps.push_back(out[i]);
    pub_.runs[i].done = servers[i]->done();
    left = left || !pub_.runs[i].done;
  }
  pub_.error = error;
  ++pub_.version;
  if (!error.empty() || !left) {
    wanted_ = 0;
    servers.clear();
  }
  servers_ = std::move(servers);
  wanted_ = std::max(0, wanted_ - 1);
  pub_.busy = wanted_ > 0;
  return left && error.empty();
}

void ServeRunner::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || (wanted_ > 0 && !servers_.empty()); });
      if (stop_) return;
    }
    step_all();
    if (wake_) wake_();
  }
}

}  // namespace kvscope
