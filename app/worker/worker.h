// The engine thread of the window. It alone owns the Generator; the UI
// thread sends it commands and receives immutable step records
// (shared_ptr<const StepRecord>, complete before they are published) through
// two small mutex-protected queues, so a slow forward never stalls a frame.
// Models load on a third, short-lived thread: the current model keeps
// generating until the new one is ready, and a load can be cancelled.
// No GL here: the threading tests (tests/test_worker.cpp) run headless and
// under ThreadSanitizer (cmake -DKVSCOPE_TSAN=ON).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "app/worker/decoding.h"
#include "model/arch/model.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"

namespace kvscope {

// The engine thread's commands, one small struct each.
namespace wcmd {
struct LoadModel {  // loads in the background, then drops the current generation
  std::string dir;
  int context = 0;  // Llama family: positions to reserve (LoadControl::context; 0 = the default)
};
struct Start {  // starts a new generation
  std::string prompt;
  GenerateOptions options;  // max_new, sampler, KV layout, ignore_eos apply to every strategy
  Strategy strategy;        // sampling, beam search or speculative decoding
  // The sender's id for this start, echoed by its kStarted. Starts can
  // overtake each other's events (a second reset before the first one's
  // kStarted arrived); the sender keeps only the kStarted of its newest.
  uint64_t request = 0;
};
struct Step {};   // one forward of the current generation
struct SetMode {  // from the next step on
  CacheMode mode = CacheMode::kKV;
};
struct SetSampler {  // from the next step on
  SamplerSettings sampler;
};
struct SetMaxNew {
  int max_new = 0;
};
struct Fork {               // Generator::fork(tokens, *record, token): force `token` at `record`'s step
  std::vector<int> tokens;  // the sequence before `record` chose (prompt included)
  RecordPtr record;         // the step whose choice is replaced
  int token = -1;
};
struct ModelReady {  // internal: the loader thread hands over `model` (load `load_id`)
  std::shared_ptr<const Model> model;
  uint64_t load_id = 0;
};
}  // namespace wcmd

using WorkerCommand = std::variant<wcmd::LoadModel, wcmd::Start, wcmd::Step, wcmd::SetMode, wcmd::SetSampler,
                                   wcmd::SetMaxNew, wcmd::Fork, wcmd::ModelReady>;

// Which command an error event answers.
enum class WorkerOp { kLoadModel, kStart, kStep, kSetMode, kSetSampler, kSetMaxNew, kFork };
WorkerOp op_of(const WorkerCommand& c);  // ModelReady counts as kLoadModel

struct WorkerEvent {
  enum class Kind {
    kModelLoaded,  // model
    kStarted,      // generation, record-less: prompt accepted
    kRecord,       // generation, step: the strategy's record, beam-search step or speculative iteration
    kDone,         // generation, reason
    kError,        // message; `failed` says which command failed
    kForked,       // generation, step = the forced record (a RecordPtr), cache_reused
  };
  Kind kind = Kind::kRecord;
  std::shared_ptr<const Model> model;
  StepOutput step;
  // The sampling record `step` holds (kRecord of a sampling generation, kForked), else null.
  RecordPtr record() const {
    const RecordPtr* r = std::get_if<RecordPtr>(&step);
    return r ? *r : nullptr;
  }
  StopReason reason = StopReason::kNone;
  uint64_t generation = 0;  // which kStart the event belongs to
  uint64_t request = 0;     // kStarted, or kError of a Start: the WorkerCommand::request it answers
  std::string message;
  WorkerOp failed = WorkerOp::kStep;
  bool cache_reused = false;  // kForked: the KV cache was cut back to the fork point and kept
};

class EngineWorker {
 public:
  // `wake` is called from the worker (and loader) thread after each event
  // and on load progress (e.g. glfwPostEmptyEvent, so a sleeping window
  // wakes up). It must be thread-safe.
  explicit EngineWorker(std::function<void()> wake = {});
  // Cancels a load in progress, finishes the forward in progress, drops the
  // rest, joins every thread.
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // LoadModel starts loading at once (cancelling a load in progress,
  // which then reports nothing); every other command queues for the engine thread.
  void send(WorkerCommand cmd);
  // Every event published since the last call (never blocks on a forward).
  std::vector<WorkerEvent> poll();
  // Engine commands queued or running (a background load is not counted:
  // the current model keeps stepping meanwhile).
  int pending() const;
  // Drops queued (not yet started) step commands, e.g. on reset.
  void cancel_steps();

  // True from a LoadModel until its kModelLoaded or kError is published.
  bool loading() const;
  // Fraction of the weights read by the load in progress, 0..1.
  float load_progress() const;
  // The load in progress stops at the next tensor and reports
  // kError{failed = kLoadModel, message "...: loading cancelled"}.
  void cancel_load();

 private:
  struct LoadJob {
    uint64_t id = 0;
    std::string dir;
    int context = 0;
    std::atomic<bool> cancel{false};      // set by cancel_load() or a newer load
    std::atomic<bool> superseded{false};  // a newer load replaced it: report nothing
    std::atomic<bool> finished{false};    // the loader thread is about to return
    std::atomic<float> progress{0.0f};
    std::thread thread;
  };

  void run();
  void execute(const WorkerCommand& cmd);
  void on_model_ready(const wcmd::ModelReady& c);
  void on_start(const wcmd::Start& c);
  std::shared_ptr<const Model> draft_model(const std::string& dir);
  void on_step();
  void on_fork(const wcmd::Fork& c);
  void publish(WorkerEvent ev);
  void load(LoadJob* job);  // on the job's thread
  void join_finished_loads_locked();

  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkerCommand> in_;
  std::deque<WorkerEvent> out_;
  int running_ = 0;
  bool quit_ = false;
  // Loads (guarded by mu_): the newest, and older ones still winding down.
  std::shared_ptr<LoadJob> load_;
  std::vector<std::shared_ptr<LoadJob>> retired_loads_;
  uint64_t next_load_id_ = 0;
  bool loading_ = false;

  // Engine-thread state.
  std::shared_ptr<const Model> model_;
  std::optional<Driver> driver_;  // the current generation's (none before the first start and after a model change)
  Generator* sampling();          // the driver when it samples, else null
  std::shared_ptr<const Model> draft_;  // the last draft model loaded (kept for the next start)
  uint64_t generation_ = 0;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace kvscope
