#include "app/worker/worker.h"

#include <algorithm>
#include <exception>

#include "model/core/error.h"
#include "model/core/overloaded.h"

namespace kvscope {

EngineWorker::EngineWorker(std::function<void()> wake) : wake_(std::move(wake)), thread_([this] { run(); }) {}

EngineWorker::~EngineWorker() {
  std::vector<std::shared_ptr<LoadJob>> loads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    in_.clear();
    loads = std::move(retired_loads_);
    if (load_) loads.push_back(std::move(load_));
    for (auto& job : loads) {
      job->superseded = true;
      job->cancel = true;
    }
  }
  cv_.notify_all();
  thread_.join();
  // Outside the lock: a loader takes it to report.
  for (auto& job : loads)
    if (job->thread.joinable()) job->thread.join();
}

WorkerOp op_of(const WorkerCommand& c) {
  return std::visit(
      overloaded{[](const wcmd::LoadModel&) { return WorkerOp::kLoadModel; },
                 [](const wcmd::Start&) { return WorkerOp::kStart; }, [](const wcmd::Step&) { return WorkerOp::kStep; },
                 [](const wcmd::SetMode&) { return WorkerOp::kSetMode; },
                 [](const wcmd::SetSampler&) { return WorkerOp::kSetSampler; },
                 [](const wcmd::SetMaxNew&) { return WorkerOp::kSetMaxNew; },
                 [](const wcmd::Fork&) { return WorkerOp::kFork; },
                 [](const wcmd::ModelReady&) { return WorkerOp::kLoadModel; }},
      c);
}

void EngineWorker::send(WorkerCommand cmd) {
  if (const auto* lm = std::get_if<wcmd::LoadModel>(&cmd)) {
    auto job = std::make_shared<LoadJob>();
    job->dir = lm->dir;
    job->context = lm->context;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (quit_) return;
      join_finished_loads_locked();
      if (load_) {
        // The older load stops at its next tensor and reports nothing.
        load_->superseded = true;
        load_->cancel = true;
        retired_loads_.push_back(std::move(load_));
      }
      job->id = ++next_load_id_;
      load_ = job;
      loading_ = true;
      job->thread = std::thread([this, j = job.get()] { load(j); });
    }
    if (wake_) wake_();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_.push_back(std::move(cmd));
  }
  cv_.notify_one();
}

// Joins loader threads that have returned (or are about to: `finished` is
// their last store), so a long session does not pile up thread handles.
void EngineWorker::join_finished_loads_locked() {
  auto done = [](const std::shared_ptr<LoadJob>& j) { return j->finished.load(); };
  for (auto& j : retired_loads_)
    if (done(j) && j->thread.joinable()) j->thread.join();
  retired_loads_.erase(std::remove_if(retired_loads_.begin(), retired_loads_.end(), done), retired_loads_.end());
}

std::vector<WorkerEvent> EngineWorker::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerEvent> out(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
  out_.clear();
  return out;
}

int EngineWorker::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = running_;
  for (const WorkerCommand& c : in_) n += !std::holds_alternative<wcmd::ModelReady>(c);
  return n;
}

void EngineWorker::cancel_steps() {
  std::lock_guard<std::mutex> lock(mu_);
  in_.erase(std::remove_if(in_.begin(), in_.end(),
                           [](const WorkerCommand& c) { return std::holds_alternative<wcmd::Step>(c); }),
            in_.end());
}

bool EngineWorker::loading() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loading_;
}

float EngineWorker::load_progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loading_ && load_ ? load_->progress.load() : 0.0f;
}

void EngineWorker::cancel_load() {
  std::lock_guard<std::mutex> lock(mu_);
  if (loading_ && load_) load_->cancel = true;
}

void EngineWorker::publish(WorkerEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    out_.push_back(std::move(ev));
  }
  if (wake_) wake_();
}

void EngineWorker::load(LoadJob* job) {
  LoadControl control;
  float shown = 0.0f;
  control.on_progress = [&](float p) {
    job->progress = p;
    if (p - shown >= 0.01f || p >= 1.0f) {  // wake the window for every visible percent only
      shown = p;
      if (wake_) wake_();
    }
  };
  control.cancel = &job->cancel;
  control.context = job->context;
  try {
    std::shared_ptr<const Model> m = load_model(job->dir, control);
    // The engine thread swaps it in between two forwards.
    wcmd::ModelReady ready{std::move(m), job->id};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!quit_ && !job->superseded) in_.push_back(std::move(ready));
    }
    cv_.notify_one();
  } catch (const std::exception& e) {
    bool report = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      report = !quit_ && !job->superseded && load_.get() == job;
      if (report) loading_ = false;
    }
    if (report) {
      WorkerEvent ev;
      ev.kind = WorkerEvent::Kind::kError;
      ev.message = e.what();
      ev.failed = WorkerOp::kLoadModel;
      publish(std::move(ev));
    }
  }
  job->finished = true;
}

