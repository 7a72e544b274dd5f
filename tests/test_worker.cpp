// The window's engine thread (app/worker/worker.*) and the window's controller
// (app/session/session.*, the real one, with no GL): generate, toggle the cache mode,
// change the sampler, scrub (read every byte of older records), fork, reset,
// load other models and cancel loads, all while steps are computing. Every
// record the session shows must be complete and self-consistent (sizes from
// the model's config, attention rows summing to 1 over the causal window),
// belong to the generation it is showing, and come from the model it was
// started with; nothing may deadlock (a watchdog aborts the binary). Run under ThreadSanitizer by the
// `make test-tsan` build (cmake -DKVSCOPE_TSAN=ON).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "app/session/saved_view.h"
#include "app/session/session.h"
#include "app/session/settings.h"
#include "app/worker/worker.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using namespace std::chrono_literals;
using testutil::run_numpy_ref;
using testutil::shell_quote;
using testutil::TempDir;
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

// Reads every number of an older record, as scrubbing back in time does:
// the numbers that are not what a finished forward writes (an attention
// weight or the probability outside [0, 1], a K, V or logit not finite;
// a record freed or written under the reader would show as these, or to
// the sanitizers).
int scrub(const StepRecord& r) {
  int bad = 0;
  for (float x : r.attn) bad += !(x >= 0.0f && x <= 1.0f);
  for (const std::vector<float>* v : {&r.k, &r.v, &r.logits})
    for (float x : *v) bad += !std::isfinite(x);
  return bad + !(r.prob >= 0.0f && r.prob <= 1.0f);
}

// The window's controller (app/session/session.*) exactly as the window drives it,
// without the window: random commands while steps compute. Everything the
// session shows must stay complete and consistent.
void check_shown(const Session& s) {
  const EngineState& engine = s.engine;
  if (engine.records().empty()) return;
  const RecordPtr& first = engine.records().front();
  for (size_t i = 0; i < engine.records().size(); ++i) {
    const StepRecord& r = *engine.records()[i];
    ASSERT_EQ(r.index, static_cast<int>(i)) << "records arrive in order, none lost";
    ASSERT_EQ(r.seq_len, first->seq_len + static_cast<int>(i));
    ASSERT_EQ(r.n_layer, first->n_layer) << "one generation, one model";
  }
  ASSERT_TRUE(engine.model);
  check_complete(*engine.records().back(), engine.model->config);
  ASSERT_LE(engine.seq_count, engine.records().size());
}

