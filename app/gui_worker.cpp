#include "gui_worker.h"

#include <algorithm>
#include <exception>

#include "error.h"

namespace kvscope {

EngineWorker::EngineWorker(std::function<void()> wake) : wake_(std::move(wake)), thread_([this] { run(); }) {}

EngineWorker::~EngineWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    in_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void EngineWorker::send(WorkerCommand cmd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_.push_back(std::move(cmd));
  }
  cv_.notify_one();
}

std::vector<WorkerEvent> EngineWorker::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerEvent> out(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
  out_.clear();
  return out;
}

int EngineWorker::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(in_.size()) + running_;
}

void EngineWorker::cancel_steps() {
  std::lock_guard<std::mutex> lock(mu_);
  in_.erase(std::remove_if(in_.begin(), in_.end(),
                           [](const WorkerCommand& c) { return c.kind == WorkerCommand::Kind::kStep; }),
            in_.end());
}

void EngineWorker::publish(WorkerEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    out_.push_back(std::move(ev));
  }
  if (wake_) wake_();
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
      // Anything the user can get wrong (a bad folder, an empty prompt)
      // arrives here as kvscope::Error; report it, keep the current state.
      WorkerEvent ev;
      ev.kind = WorkerEvent::Kind::kError;
      ev.message = e.what();
      ev.failed = cmd.kind;
      ev.generation = generation_;
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
  using K = WorkerCommand::Kind;
  switch (cmd.kind) {
    case K::kLoadModel: {
      // Loads into a new object; the current model stays if this throws.
      std::shared_ptr<const Model> m = load_model(cmd.text);
      model_ = std::move(m);
      gen_.reset();
      WorkerEvent ev;
      ev.kind = WorkerEvent::Kind::kModelLoaded;
      ev.model = model_;
      ev.generation = generation_;
      publish(std::move(ev));
      break;
    }
    case K::kStart: {
      if (!model_) throw Error("no model is loaded yet");
      auto gen = std::make_unique<Generator>(model_);
      GenerateOptions opt = cmd.options;
      gen->start(cmd.text, opt);  // throws on an empty or too-long prompt
      gen_ = std::move(gen);
      mode_ = opt.mode;
      sampler_ = opt.sampler;
      max_new_ = opt.max_new;
      ++generation_;
      WorkerEvent ev;
      ev.kind = WorkerEvent::Kind::kStarted;
      ev.generation = generation_;
      ev.model = model_;
      publish(std::move(ev));
      break;
    }
    case K::kStep: {
      if (!gen_ || gen_->done()) break;
      RecordPtr r = gen_->step();
      if (r) {
        WorkerEvent ev;
        ev.kind = WorkerEvent::Kind::kRecord;
        ev.record = std::move(r);
        ev.generation = generation_;
        publish(std::move(ev));
      }
      if (gen_->done()) {
        WorkerEvent ev;
        ev.kind = WorkerEvent::Kind::kDone;
        ev.reason = gen_->reason();
        ev.generation = generation_;
        publish(std::move(ev));
      }
      break;
    }
    case K::kSetMode:
      mode_ = cmd.mode;
      if (gen_) gen_->set_mode(cmd.mode);
      break;
    case K::kSetSampler:
      sampler_ = cmd.sampler;
      if (gen_) gen_->set_sampler(cmd.sampler);
      break;
    case K::kSetMaxNew:
      max_new_ = cmd.max_new;
      if (gen_) gen_->set_max_new(cmd.max_new);
      break;
  }
}

}  // namespace kvscope