void EngineWorker::run() {
  while (true) {
    WorkerCommand cmd;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return quit_ || !in_.empty(); });
      if (quit_) return;
      cmd = std::move(in_.front());
      in_.pop_front();
      running_ = 1;
    }
    try {
      execute(cmd);
    } catch (const std::exception& e) {
      // Anything the user can get wrong (an empty prompt, a prompt longer
      // than the context) arrives here as kvscope::Error; report it, keep the
      // current state.
      WorkerEvent ev;
      ev.kind = WorkerEvent::Kind::kError;
      ev.message = e.what();
      ev.failed = op_of(cmd);
      ev.generation = generation_;
      if (const auto* start = std::get_if<wcmd::Start>(&cmd)) ev.request = start->request;
      publish(std::move(ev));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = 0;
    }
    if (wake_) wake_();
  }
}

void EngineWorker::execute(const WorkerCommand& cmd) {
  std::visit(overloaded{
                 [](const wcmd::LoadModel&) {},  // handled by send()
                 [this](const wcmd::ModelReady& c) { on_model_ready(c); },
                 [this](const wcmd::Start& c) { on_start(c); },
                 [this](const wcmd::Step&) { on_step(); },
                 // (the strategies other than sampling always run on the KV cache with their own settings)
                 [this](const wcmd::SetMode& c) {
                   if (Generator* g = sampling()) g->set_mode(c.mode);
                 },
                 [this](const wcmd::SetSampler& c) {
                   if (Generator* g = sampling()) g->set_sampler(c.sampler);
                 },
                 [this](const wcmd::SetMaxNew& c) {
                   if (Generator* g = sampling()) g->set_max_new(c.max_new);
                 },
                 [this](const wcmd::Fork& c) { on_fork(c); },
             },
             cmd);
}

// The draft is small: it loads on the engine thread, once per folder.
std::shared_ptr<const Model> EngineWorker::draft_model(const std::string& dir) {
  if (dir.empty()) throw Error("speculative decoding: no draft model folder chosen");
  if (!draft_ || draft_->dir != dir) {
    try {
      draft_ = load_model(dir);
    } catch (const std::exception& e) {
      throw Error(std::string("draft model: ") + e.what());
    }
  }
  return draft_;
}

Generator* EngineWorker::sampling() {
  std::unique_ptr<Generator>* g = driver_ ? std::get_if<std::unique_ptr<Generator>>(&*driver_) : nullptr;
  return g ? g->get() : nullptr;
}

void EngineWorker::on_start(const wcmd::Start& c) {
  if (!model_) throw Error("no model is loaded yet");
  // A refused start (the strategy against the KV layout, an empty or too long
  // prompt, a draft with another tokenizer) throws first: the current generation stays.
  driver_ = make_driver(
      c.strategy, model_, [this](const std::string& dir) { return draft_model(dir); }, c.prompt, c.options);
  ++generation_;
  WorkerEvent ev;
  ev.kind = WorkerEvent::Kind::kStarted;
  ev.generation = generation_;
  ev.request = c.request;
  ev.model = model_;
  publish(std::move(ev));
}

void EngineWorker::on_model_ready(const wcmd::ModelReady& c) {
  bool current = false, cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current = load_ && load_->id == c.load_id && !load_->superseded;
    cancelled = current && load_->cancel;
    if (current) loading_ = false;
  }
  if (!current) return;  // a newer load replaced it
  // Cancelled after the last tensor was read: still honour it.
  if (cancelled) throw Error(c.model->dir + ": loading cancelled");
  model_ = c.model;
  driver_.reset();
  ++generation_;  // the old generation is gone: its late commands fail under its id
  WorkerEvent ev;
  ev.kind = WorkerEvent::Kind::kModelLoaded;
  ev.model = model_;
  ev.generation = generation_;
  publish(std::move(ev));
}

void EngineWorker::on_step() {
  WorkerEvent ev;
  ev.kind = WorkerEvent::Kind::kRecord;
  ev.generation = generation_;
  bool done = true;
  StopReason reason = StopReason::kNone;
  // Each record is complete before anyone else can see it.
  if (!driver_ || std::visit([](const auto& driver) { return driver->done(); }, *driver_)) return;
  ev.step = step_driver(*driver_);
  std::visit(
      [&](const auto& driver) {
        done = driver->done();
        reason = driver->reason();
      },
      *driver_);
  // (a driver that had nothing more to give returns null: no record to publish)
  if (std::visit([](const auto& out) { return out != nullptr; }, ev.step)) publish(std::move(ev));
  if (done) {
    WorkerEvent d;
    d.kind = WorkerEvent::Kind::kDone;
    d.reason = reason;
    d.generation = generation_;
    publish(std::move(d));
  }
}

void EngineWorker::on_fork(const wcmd::Fork& c) {
  Generator* gen = sampling();
  if (!gen || !c.record) throw Error("fork: no generation to fork");
  WorkerEvent ev;
  ev.kind = WorkerEvent::Kind::kForked;
  ev.step = gen->fork(c.tokens, *c.record, c.token);
  ev.cache_reused = gen->fork_reused_cache();
  ev.generation = generation_;
  publish(std::move(ev));
}

}  // namespace kvscope
