// The window's engine thread (app/gui_worker.*) against a UI-like thread,
// with no GL: generate, toggle the cache mode, change the sampler, scrub
// (read every byte of older records), reset, load other models and cancel
// loads, all while steps are computing. Every record the "UI" receives must
// be complete and self-consistent (sizes from the model's config, attention
// rows summing to 1 over the causal window), belong to the generation the UI
// is showing, and come from the model it was started with; nothing may
// deadlock (a watchdog aborts the binary). Run under ThreadSanitizer by the
// `make test-tsan` build (cmake -DKVSCOPE_TSAN=ON).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "gui_worker.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using namespace std::chrono_literals;
using testutil::run_numpy_ref;
using testutil::shell_quote;
using testutil::TempDir;
using K = WorkerCommand::Kind;
using E = WorkerEvent::Kind;

// Aborts the whole binary when a test does not finish in time: a deadlock
// must fail loudly, not hang the suite.
class Watchdog {
 public:
  Watchdog(const char* what, std::chrono::seconds limit)
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "FAIL: %s did not finish within %lld s (deadlock?)\n", what,
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Two small random checkpoints of different shapes, written once per run
// (before any thread starts: std::system forks).
struct Models {
  std::unique_ptr<TempDir> dir;
  std::string a, b;
};
const Models& models() {
  static Models m = [] {
    Models r;
    r.dir = std::make_unique<TempDir>("worker");
    r.a = *r.dir / "a";
    r.b = *r.dir / "b";
    run_numpy_ref("make --out " + shell_quote(r.a) + " --layers 2 --heads 2 --embd 32 --ctx 48 --seed 11",
                  *r.dir / "a.log");
    run_numpy_ref("make --out " + shell_quote(r.b) + " --layers 3 --heads 4 --embd 48 --ctx 40 --seed 12",
                  *r.dir / "b.log");
    return r;
  }();
  return m;
}

// A record as the UI would draw it: every field sized from the model, every
// attention row a distribution over the keys it may see.
void check_complete(const StepRecord& r, const Config& c) {
  ASSERT_EQ(r.n_layer, c.n_layer);
  ASSERT_EQ(r.n_head, c.n_head);
  ASSERT_EQ(r.n_embd, c.n_embd);
  ASSERT_GE(r.seq_len, 1);
  ASSERT_LE(r.seq_len, c.n_positions);
  ASSERT_EQ(r.first + r.n_new, r.seq_len);
  ASSERT_GE(r.n_rows, 1);
  ASSERT_LE(r.n_rows, r.seq_len);
  ASSERT_EQ(r.attn.size(), static_cast<size_t>(c.n_layer) * c.n_head * r.n_rows * r.seq_len);
  ASSERT_EQ(r.k.size(), static_cast<size_t>(c.n_layer) * r.n_kv * c.n_embd);
  ASSERT_EQ(r.v.size(), r.k.size());
  ASSERT_EQ(r.logits.size(), static_cast<size_t>(c.vocab_size));
  ASSERT_GE(r.top.size(), 1u);
  ASSERT_GE(r.token, 0);
  ASSERT_LT(r.token, c.vocab_size);
  ASSERT_TRUE(r.prob >= 0.0f && r.prob <= 1.0f) << r.prob;
  for (int l = 0; l < r.n_layer; ++l)
    for (int h = 0; h < r.n_head; ++h)
      for (int row = 0; row < r.n_rows; ++row) {
        const int query = r.seq_len - r.n_rows + row;  // sees keys [0, query]
        double sum = 0;
        for (int key = 0; key < r.seq_len; ++key) {
          const float w = r.attention(l, h, row, key);
          if (key > query) {
            ASSERT_EQ(w, 0.0f) << "causal mask, layer " << l << " head " << h;
          }
          sum += w;
        }
        ASSERT_NEAR(sum, 1.0, 1e-3) << "layer " << l << " head " << h << " row " << row;
      }
}

// Reads every number of an older record, as scrubbing back in time does.
double scrub(const StepRecord& r) {
  double s = 0;
  for (float x : r.attn) s += x;
  for (float x : r.k) s += x;
  for (float x : r.v) s += x;
  for (float x : r.logits) s += x;
  return s + r.prob + static_cast<double>(r.piece.size());
}

TEST(WorkerThreads, StepsToggleScrubResetAndModelSwitchesRaceFree) {
  const Models& m = models();
  Watchdog dog("the worker stress test", 120s);
  std::atomic<int> wakes{0};
  auto worker = std::make_unique<EngineWorker>([&] { wakes++; });

  // The UI thread's view, as app/gui.cpp keeps it.
  std::shared_ptr<const Model> model;      // the model shown (from kModelLoaded)
  std::shared_ptr<const Model> gen_model;  // the model the shown generation runs on
  uint64_t generation = 0;
  bool started = false, stopped = false;
  uint64_t start_request = 0;  // as Snapshot::start_request
  std::vector<RecordPtr> records, old_records;
  int n_records = 0, n_generations = 0, n_loaded = 0, n_cancelled = 0, n_context_full = 0, n_scrubbed = 0;
  double checksum = 0;
  CacheMode mode = CacheMode::kKV;
  std::mt19937 rng(1234);
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };

  auto start = [&](const std::string& prompt) {
    worker->cancel_steps();
    WorkerCommand c(K::kStart);
    c.text = prompt;
    c.options.max_new = 1000;  // run into the context limit
    c.options.mode = mode;
    c.options.sampler.greedy = chance(50);
    c.options.sampler.seed = rng();
    c.request = ++start_request;
    worker->send(c);
    if (!old_records.empty() && old_records.size() > 64)
      old_records.erase(old_records.begin(), old_records.begin() + 32);
    old_records.insert(old_records.end(), records.begin(), records.end());
    records.clear();
    started = stopped = false;
  };
  auto load = [&](const std::string& dir) {
    WorkerCommand c(K::kLoadModel);
    c.text = dir;
    worker->send(c);
  };

  load(m.a);
  const auto t0 = std::chrono::steady_clock::now();
  const auto budget = std::getenv("KVSCOPE_WORKER_STRESS_S") ? std::atoi(std::getenv("KVSCOPE_WORKER_STRESS_S")) : 8;
  int iteration = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(budget) || n_context_full == 0 || n_loaded < 3) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 90s) << "no progress: " << n_records << " records";
    ++iteration;
    for (WorkerEvent& ev : worker->poll()) {
      switch (ev.kind) {
        case E::kModelLoaded:
          ASSERT_TRUE(ev.model);
          model = ev.model;
          ++n_loaded;
          start(n_loaded % 2 ? "Hello world" : "a b c");
          break;
        case E::kStarted:
          if (ev.request != start_request) break;  // superseded by a later start (a quick second reset)
          ASSERT_GT(ev.generation, generation);
          generation = ev.generation;
          gen_model = ev.model;
          started = true;
          ++n_generations;
          break;
        case E::kRecord: {
          ASSERT_TRUE(ev.record);
          if (ev.generation != generation || !started) break;  // from a generation since replaced
          ASSERT_TRUE(gen_model);
          check_complete(*ev.record, gen_model->config);
          ASSERT_EQ(ev.record->index, static_cast<int>(records.size())) << "records arrive in order, none lost";
          if (!records.empty()) {
            ASSERT_EQ(ev.record->seq_len, records.back()->seq_len + 1);
          }
          records.push_back(ev.record);
          ++n_records;
          break;
        }
        case E::kDone:
          // (a generation that ended just as the UI reset belongs to no one)
          if (ev.generation != generation || !started) break;
          stopped = true;
          if (ev.reason == StopReason::kContextFull) {
            ++n_context_full;
            ASSERT_FALSE(records.empty());
            ASSERT_EQ(records.back()->seq_len, gen_model->config.n_positions);
            ASSERT_EQ(records.back()->stop, StopReason::kContextFull);
          }
          break;
        case E::kError:
          if (ev.failed == K::kLoadModel) {
            ASSERT_NE(ev.message.find("loading cancelled"), std::string::npos) << ev.message;
            ++n_cancelled;
          } else {
            FAIL() << "unexpected error: " << ev.message;
          }
          break;
        case E::kForked:  // (issue 5's fork command; this test sends none)
          FAIL() << "unexpected kForked";
          break;
      }
    }
    if (HasFatalFailure()) return;

    // Scrub: re-read a random older record, of this or an earlier generation.
    if (!records.empty() && chance(60)) {
      checksum += scrub(*records[rng() % records.size()]);
      ++n_scrubbed;
    }
    if (!old_records.empty() && chance(30)) {
      checksum += scrub(*old_records[rng() % old_records.size()]);
      ++n_scrubbed;
    }
    // Playback: keep up to 3 steps queued (the real UI sends one at a time).
    if (started && !stopped && worker->pending() < 3) worker->send({K::kStep});
    if (chance(3)) {  // the C key
      mode = mode == CacheMode::kKV ? CacheMode::kNoCache : CacheMode::kKV;
      WorkerCommand c(K::kSetMode);
      c.mode = mode;
      worker->send(c);
    }
    if (chance(1)) {
      WorkerCommand c(K::kSetSampler);
      c.sampler.greedy = false;
      c.sampler.temperature = 0.5f + static_cast<float>(rng() % 100) / 100.0f;
      c.sampler.seed = rng();
      worker->send(c);
    }
    if (model && (chance(1) || (stopped && chance(20)))) start(chance(50) ? "Once upon" : "xyz 123");  // reset
    if (model && chance(1) && !worker->loading()) {
      load(n_loaded % 2 ? m.b : m.a);  // a new model while steps compute
      if (chance(30)) worker->cancel_load();
      if (chance(20)) load(n_loaded % 2 ? m.b : m.a);  // supersedes the one just sent
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
  }
  EXPECT_GT(n_records, 100);
  EXPECT_GE(n_generations, 5);
  EXPECT_GE(n_loaded, 3);
  EXPECT_GE(n_context_full, 1);
  EXPECT_GT(n_scrubbed, 100);
  EXPECT_GT(wakes.load(), 0);
  EXPECT_TRUE(std::isfinite(checksum));
  std::printf(
      "worker stress: %d iterations, %d records, %d generations, %d models loaded, %d loads cancelled, "
      "%d context-full stops, %d scrubs\n",
      iteration, n_records, n_generations, n_loaded, n_cancelled, n_context_full, n_scrubbed);
  // Destroy with steps queued and one computing: joins, never hangs.
  for (int i = 0; i < 20; ++i) worker->send({K::kStep});
  load(m.b);
  worker.reset();
}