TEST(WorkerThreads, SessionStepsToggleScrubResetAndModelSwitchesRaceFree) {
  const Models& m = models();
  Watchdog dog("the session stress test", 120s);
  std::atomic<int> wakes{0};
  auto session = std::make_unique<Session>([&] { wakes++; });
  Session& s = *session;
  s.ui.fastest = true;
  s.ui.max_new = 1000;  // run into the context limit
  s.ui.preset = kNumPresets;
  s.ui.custom_prompt = "Hello world";
  s.ui.active_prompt = s.selected_prompt();
  std::mt19937 rng(1234);
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  std::vector<RecordPtr> old_records;
  int n_records_seen = 0, n_generations = 0, n_loaded = 0, n_context_full = 0, n_scrubbed = 0, n_forks = 0;
  uint64_t last_generation = 0;
  const Model* last_model = nullptr;
  int bad_numbers = 0;
  int n_forks_landed = 0;  // forks the session took in as a new branch of the tree
  size_t tree_size = 0;

  s.load_model(m.a);
  const auto t0 = std::chrono::steady_clock::now();
  auto now = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  // A fixed amount of work, however fast the machine (more with
  // $KVSCOPE_WORKER_STRESS_RECORDS); the watchdog catches a hang.
  const char* more = std::getenv("KVSCOPE_WORKER_STRESS_RECORDS");
  const int want_records = more ? std::max(1000, std::atoi(more)) : 1000;
  auto done = [&] {
    return n_records_seen >= want_records && n_generations >= 5 && n_loaded >= 3 && n_context_full >= 1 &&
           n_scrubbed >= 100 && n_forks_landed >= 2;
  };
  int iteration = 0;
  StopReason last_stop = StopReason::kNone;
  while (!done()) {
    ASSERT_LT(iteration, 2000000) << "not all the work got done: " << n_records_seen << " records, " << n_generations
                                  << " generations, " << n_loaded << " loads, " << n_context_full
                                  << " context-full stops, " << n_scrubbed << " scrubs, " << n_forks_landed << " of "
                                  << n_forks << " forks landed";
    ++iteration;
    s.update(now());
    if (s.engine.model.get() != last_model) {
      last_model = s.engine.model.get();
      ++n_loaded;
    }
    if (s.engine.generation != last_generation && s.engine.started) {
      last_generation = s.engine.generation;
      ++n_generations;
    }
    for (const std::string& e : s.ui.errors)
      ASSERT_NE(e.find("loading cancelled"), std::string::npos) << "unexpected error: " << e;
    s.ui.errors.clear();
    check_shown(s);
    if (HasFatalFailure()) return;
    if (s.engine.tree.size() > tree_size && s.engine.tree.current_branch().fork_step >= 0) ++n_forks_landed;
    tree_size = s.engine.tree.size();
    n_records_seen = std::max(n_records_seen, s.engine.total_records);
    if (s.engine.stop != last_stop) {
      last_stop = s.engine.stop;
      if (last_stop == StopReason::kContextFull) {
        ++n_context_full;
        ASSERT_FALSE(s.engine.records().empty());
        ASSERT_EQ(s.engine.records().back()->seq_len, s.engine.model->config.n_positions);
      }
    }
    // Scrub (reading every byte of the shown record), of this or an earlier generation.
    const int n = static_cast<int>(s.engine.records().size());
    if (n > 0 && chance(20)) {
      s.execute(cmd::ScrubTo{static_cast<int>(rng() % n)}, now());
      if (s.engine.seq.current) bad_numbers += scrub(*s.engine.seq.current);
      ++n_scrubbed;
      if (chance(50)) s.execute(cmd::Scrub{n}, now());  // back to the newest: playback goes on
      s.ui.playing = true;
    }
    if (!old_records.empty() && chance(30)) {
      bad_numbers += scrub(*old_records[rng() % old_records.size()]);
      ++n_scrubbed;
    }
    if (chance(3)) s.execute(cmd::ToggleCache{}, now());  // the C key
    if (chance(1)) {
      s.ui.sampler.greedy = false;
      s.ui.sampler.temperature = 0.5f + static_cast<float>(rng() % 100) / 100.0f;
      s.ui.sampler.seed = rng();
      s.execute(cmd::SetSampler{s.ui.sampler}, now());
    }
    if (s.engine.seq.current && s.engine.seq.current->top.size() > 1 && chance(1)) {
      s.execute(cmd::Fork{s.engine.seq.current->top[1].token}, now());
      ++n_forks;
    }
    if (s.engine.model && (chance(1) || (s.engine.stop != StopReason::kNone && chance(20)))) {  // reset
      if (old_records.size() > 64) old_records.erase(old_records.begin(), old_records.begin() + 32);
      old_records.insert(old_records.end(), s.engine.records().begin(), s.engine.records().end());
      s.ui.custom_prompt = chance(50) ? "Once upon" : "xyz 123";
      s.execute(cmd::Start{s.ui.custom_prompt}, now());
    }
    if (s.engine.model && chance(1) && !s.engine.loading_model) {
      s.execute(cmd::LoadModel{n_loaded % 2 ? m.b : m.a}, now());  // a new model while steps compute
      if (chance(30)) s.execute(cmd::CancelLoad{}, now());
      if (chance(20)) s.execute(cmd::LoadModel{n_loaded % 2 ? m.b : m.a}, now());  // supersedes it
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
  }
  // (The loop ran until every kind of work above was done.)
  EXPECT_GT(wakes.load(), 0);
  EXPECT_EQ(bad_numbers, 0) << "numbers a forward cannot write, read back from the records";
  std::printf(
      "session stress: %d iterations, %d records, %d generations, %d models loaded, %d forks, "
      "%d context-full stops, %d scrubs\n",
      iteration, n_records_seen, n_generations, n_loaded, n_forks, n_context_full, n_scrubbed);
  // Destroy with a step computing and a load running: joins, never hangs.
  s.execute(cmd::Step{}, now());
  s.execute(cmd::LoadModel{m.b}, now());
  session.reset();
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
  w.send(wcmd::LoadModel{dir});
  return next_event(w, E::kModelLoaded);
}

TEST(WorkerThreads, ContextFullStopsWithEveryPositionAndNoMoreSteps) {
  const Models& m = models();
  Watchdog dog("the context-full test", 60s);
  EngineWorker w;
  const WorkerEvent loaded = load_and_wait(w, m.a);
  ASSERT_TRUE(loaded.model);
  const int ctx = loaded.model->config.n_positions;
  wcmd::Start start;
  start.prompt = "Hello";
  start.options.max_new = 10 * ctx;
  w.send(start);
  next_event(w, E::kStarted);
  // Far more steps than fit: the extra ones must do nothing.
  for (int i = 0; i < ctx + 20; ++i) w.send(wcmd::Step{});
  std::vector<WorkerEvent> seen;
  const WorkerEvent done = next_event(w, E::kDone, &seen);
  EXPECT_EQ(done.reason, StopReason::kContextFull);
  while (w.pending() > 0) std::this_thread::sleep_for(1ms);
  for (WorkerEvent& e : w.poll()) seen.push_back(e);
  std::vector<RecordPtr> recs;
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kRecord) recs.push_back(e.record());
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
  wcmd::Start first, second;
  first.prompt = "Hello";
  first.request = 7;
  second.prompt = "Once upon";
  second.request = 8;
  w.send(first);
  w.send(wcmd::Step{});
  w.send(second);
  w.send(wcmd::Step{});
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
      EXPECT_EQ(e.record()->index, 0);
    }
  EXPECT_EQ(per_gen[0], 1);
  EXPECT_EQ(per_gen[1], 1);
}

TEST(WorkerThreads, PreviousModelKeepsGeneratingUntilTheNewOneIsReady) {
  const Models& m = models();
  Watchdog dog("the model-switch test", 60s);
  EngineWorker w;
  const WorkerEvent a = load_and_wait(w, m.a);
  wcmd::Start start;
  start.prompt = "Hello";
  start.options.max_new = 8;
  w.send(start);
  next_event(w, E::kStarted);

  // A load does not occupy the engine thread: steps sent after it run on A.
  wcmd::LoadModel load{m.b};
  w.send(load);
  EXPECT_EQ(w.pending(), 0);
  EXPECT_TRUE(w.loading() || !w.poll().empty());
  for (int i = 0; i < 3; ++i) w.send(wcmd::Step{});
  std::vector<WorkerEvent> seen;
  const WorkerEvent b = next_event(w, E::kModelLoaded, &seen);
  ASSERT_TRUE(b.model);
  EXPECT_EQ(b.model->config.n_layer, 3);
  EXPECT_FALSE(w.loading());
  for (const WorkerEvent& e : seen)
    if (e.kind == E::kRecord) {
      EXPECT_EQ(e.record()->n_layer, a.model->config.n_layer);
    }

  // Cancelling: the error names the folder and the model stays B.
  load.dir = m.a;
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
  EXPECT_EQ(after[0].failed, WorkerOp::kLoadModel);
  EXPECT_NE(after[0].message.find("loading cancelled"), std::string::npos) << after[0].message;
  EXPECT_NE(after[0].message.find(m.a), std::string::npos) << after[0].message;

  // A load superseded by a newer one reports nothing; only the newer loads.
  load.dir = m.a;
  w.send(load);
  load.dir = m.b;
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

namespace kvscope {
namespace {

// Runs update() until `done` holds (or fails after 30 s).
template <class F>
void update_until(Session& s, F done) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 30s) << "the session did not get there";
    s.update(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(1ms);
  }
}

// Playback paused, loads the model in `dir` and waits until the session shows it.
void load_paused(Session& s, const std::string& dir) {
  s.ui.playing = false;
  s.load_model(dir);
  update_until(s, [&] { return s.engine.model != nullptr; });
}

// Starts a generation of `prompt` and pauses playback (a start resumes it).
void start_paused(Session& s, const std::string& prompt) {
  s.execute(cmd::Start{prompt}, 0);
  s.ui.playing = false;
}

TEST(Session, ArrowAfterResetWhilePausedRunsThePrefill) {
  // A presenter's clicker sends PageDown (= Scrub{+1}) after pressing Reset
  // with playback paused: the first step must run.
  Watchdog dog("the clicker test", 60s);
  Session s;
  load_paused(s, models().a);
  s.execute(cmd::Reset{}, 0);
  s.execute(cmd::Scrub{1}, 0);  // before the worker accepted the start
  update_until(s, [&] { return s.engine.records().size() == 1; });
  EXPECT_TRUE(s.engine.records()[0]->prefill);
  EXPECT_FALSE(s.ui.playing);
  s.execute(cmd::Scrub{1}, 1);  // and after: one decode step each
  update_until(s, [&] { return s.engine.records().size() == 2; });
  EXPECT_FALSE(s.engine.records()[1]->prefill);
  for (int i = 0; i < 50; ++i) s.update(2);
  EXPECT_EQ(s.engine.records().size(), 2u) << "paused: no more steps than asked for";
  EXPECT_TRUE(s.ui.errors.empty());
}

TEST(Session, OnlyTheNewestStartsRecordsReachTheTimeline) {
  // Two resets in a row, each followed by a step: the first start's
  // kStarted and record arrive after the timeline was cleared for the second.
  Watchdog dog("the double-reset test", 60s);
  Session s;
  load_paused(s, models().a);
  start_paused(s, "Hello");
  s.execute(cmd::Step{}, 0);
  start_paused(s, "Once upon");
  s.execute(cmd::Step{}, 0);
  update_until(s, [&] { return !s.engine.records().empty() && s.engine_idle(); });
  ASSERT_EQ(s.engine.records().size(), 1u);
  const StepRecord& r = *s.engine.records()[0];
  EXPECT_EQ(r.index, 0);
  const std::vector<int> want = s.engine.model->tokenizer.encode("Once upon");
  EXPECT_EQ(r.prompt_tokens, want);
  EXPECT_EQ(s.ui.active_prompt, "Once upon");
}

TEST(Session, ViewsAndIndicesFromAnotherModelAreFittedToTheLoadedOne) {
  // A saved view made with a 3-layer, 4-head model, restored on a 2-layer,
  // 2-head one: the attention view falls back to the mean (said in the error
  // panel), never an index past the records' buffers; a model switch
  // re-checks what the user had chosen.
  Watchdog dog("the restored-view test", 60s);
  const Models& m = models();
  TempDir tmp("restored-view");
  const std::string path = tmp / "lesson.json";
  Session s;
  load_paused(s, m.b);
  s.ui.layer = 2;
  s.ui.head = 3;
  s.execute(cmd::SaveView{path}, 0);
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();

  s.load_model(m.a);
  update_until(s, [&] { return s.engine.model && s.engine.model->config.n_layer == 2; });
  EXPECT_EQ(s.ui.layer, -1) << "layer 2 kept after switching to a 2-layer model";
  EXPECT_EQ(s.ui.head, -1);

  s.execute(cmd::LoadView{path}, 1);
  EXPECT_EQ(s.ui.layer, -1);
  EXPECT_EQ(s.ui.head, -1);
  ASSERT_EQ(s.ui.errors.size(), 2u);
  EXPECT_NE(s.ui.errors[0].find("layer 2 is not in"), std::string::npos) << s.ui.errors[0];
  EXPECT_NE(s.ui.errors[1].find("head 3 is not in"), std::string::npos) << s.ui.errors[1];

  // A step this model's context cannot reach: the view lands on the last one.
  nlohmann::json v = nlohmann::json::parse(testutil::read_file(path));
  v["step"] = 4095;
  v["attention"]["layer"] = 4095;
  v["max_new"] = 4096;
  testutil::write_file(path, v.dump());
  s.ui.errors.clear();
  s.execute(cmd::LoadView{path}, 2);
  EXPECT_EQ(s.ui.layer, -1);
  s.ui.playing = true;
  s.ui.fastest = true;
  update_until(s, [&] { return s.engine.stop != StopReason::kNone && s.engine.pending_view_step < 0; });
  EXPECT_EQ(s.ui.view_step, static_cast<int>(s.engine.records().size()) - 1);
  EXPECT_LE(static_cast<int>(s.engine.records().size()), s.engine.model->config.n_positions);
}

// Models a (2 layers, 2 heads, 32 wide, 48 positions) and b (3 layers, 4
// heads, 48 wide, 40 positions): each allows choices the other does not.
TEST(Session, SettingsFromAnotherModelAreFittedWhenTheModelLoads) {
  // The window's start-up path: settings.json read before any model, then
  // the model loads; what the file chose beyond it is named, with the file.
  Watchdog dog("the restored-settings test", 60s);
  TempDir tmp("restored-settings");
  const std::string path = tmp / "settings.json";
  {
    UiState chosen;  // chosen with model b
    chosen.layer = 2;
    chosen.head = 3;
    chosen.max_new = 40;
    WindowSettings win;
    std::string err;
    ASSERT_TRUE(save_settings(path, chosen, win, err)) << err;
  }
  UiState ui;
  WindowSettings win;
  std::string err;
  ASSERT_TRUE(load_settings(path, ui, win, err)) << err;  // in range for some model
  Session s;
  s.ui = ui;
  s.fit_to_model(path);  // as run_gui does
  EXPECT_TRUE(s.ui.errors.empty());
  load_paused(s, models().a);
  EXPECT_EQ(s.ui.layer, -1);
  EXPECT_EQ(s.ui.head, -1);
  EXPECT_EQ(s.ui.max_new, 40);  // a has 48 positions
  ASSERT_EQ(s.ui.errors.size(), 2u);
  EXPECT_EQ(s.ui.errors[0].rfind(path + ": layer 2 is not in", 0), 0u) << s.ui.errors[0];
  EXPECT_EQ(s.ui.errors[1].rfind(path + ": head 3 is not in", 0), 0u) << s.ui.errors[1];
  // The next load is a model switch: nothing more is blamed on the file.
  s.ui.errors.clear();
  s.load_model(models().b);
  update_until(s, [&] { return s.engine.model && s.engine.model->config.n_layer == 3; });
  EXPECT_TRUE(s.ui.errors.empty());
}

TEST(Session, AModelSwitchReclampsWhatTheLargerModelAllowed) {
  // Chosen with a (48 positions, 32-wide K/V rows: q8_0 blocks fit), then b
  // (40 positions, 48-wide rows: q8_0 does not fit): b gets choices it can
  // run, the status line says what changed, and the generation starts.
  Watchdog dog("the model-switch test", 60s);
  Session s;
  load_paused(s, models().a);
  s.ui.max_new = 48;
  s.ui.layer = 1;
  s.ui.kv_layout.dtype = KVDtype::kQ8_0;
  s.ui.kv_layout.window = 16;
  s.ui.kv_layout.sinks = 2;
  s.execute(cmd::Reset{}, 0);
  update_until(s, [&] { return s.engine.started; });
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  s.load_model(models().b);
  update_until(s, [&] { return s.engine.model && s.engine.model->config.n_layer == 3 && s.engine.started; });
  EXPECT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  EXPECT_EQ(s.ui.max_new, 40);
  EXPECT_EQ(s.ui.layer, 1);                        // b has it
  EXPECT_EQ(s.ui.kv_layout.dtype, KVDtype::kF16);  // q8_0 blocks do not fit b's rows; its window does
  EXPECT_EQ(s.ui.kv_layout.window, 16);
  EXPECT_EQ(s.ui.kv_layout.sinks, 2);
  EXPECT_NE(s.ui.status.find("kv_layout.dtype q8_0 does not fit"), std::string::npos) << s.ui.status;
  s.execute(cmd::Step{}, 1);
  update_until(s, [&] { return !s.engine.records().empty() && s.engine_idle(); });
  EXPECT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
}

TEST(Session, AViewRestoredBeforeTheModelLoadedIsFittedToIt) {
  Watchdog dog("the early-view test", 60s);
  TempDir tmp("early-view");
  const std::string path = tmp / "lesson.json";
  SavedView v;
  v.layer = 2;  // made with b
  v.head = 3;
  v.text_scale = 6.0f;  // a saved view may say 0.25..8; the window shows 0.75..2.5
  v.prompt = "Once";
  save_view(v, path);
  Session s;
  s.execute(cmd::LoadView{path}, 0);
  EXPECT_EQ(s.ui.layer, 2);  // no model yet: in range for some
  ASSERT_EQ(s.ui.errors.size(), 1u);
  EXPECT_NE(s.ui.errors[0].find(path + ": text scale 6 is outside 0.75..2.5; using 2.5"), std::string::npos)
      << s.ui.errors[0];
  EXPECT_EQ(s.take_window_requests().text_scale, kMaxTextScale);
  s.ui.errors.clear();
  load_paused(s, models().a);
  EXPECT_EQ(s.ui.layer, -1);
  EXPECT_EQ(s.ui.head, -1);
  ASSERT_EQ(s.ui.errors.size(), 2u);
  EXPECT_EQ(s.ui.errors[0].rfind(path + ": layer 2 is not in", 0), 0u) << s.ui.errors[0];
}

// Steps the session's generation until the timeline holds `n` records.
void step_to(Session& s, size_t n) {
  while (s.engine.records().size() < n && s.engine.stop == StopReason::kNone) {
    const size_t have = s.engine.records().size();
    s.execute(cmd::Step{}, 0);
    update_until(s, [&] { return s.engine.records().size() > have || s.engine.stop != StopReason::kNone; });
  }
}

TEST(Session, HistoryBudgetDropsOldDetailWhileGenerating) {
  // The timeline's memory budget as the window applies it: records arrive
  // from the worker into the session's tree, which strips the oldest
  // records' detail as soon as the budget is exceeded; tokens and counters
  // stay, the newest records keep everything, and scrubbing back still works.
  Watchdog dog("the history-budget test", 60s);
  Session s;
  load_paused(s, models().a);
  start_paused(s, "Hello");
  step_to(s, 30);
  ASSERT_EQ(s.engine.records().size(), 30u);
  EXPECT_FALSE(s.engine.tree.trimmed().any()) << "the default budget holds a small model's whole context";
  uint64_t full = 0;
  for (const RecordPtr& r : s.engine.records()) full += record_bytes(*r);
  EXPECT_EQ(s.engine.tree.bytes(), full);

  const uint64_t budget = full / 3;
  s.engine.tree.set_budget(budget);
  s.execute(cmd::Reset{}, 0);
  s.ui.playing = false;
  for (size_t n = 1; n <= 30; ++n) {
    step_to(s, n);
    // After every record: within the budget, or nothing left to drop but
    // the newest 8 records, which stay whole.
    if (s.engine.tree.bytes() <= budget) continue;
    for (size_t i = 0; i + 8 < s.engine.records().size(); ++i)
      ASSERT_EQ(detail_of(*s.engine.records()[i]), 0u) << "over the budget at " << n << " records, record " << i;
  }
  ASSERT_EQ(s.engine.records().size(), 30u);
  const TrimReport& t = s.engine.tree.trimmed();
  EXPECT_TRUE(t.any());
  EXPECT_GT(t.attention_dropped, 0);
  EXPECT_GT(t.bytes_freed, 0u);
  for (size_t i = 0; i < s.engine.records().size(); ++i) {
    const StepRecord& r = *s.engine.records()[i];
    EXPECT_EQ(r.index, static_cast<int>(i));
    EXPECT_FALSE(r.top.empty()) << "candidates stay: " << i;
    if (static_cast<int>(i) < t.first_full) {
      EXPECT_EQ(r.n_rows, 0) << "attention dropped: " << i;
    }
    if (i + 8 >= s.engine.records().size()) {
      EXPECT_EQ(detail_of(r), static_cast<unsigned>(kDetailAll)) << i;
    }
  }
  // Scrubbing back to a step whose detail was dropped shows its tokens.
  s.execute(cmd::ScrubTo{2}, 0);
  s.sync_shown();
  EXPECT_EQ(s.engine.seq_count, 3u);
  EXPECT_TRUE(s.ui.errors.empty());
}

TEST(Session, AFailedViewSaveKeepsTheOldFileAndSaysWhy) {
  Watchdog dog("the failed-save test", 60s);
  TempDir tmp("failed-save");
  const std::string path = tmp / "lesson.json";
  Session s;
  load_paused(s, models().a);
  s.execute(cmd::SaveView{path}, 0);
  const std::string before = testutil::read_file(path);
  // A full disk, without root: writes beyond 64 bytes fail with EFBIG.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  void (*old_handler)(int) = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  s.ui.layer = 1;
  s.execute(cmd::SaveView{path}, 1);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_EQ(s.ui.errors.size(), 1u);
  EXPECT_NE(s.ui.errors[0].find("File too large"), std::string::npos) << s.ui.errors[0];
  EXPECT_EQ(testutil::read_file(path), before) << "the previous saved view must survive";
}

}  // namespace
}  // namespace kvscope
