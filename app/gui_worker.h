// The engine thread of the window. It alone owns the Model being loaded and
// the Generator; the UI thread sends it commands and receives immutable
// step records (shared_ptr<const StepRecord>) through two small
// mutex-protected queues, so a slow forward never stalls a frame.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "generator.h"
#include "model.h"

namespace kvscope {

struct WorkerCommand {
  enum class Kind {
    kLoadModel,   // text = folder; on success the current generation is dropped
    kStart,       // text = prompt, options = how to generate; starts a new generation
    kStep,        // one forward of the current generation
    kSetMode,     // mode, from the next step on
    kSetSampler,  // sampler, from the next step on
    kSetMaxNew,   // max_new
  };
  WorkerCommand() = default;
  WorkerCommand(Kind k) : kind(k) {}  // NOLINT: implicit, so send({Kind::kStep}) reads well
  Kind kind = Kind::kStep;
  std::string text;
  GenerateOptions options;
  CacheMode mode = CacheMode::kKV;
  SamplerSettings sampler;
  int max_new = 0;
};

struct WorkerEvent {
  enum class Kind {
    kModelLoaded,  // model
    kStarted,      // generation, record-less: prompt accepted
    kRecord,       // generation, record
    kDone,         // generation, reason
    kError,        // message; `failed` says which command failed
  };
  Kind kind = Kind::kRecord;
  std::shared_ptr<const Model> model;
  RecordPtr record;
  StopReason reason = StopReason::kNone;
  uint64_t generation = 0;  // which kStart the event belongs to
  std::string message;
  WorkerCommand::Kind failed = WorkerCommand::Kind::kStep;
};

class EngineWorker {
 public:
  // `wake` is called from the worker thread after each event (e.g.
  // glfwPostEmptyEvent, so a sleeping window wakes up).
  explicit EngineWorker(std::function<void()> wake = {});
  ~EngineWorker();  // finishes the command in progress, drops the rest, joins
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  void send(WorkerCommand cmd);
  // Every event published since the last call (never blocks on a forward).
  std::vector<WorkerEvent> poll();
  // Commands queued or running.
  int pending() const;
  // Drops queued (not yet started) step commands, e.g. on reset.
  void cancel_steps();

 private:
  void run();
  void execute(const WorkerCommand& cmd);
  void publish(WorkerEvent ev);

  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkerCommand> in_;
  std::deque<WorkerEvent> out_;
  int running_ = 0;
  bool quit_ = false;

  // Worker-thread state.
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Generator> gen_;
  uint64_t generation_ = 0;
  CacheMode mode_ = CacheMode::kKV;
  SamplerSettings sampler_;
  int max_new_ = 0;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace kvscope