// Waits for the next event of `kind` (errors of another kind fail).
WorkerEvent next_event(EngineWorker& w, E kind, std::vector<WorkerEvent>* seen = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 60s) {
    for (WorkerEvent& e : w.poll()) {
      if (seen) seen->push_back(e);
      if (e.kind == kind) return e;
      if (e.kind == E::kError) ADD_FAILURE() << "error: " << e.message;
    }
    std::this_thread::sleep_for(1ms);
  }
  ADD_FAILURE() << "timed out waiting for an event";
  return {};
}

// Sends kLoadModel for `dir` and waits for its kModelLoaded.
WorkerEvent load_and_wait(EngineWorker& w, const std::string& dir) {
  WorkerCommand load(K::kLoadModel);
  load.text = dir;
  w.send(load);
  return next_event(w, E::kModelLoaded);
}

TEST(WorkerThreads, ContextFullStopsWithEveryPositionAndNoMoreSteps) {
  const Models& m = models();
  Watchdog dog("the context-full test", 60s);
  EngineWorker w;
  const WorkerEvent loaded = load_and_wait(w, m.a);
  ASSERT_TRUE(loaded.model);
  const int ctx = loaded.model->config.n_positions;
  WorkerCommand start(K::kStart);
  start.text = "Hello";
  start.options.max_new = 10 * ctx;
  w.send(start);
  next_event(w, E::kStarted);
  // Far more steps than fit: the extra ones must do nothing.
  for (int i = 0; i < ctx + 20; ++i) w.send({K::kStep});
  std::vector<WorkerEvent> seen;
  const WorkerEvent done = next_event(w, E::kDone, &seen);
  EXPECT_EQ(done.reason, StopReason::kContextFull);
  while (w.pending() > 0) std::this_thread::sleep_for(1ms);
  for (WorkerEvent& e : w.poll()) seen.push_back(e);
  std::vector<RecordPtr> recs;
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kRecord) recs.push_back(e.record);
  ASSERT_FALSE(recs.empty());
  const int n_prompt = recs.front()->n_prompt;
  EXPECT_EQ(static_cast<int>(recs.size()), ctx - n_prompt + 1);
  EXPECT_EQ(recs.back()->seq_len, ctx);
  EXPECT_EQ(recs.back()->stop, StopReason::kContextFull);
  for (const WorkerEvent& e : seen) EXPECT_NE(e.kind, E::kError) << e.message;
}

TEST(WorkerThreads, EachStartedEchoesItsRequestSoSupersededStartsCanBeIgnored) {
  // Two resets in a row, a step of the first generation in between: the UI
  // has already cleared its timeline for the second start when the first
  // one's kStarted and record arrive. The request ids tell them apart.
  const Models& m = models();
  Watchdog dog("the request-id test", 60s);
  EngineWorker w;
  load_and_wait(w, m.a);
  WorkerCommand first(K::kStart), second(K::kStart);
  first.text = "Hello";
  first.request = 7;
  second.text = "Once upon";
  second.request = 8;
  w.send(first);
  w.send({K::kStep});
  w.send(second);
  w.send({K::kStep});
  std::vector<WorkerEvent> seen;
  while (w.pending() > 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms);
  for (WorkerEvent& e : w.poll()) seen.push_back(e);
  std::vector<uint64_t> requests, generations;
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kStarted) {
      requests.push_back(e.request);
      generations.push_back(e.generation);
    }
  ASSERT_EQ(requests, (std::vector<uint64_t>{7, 8}));
  // The records: one per generation, each tagged with its own generation.
  int per_gen[2] = {0, 0};
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kRecord) {
      ASSERT_TRUE(e.generation == generations[0] || e.generation == generations[1]);
      per_gen[e.generation == generations[1]]++;
      EXPECT_EQ(e.record->index, 0);
    }
  EXPECT_EQ(per_gen[0], 1);
  EXPECT_EQ(per_gen[1], 1);
}

TEST(WorkerThreads, PreviousModelKeepsGeneratingUntilTheNewOneIsReady) {
  const Models& m = models();
  Watchdog dog("the model-switch test", 60s);
  EngineWorker w;
  const WorkerEvent a = load_and_wait(w, m.a);
  WorkerCommand start(K::kStart);
  start.text = "Hello";
  start.options.max_new = 8;
  w.send(start);
  next_event(w, E::kStarted);

  // A load does not occupy the engine thread: steps sent after it run on A.
  WorkerCommand load(K::kLoadModel);
  load.text = m.b;
  w.send(load);
  EXPECT_EQ(w.pending(), 0);
  EXPECT_TRUE(w.loading() || !w.poll().empty());
  for (int i = 0; i < 3; ++i) w.send({K::kStep});
  std::vector<WorkerEvent> seen;
  const WorkerEvent b = next_event(w, E::kModelLoaded, &seen);
  ASSERT_TRUE(b.model);
  EXPECT_EQ(b.model->config.n_layer, 3);
  EXPECT_FALSE(w.loading());
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kRecord) {
      EXPECT_EQ(e.record->n_layer, a.model->config.n_layer);
    }

  // Cancelling: the error names the folder and the model stays B.
  load.text = m.a;
  w.send(load);
  w.cancel_load();
  std::vector<WorkerEvent> after;
  const auto t0 = std::chrono::steady_clock::now();
  while (w.loading() && std::chrono::steady_clock::now() - t0 < 30s) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  while (w.pending() > 0) std::this_thread::sleep_for(1ms);
  for (WorkerEvent& e : w.poll()) after.push_back(e);
  ASSERT_EQ(after.size(), 1u);
  ASSERT_EQ(after[0].kind, E::kError);
  EXPECT_EQ(after[0].failed, K::kLoadModel);
  EXPECT_NE(after[0].message.find("loading cancelled"), std::string::npos) << after[0].message;
  EXPECT_NE(after[0].message.find(m.a), std::string::npos) << after[0].message;

  // A load superseded by a newer one reports nothing; only the newer loads.
  load.text = m.a;
  w.send(load);
  load.text = m.b;
  w.send(load);
  const WorkerEvent last = next_event(w, E::kModelLoaded);
  ASSERT_TRUE(last.model);
  EXPECT_EQ(last.model->dir, m.b);
  std::this_thread::sleep_for(50ms);
  for (WorkerEvent& e : w.poll()) EXPECT_NE(e.kind, E::kModelLoaded) << "the superseded load was applied";
  EXPECT_FALSE(w.loading());
  EXPECT_EQ(w.load_progress(), 0.0f);
}

}  // namespace
}  // namespace kvscope
