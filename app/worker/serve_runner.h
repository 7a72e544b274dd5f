// The Serving view's engine thread: it steps one or more Servers
// (model/serving/server.h; two for "static vs continuous", in lockstep) as
// many engine steps as the view asked for, and publishes each step's
// immutable ServeStep record. A step is one batched forward, which can take
// long on a large model, so it never runs on the UI thread. The Session owns
// the runner; the view reads what it published (ServeRuns), never a Server.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/arch/model.h"
#include "model/serving/server.h"

namespace kvscope {

using ServeStepPtr = std::shared_ptr<const ServeStep>;

// What a run serves, copied from its Server before the runner takes it.
struct ServeRunInfo {
  std::shared_ptr<const Model> model;  // its tokenizer names the tokens
  SchedulerConfig config;
  int block = 0;                       // positions per pool block
  std::vector<ServeRequest> requests;  // (request) id, prompt, max_new, arrive
};

struct ServeRun {
  std::shared_ptr<const ServeRunInfo> info;
  std::vector<ServeStepPtr> steps;  // every step so far, in order
  bool done = false;                // every request finished
};

// Everything the runner published: one ServeRun per Server.
struct ServeRuns {
  std::vector<ServeRun> runs;
  uint64_t version = 0;  // bumped by every start and every step
  std::string error;     // a step that failed (the runs stop there)
  bool busy = false;     // steps asked for are being computed
  // Engine steps of the longest run so far.
  int steps() const;
};

class ServeRunner {
 public:
  // `wake` is called from the runner's thread after each step it publishes
  // (thread-safe, e.g. glfwPostEmptyEvent, so a sleeping window shows it).
  explicit ServeRunner(std::function<void()> wake = {}) : wake_(std::move(wake)) {}
  ~ServeRunner();
  ServeRunner(const ServeRunner&) = delete;
  ServeRunner& operator=(const ServeRunner&) = delete;

  // Replaces the runs (a step in flight finishes first and is dropped).
  // `model`: the one every server runs.
  void start(std::shared_ptr<const Model> model, std::vector<std::unique_ptr<Server>> servers);
  // Asks for `n` more engine steps of every unfinished run.
  void request_steps(int n);
  // Everything published so far (copied when it changed since `version`, else only the flags).
  void read(ServeRuns& into) const;

 private:
  void run();
  bool step_all();

  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ServeRuns pub_;
  std::vector<std::unique_ptr<Server>> servers_;  // the engine thread's while it steps
  uint64_t start_id_ = 0;                         // bumped by start(): a step of older servers is dropped
  int wanted_ = 0;                                // steps asked for and not yet run
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvscope
