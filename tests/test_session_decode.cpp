// The window's controller (app/session/session.*, the real one, headless) running
// beam search and speculative decoding: the strategy chosen by a typed
// command, every step arriving as an immutable record through the engine
// thread, the timeline scrubbing them as for one sequence. What the session
// shows must be exactly what the engine computes on its own (the engine is
// checked against the NumPy references in test_beam.cpp and
// test_spec_decode.cpp), and greedy speculation must give plain greedy
// decoding's tokens through the session too.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>

#include "app/session/session.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/setting_ranges.h"
#include "model/decoding/strategy.h"
#include "numpy_ref_util.h"
#include "render/scene/scene.h"

namespace kvscope {
namespace {

using namespace std::chrono_literals;
using testutil::run_numpy_ref;
using testutil::shell_quote;
using testutil::TempDir;

// Two random checkpoints with the same tokenizer (numpy_ref.py writes one
// vocabulary for every shape): a target and a smaller-context draft.
struct Pair {
  std::unique_ptr<TempDir> dir;
  std::string target, draft;
};
const Pair& pair() {
  static Pair p = [] {
    Pair r;
    r.dir = std::make_unique<TempDir>("session_decode");
    r.target = *r.dir / "target";
    r.draft = *r.dir / "draft";
    run_numpy_ref("make --out " + shell_quote(r.target) + " --layers 2 --heads 2 --embd 32 --ctx 48 --seed 21",
                  *r.dir / "t.log");
    run_numpy_ref("make --out " + shell_quote(r.draft) + " --layers 1 --heads 2 --embd 16 --ctx 40 --seed 22",
                  *r.dir / "d.log");
    return r;
  }();
  return p;
}

template <class F>
void update_until(Session& s, F done) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 60s) << "the session did not get there";
    s.update(1e9);  // (a fixed clock: no playback, only what the test asks for)
    std::this_thread::sleep_for(1ms);
  }
}

// A paused session on `target` (default: the pair's), running `d` on `prompt`.
void start(Session& s, const Strategy& d, const std::string& prompt, int max_new, const std::string& target = "") {
  s.ui.playing = false;
  s.ui.max_new = max_new;
  s.ui.preset = kNumPresets;
  s.ui.custom_prompt = prompt;
  s.load_model(target.empty() ? pair().target : target);
  update_until(s, [&] { return s.engine.model != nullptr && s.engine.started; });
  s.execute(cmd::SetStrategy{d}, 0);
  s.ui.playing = false;
  update_until(s, [&] { return s.engine_idle() && (s.engine.started || !s.ui.errors.empty()); });
}

// Until the engine has nothing left to do and every event it published was
// taken in (events are published before a command counts as done).
void settle(Session& s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const bool idle = s.engine_idle();
    s.update(1e9);
    if (idle && s.engine_idle()) return;
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 60s) << "the engine did not settle";
    std::this_thread::sleep_for(1ms);
  }
}

// Steps (Scrub +1 at the newest step = compute the next one) until the generation stops.
void run_to_end(Session& s) {
  for (int i = 0; i < 200 && s.engine.stop == StopReason::kNone; ++i) {
    s.execute(cmd::Scrub{1}, 0);
    settle(s);
  }
  ASSERT_NE(s.engine.stop, StopReason::kNone);
}

TEST(SessionDecoding, BeamSearchInTheSessionIsTheEnginesBeamSearch) {
  Session s;
  const Strategy d = strategy::Beam{3, 0.5};
  start(s, d, "abc ab", 7);
  run_to_end(s);
  EXPECT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  EXPECT_TRUE(s.engine.records().empty()) << "beam search keeps its own records";

  // The engine alone, same model, prompt and settings.
  BeamGenerator ref(s.engine.model);
  BeamOptions o;
  o.n_beams = 3;
  o.length_penalty = 0.5;
  o.max_new = 7;
  ref.start("abc ab", o);
  std::vector<BeamRecordPtr> want;
  while (BeamRecordPtr r = ref.step()) want.push_back(r);
  ASSERT_EQ(s.engine.tree.beam_records().size(), want.size());
  ASSERT_EQ(s.engine.timeline_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const BeamStepRecord& got = *s.engine.tree.beam_records()[i];
    EXPECT_EQ(got.index, static_cast<int>(i));
    ASSERT_EQ(got.candidates.size(), want[i]->candidates.size()) << "step " << i;
    EXPECT_EQ(got.candidates.size(), 6u) << "2N candidates";
    for (size_t c = 0; c < got.candidates.size(); ++c) {
      EXPECT_EQ(got.candidates[c].token, want[i]->candidates[c].token);
      EXPECT_EQ(got.candidates[c].running, want[i]->candidates[c].running);
      EXPECT_EQ(got.candidates[c].logprob, want[i]->candidates[c].logprob);
    }
  }
  const BeamStepRecord& last = *s.engine.tree.beam_records().back();
  ASSERT_FALSE(last.finished.empty());
  EXPECT_EQ(last.finished.front().tokens, ref.search().finished().front().tokens);
  EXPECT_EQ(last.finished.front().score, ref.search().finished().front().score);
  EXPECT_EQ(s.engine.stop, ref.reason());
  EXPECT_EQ(new_tokens(s.engine), static_cast<int>(want.size()));
}

TEST(SessionDecoding, TheTimelineScrubsBeamStepsAndSamplingOnlyControlsStandAside) {
  Session s;
  const Strategy d = strategy::Beam{2, 1.0};
  start(s, d, "ab", 5);
  run_to_end(s);
  const int n = s.engine.timeline_size();
  ASSERT_GE(n, 3);
  EXPECT_EQ(shown_step(s.engine, s.ui), n - 1);
  s.execute(cmd::ScrubTo{1}, 0);
  EXPECT_EQ(shown_step(s.engine, s.ui), 1);
  s.execute(cmd::Scrub{-1}, 0);
  EXPECT_EQ(shown_step(s.engine, s.ui), 0);
  s.execute(cmd::Scrub{+1}, 0);
  EXPECT_EQ(shown_step(s.engine, s.ui), 1);
  // Forking and the cache switch belong to one sampled sequence.
  s.execute(cmd::Fork{5}, 0);
  s.execute(cmd::ToggleCache{}, 0);
  EXPECT_EQ(s.engine.pending_forks, 0);
  EXPECT_EQ(s.engine.mode, CacheMode::kKV);
  EXPECT_FALSE(prediction_hidden(s.engine, s.ui));
  // Reset starts the same strategy again; back to sampling gives one sequence's records.
  s.execute(cmd::Reset{}, 0);
  EXPECT_EQ(s.engine.timeline_size(), 0);
  s.ui.playing = false;
  run_to_end(s);
  EXPECT_EQ(s.engine.timeline_size(), n);
  s.execute(cmd::SetStrategy{Strategy()}, 0);
  s.ui.playing = false;
  run_to_end(s);
  EXPECT_TRUE(s.engine.tree.beam_records().empty());
  EXPECT_EQ(s.engine.timeline_size(), static_cast<int>(s.engine.records().size()));
  EXPECT_GE(s.engine.records().size(), 1u);
  EXPECT_TRUE(s.ui.errors.empty());
}

TEST(SessionDecoding, GreedySpeculationInTheSessionWritesPlainGreedyTokens) {
  // Plain greedy decoding through the session first.
  Session plain;
  start(plain, Strategy(), "abc", 12);
  run_to_end(plain);
  ASSERT_FALSE(plain.engine.records().empty());
  std::vector<int> want;
  for (const TokenInfo& t : plain.engine.seq.tokens) want.push_back(t.id);

  for (int k : {1, 3, 5}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    Session s;
    const Strategy d = strategy::Speculative{pair().draft, k};
    start(s, d, "abc", 12);
    run_to_end(s);
    ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
    std::vector<int> got = s.engine.tree.spec_iterations().front()->prompt;
    int forwards = 0;
    for (const SpecIterationPtr& it : s.engine.tree.spec_iterations()) {
      got.insert(got.end(), it->emitted.begin(), it->emitted.end());
      EXPECT_EQ(it->target_forwards, ++forwards) << "one model forward per iteration";
    }
    EXPECT_EQ(got, want);
    const SpecIteration& last = *s.engine.tree.spec_iterations().back();
    EXPECT_EQ(last.generated, static_cast<int>(want.size() - s.engine.tree.spec_iterations().front()->prompt.size()));
    EXPECT_EQ(new_tokens(s.engine), last.generated);
  }
}

// The window runs speculation on a model with its own sliding window
// (Mistral's sliding_window = 8) past the window, rejected drafts included:
// the session shows plain greedy decoding's tokens, with no error.
TEST(SessionDecoding, SpeculationOnAModelWithItsOwnWindowWritesPlainGreedyTokens) {
  const std::string suite = testutil::llama_suite_dir();
  const std::string target = suite + "/mistral_gqa4_bf16_untied_window";
  Session plain;
  start(plain, Strategy(), "one two three", 24, target);
  run_to_end(plain);
  ASSERT_TRUE(plain.ui.errors.empty()) << plain.ui.errors.front();
  std::vector<int> want;
  for (const TokenInfo& t : plain.engine.seq.tokens) want.push_back(t.id);
  ASSERT_GT(want.size(), 8u + 4u) << "the run must outgrow the window";

  Session s;
  const Strategy d = strategy::Speculative{suite + "/llama_gqa1_f32_tied_single", 4};
  start(s, d, "one two three", 24, target);
  run_to_end(s);
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  std::vector<int> got = s.engine.tree.spec_iterations().front()->prompt;
  int rejected = 0;
  for (const SpecIterationPtr& it : s.engine.tree.spec_iterations()) {
    got.insert(got.end(), it->emitted.begin(), it->emitted.end());
    rejected += it->n_accepted < it->k ? 1 : 0;
  }
  EXPECT_EQ(got, want);
  EXPECT_GT(rejected, 0);
}

TEST(SessionDecoding, AMissingDraftFolderIsAnErrorNamingItAndTheSessionCarriesOn) {
  Session s;
  const Strategy d = strategy::Speculative{"/nonexistent/draft-folder", 4};
  start(s, d, "abc", 4);
  update_until(s, [&] { return !s.ui.errors.empty(); });
  EXPECT_NE(s.ui.errors.front().find("/nonexistent/draft-folder"), std::string::npos) << s.ui.errors.front();
  EXPECT_NE(s.ui.errors.front().find("draft model"), std::string::npos) << s.ui.errors.front();
  // Back to sampling: a generation runs.
  s.ui.errors.clear();
  s.execute(cmd::SetStrategy{Strategy()}, 0);
  s.ui.playing = false;
  run_to_end(s);
  EXPECT_FALSE(s.engine.records().empty());
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

TEST(SessionDecoding, ASlidingWindowWithBeamsIsRefusedInTheErrorPanel) {
  Session s;
  s.ui.kv_layout.window = 8;  // the KV memory layout section
  const Strategy d = strategy::Beam{};
  start(s, d, "abc", 4);
  update_until(s, [&] { return !s.ui.errors.empty(); });
  EXPECT_NE(s.ui.errors.front().find("sliding window"), std::string::npos) << s.ui.errors.front();
  EXPECT_NE(s.ui.errors.front().find("beam search"), std::string::npos) << s.ui.errors.front();
  EXPECT_TRUE(s.engine.tree.beam_records().empty());
}

// Eviction by score in the KV memory layout: beam search and speculative
// decoding are refused naming it (their forks and rollbacks need positions
// the rule may have dropped), as the CLI refuses them; plain decoding runs it,
// and the scene shows each layer's own survivors.
TEST(SessionDecoding, EvictionByScoreRunsPlainDecodingAndIsRefusedWithBeamsAndDrafts) {
  for (const Strategy& d : {Strategy(strategy::Beam{}), Strategy(strategy::Speculative{pair().draft, 4})}) {
    Session s;
    s.ui.kv_layout.evict = KVEvict::kH2O;
    s.ui.kv_layout.budget = 4;
    start(s, d, "abc", 4);
    update_until(s, [&] { return !s.ui.errors.empty(); });
    EXPECT_NE(s.ui.errors.front().find("eviction by score (h2o)"), std::string::npos) << s.ui.errors.front();
    EXPECT_TRUE(s.engine.tree.beam_records().empty());
  }
  Session s;
  s.ui.kv_layout.evict = KVEvict::kTova;
  s.ui.kv_layout.budget = 3;
  start(s, Strategy(), "abcdefg", 6);
  run_to_end(s);
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  ASSERT_FALSE(s.engine.records().empty());
  const StepRecord& r = *s.engine.records().back();
  ASSERT_EQ(r.kv_held_by_layer.size(), 2u);
  const Scene scene = build_scene(s.engine.records(), s.engine.records().size(), ViewOptions());
  for (const BlockInstance& b : scene.kv) {
    if (b.pos >= r.seq_len) continue;
    const std::vector<int>& h = r.kv_held_by_layer[static_cast<size_t>(b.layer)];
    EXPECT_LE(h.size(), 3u);
    EXPECT_EQ(is_held(b.state), std::binary_search(h.begin(), h.end(), b.pos)) << b.pos << " " << b.layer;
  }
}

// A strategy change the worker refuses (beams under a sliding window) changes
// nothing: the generation on screen, its strategy (in the engine state and the
// Decoding panel) and its timeline stay, and stepping goes on from it.
TEST(SessionDecoding, ARefusedStrategyChangeLeavesTheRunningGenerationAsItWas) {
  Session s;
  s.ui.kv_layout.window = 8;
  start(s, Strategy(), "abc", 6);
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  for (int i = 0; i < 2; ++i) {
    s.execute(cmd::Scrub{1}, 0);
    settle(s);
  }
  const std::vector<RecordPtr> before = s.engine.records();
  ASSERT_GE(before.size(), 2u);
  const uint64_t generation = s.engine.generation;
  const Strategy beams = strategy::Beam{4, 1.0};
  s.execute(cmd::SetStrategy{beams}, 0);
  update_until(s, [&] { return !s.ui.errors.empty(); });
  settle(s);
  EXPECT_NE(s.ui.errors.front().find("sliding window"), std::string::npos) << s.ui.errors.front();
  EXPECT_TRUE(is_sampling(s.engine.strategy));
  EXPECT_TRUE(is_sampling(s.ui.strategy));
  EXPECT_TRUE(s.engine.started);
  EXPECT_EQ(s.engine.generation, generation);
  EXPECT_EQ(s.engine.records(), before);
  EXPECT_EQ(s.engine.seq_count, before.size());
  s.ui.errors.clear();
  s.execute(cmd::Scrub{1}, 0);  // the next step of the same generation
  settle(s);
  ASSERT_EQ(s.engine.records().size(), before.size() + 1);
  EXPECT_EQ(s.engine.records()[before.size() - 1], before.back());
  EXPECT_EQ(s.engine.records().back()->index, before.back()->index + 1);
  EXPECT_TRUE(s.ui.errors.empty());
}

// The end of the generation stops playback: the Playback button reads Play,
// the page's "pause" does nothing, and Play plays the prompt again.
TEST(SessionDecoding, TheEndStopsPlaybackAndPlayPlaysAgain) {
  Session s;
  start(s, Strategy{}, "abc", 3);
  s.ui.fastest = true;
  s.ui.playing = true;  // played, not stepped, to the end
  double t = 0;
  update_until(s, [&] {
    s.update(t += 1.0);
    return s.engine.stop != StopReason::kNone && s.engine_idle();
  });
  ASSERT_EQ(s.engine.records().size(), 3u);
  EXPECT_FALSE(s.ui.playing);
  const uint64_t request = s.engine.start_request;
  s.execute(cmd::PlayPause{}, 0);  // Space
  EXPECT_EQ(s.engine.start_request, request + 1);
  EXPECT_TRUE(s.ui.playing);
}

// The same refusal is decided before anything changes (the controller asks
// strategy_refusal before it sends the engine a start): no start reaches the
// engine, the camera stays, and every control the user reaches for next
// works on the generation on screen: Space plays it, the right arrow steps it, R and
// Generate restart it with the strategy that runs. A window chosen while
// beams run refuses R the same way, and the beams stay on screen.
TEST(SessionDecoding, ARefusedStartChangesNothingAndEveryControlStillWorks) {
  Session s;
  s.ui.kv_layout.window = 8;
  start(s, Strategy(), "abc", 12);
  ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
  s.execute(cmd::Scrub{1}, 0);
  settle(s);
  const std::vector<RecordPtr> before = s.engine.records();
  const uint64_t request = s.engine.start_request, generation = s.engine.generation;
  s.ui.camera = CameraPreset::kFront;
  s.ui.auto_camera = true;
  const Strategy beams = strategy::Beam{};
  s.ui.strategy = beams;  // the Decoding panel's radio button, then Restart
  s.execute(cmd::SetStrategy{beams}, 0);
  ASSERT_EQ(s.ui.errors.size(), 1u);  // at once, not from the engine thread
  EXPECT_NE(s.ui.errors.front().find("beam search: the sliding window"), std::string::npos) << s.ui.errors.front();
  EXPECT_EQ(s.engine.start_request, request);
  EXPECT_TRUE(is_sampling(s.engine.strategy));
  EXPECT_TRUE(is_sampling(s.ui.strategy));
  EXPECT_EQ(s.ui.camera, CameraPreset::kFront);
  EXPECT_TRUE(s.engine.started);
  EXPECT_EQ(s.engine.records(), before);
  settle(s);
  EXPECT_EQ(s.ui.errors.size(), 1u);
  s.ui.errors.clear();
  s.execute(cmd::Scrub{1}, 0);  // right arrow: the next step of the same generation
  settle(s);
  ASSERT_EQ(s.engine.records().size(), before.size() + 1);
  EXPECT_EQ(s.engine.generation, generation);
  s.execute(cmd::PlayPause{}, 0);  // Space
  EXPECT_TRUE(s.ui.playing);
  s.execute(cmd::PlayPause{}, 0);
  s.execute(cmd::Reset{}, 0);  // R: sampling again, from the prompt
  EXPECT_EQ(s.engine.start_request, request + 1);
  update_until(s, [&] { return s.engine.started; });
  s.execute(cmd::Start{"abcd"}, 0);  // Generate
  EXPECT_EQ(s.engine.start_request, request + 2);
  update_until(s, [&] { return s.engine.started; });
  EXPECT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();

  // Beams running, then a window chosen in the Cache panel: R is refused, the beams stay.
  Session b;
  start(b, beams, "abc", 4);
  b.execute(cmd::Scrub{1}, 0);
  settle(b);
  ASSERT_TRUE(b.ui.errors.empty()) << b.ui.errors.front();
  const std::vector<BeamRecordPtr> beam_before = b.engine.tree.beam_records();
  ASSERT_FALSE(beam_before.empty());
  const uint64_t beam_request = b.engine.start_request;
  b.ui.kv_layout.window = 8;
  b.execute(cmd::Reset{}, 0);
  ASSERT_EQ(b.ui.errors.size(), 1u);
  EXPECT_NE(b.ui.errors.front().find("set the window to 0"), std::string::npos) << b.ui.errors.front();
  EXPECT_EQ(b.engine.start_request, beam_request);
  EXPECT_EQ(b.engine.tree.beam_records(), beam_before);
  EXPECT_TRUE(is_beam(b.engine.strategy));
  EXPECT_TRUE(b.engine.started);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Bytes of one position's K and V over every layer, from the row formats
// (f32: 4 bytes a value; q8_0: 34 bytes per 32 values), not from the cache.
uint64_t position_bytes(const Config& c, KVDtype d) {
  const uint64_t row = d == KVDtype::kF32 ? 4ull * c.n_embd : 34ull * (c.n_embd / 32);
  return 2ull * c.n_layer * row;
}

// The current branch's next step (Scrub +1 at the newest): one position
// computed from its cache, with the other branch's sequence kept beside it.
const StepRecord& step_beside_a_kept_branch(Session& s, size_t records) {
  s.execute(cmd::Scrub{1}, 0);
  settle(s);
  EXPECT_EQ(s.engine.records().size(), records);
  const StepRecord& r = *s.engine.records().back();
  EXPECT_FALSE(r.refill);
  EXPECT_EQ(r.n_new, 1);
  EXPECT_EQ(r.kv_sequences, 2);
  return r;
}

// Branching in the window keeps the branch it left in the cache: forked at
// an earlier step, the two branches share the prefix's full pages (the
// partial one is copied on the new branch's first write), the stacks see the
// shared pages and the byte counter counts each page once. A contiguous
// cache cannot share rows past a copy: its bytes are the two sequences'.
TEST(SessionDecoding, ABranchSharesItsPrefixPagesWithTheBranchItLeft) {
  const int B = 4;
  for (const KVDtype dtype : {KVDtype::kF32, KVDtype::kQ8_0}) {
    for (const int block : {B, 0}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + (block ? " paged" : " contiguous"));
      Session s;
      s.ui.kv_layout.dtype = dtype;
      s.ui.kv_layout.block = block;
      s.ui.ignore_eos = true;
      start(s, Strategy(), "abc ab", 16);
      for (int i = 0; i < 8; ++i) {  // the first branch: 8 records (the prefill and 7 steps)
        if (static_cast<int>(s.engine.records().size()) >= 8) break;
        s.execute(cmd::Scrub{1}, 0);
        settle(s);
      }
      ASSERT_TRUE(s.ui.errors.empty()) << s.ui.errors.front();
      ASSERT_EQ(s.engine.records().size(), 8u);
      const int old_len = s.engine.records().back()->seq_len;  // positions the first branch's cache holds
      const RecordPtr at = s.engine.records()[3];
      const int p = at->seq_len;
      int token = at->top[0].token == at->token ? at->top[1].token : at->top[0].token;
      s.execute(cmd::ScrubTo{3}, 0);
      s.execute(cmd::Fork{token}, 0);
      settle(s);
      ASSERT_EQ(s.engine.tree.size(), 2u);
      ASSERT_EQ(s.engine.records().size(), 4u);
      EXPECT_EQ(s.engine.records().back()->kv_sequences, 2) << "the fork keeps the branch it left";
      const StepRecord& r = step_beside_a_kept_branch(s, 5);  // the new branch's first step
      EXPECT_EQ(r.seq_len, p + 1);
      const uint64_t per = position_bytes(s.engine.model->config, dtype);
      if (block == 0) {
        EXPECT_EQ(r.kv_rows, old_len + p + 1);
        EXPECT_EQ(r.kv_bytes, static_cast<uint64_t>(old_len + p + 1) * per);
        EXPECT_EQ(r.kv_bytes_separate, r.kv_bytes);
        continue;
      }
      const int old_pages = (old_len + B - 1) / B, new_pages = (p + 1 + B - 1) / B, shared = p / B;
      EXPECT_EQ(r.kv_blocks, old_pages + new_pages - shared);
      EXPECT_EQ(r.kv_bytes, static_cast<uint64_t>(old_pages + new_pages - shared) * B * per);
      EXPECT_EQ(r.kv_bytes_separate, static_cast<uint64_t>(old_pages + new_pages) * B * per);
      EXPECT_EQ(r.kv_rows, old_len + (p + 1 - shared * B));
      ASSERT_EQ(r.kv_held.count(), p + 1);
      for (int q = 0; q <= p; ++q) {
        const PageRun* run = r.page_at(q);
        ASSERT_NE(run, nullptr) << q;
        EXPECT_EQ(run->refs, q < shared * B ? 2 : 1) << q;
      }
      // The scene frames the shared pages as shared.
      const Scene scene = build_scene(s.engine.seq, ViewOptions());
      int shared_frames = 0;
      for (const BlockInstance& f : scene.cache_marks) shared_frames += f.mark == CacheMark::kSharedPage;
      EXPECT_GT(shared_frames, 0);
      // Back to the first branch: its kept sequence is taken over, so its next
      // step computes one position, and the new branch stays beside it.
      s.execute(cmd::SelectBranch{0}, 0);
      settle(s);
      EXPECT_EQ(s.engine.tree.current(), 0);
      ASSERT_EQ(s.engine.records().size(), 8u);
      const StepRecord& back = step_beside_a_kept_branch(s, 9);
      EXPECT_EQ(back.seq_len, old_len + 1);
      const int back_pages = (old_len + 1 + B - 1) / B;
      EXPECT_EQ(back.kv_bytes, static_cast<uint64_t>(back_pages + new_pages - shared) * B * per);
    }
  }
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// The strategy is one type with one refusal (said in the window's words and
// the CLI's), one clamp into the CLI's ranges and one JSON name per kind.
TEST(Strategy, OneRefusalOneClampOneName) {
  KVLayout window;
  window.window = 8;
  std::optional<StrategyRefusal> r = strategy_refusal(strategy::Beam{}, window);
  ASSERT_TRUE(r);
  EXPECT_NE(r->usage.find("--kv-window: not available with --beams"), std::string::npos) << r->usage;
  EXPECT_NE(r->message.find("beam search: the sliding window"), std::string::npos) << r->message;
  KVLayout evict;
  evict.evict = KVEvict::kTova;
  evict.budget = 4;
  r = strategy_refusal(strategy::Speculative{"draft", 4}, evict);
  ASSERT_TRUE(r);
  EXPECT_NE(r->usage.find("--kv-evict: not available with --draft"), std::string::npos) << r->usage;
  EXPECT_NE(r->message.find("eviction by score (tova)"), std::string::npos) << r->message;
  EXPECT_FALSE(strategy_refusal(strategy::Sample{}, window));
  EXPECT_FALSE(strategy_refusal(strategy::Beam{}, KVLayout{}));

  EXPECT_EQ(clamp_strategy(strategy::Beam{0, std::nan("")}), Strategy(strategy::Beam{1, 1.0}));
  EXPECT_EQ(clamp_strategy(strategy::Beam{99, 1e9}),
            Strategy(strategy::Beam{static_cast<int>(setting::kBeams.hi), setting::kLengthPenalty.hi}));
  EXPECT_EQ(clamp_strategy(strategy::Speculative{"d", 0}), Strategy(strategy::Speculative{"d", 1}));
  EXPECT_EQ(clamp_strategy(strategy::Sample{}), Strategy(strategy::Sample{}));

  for (const Strategy& s :
       {Strategy(strategy::Sample{}), Strategy(strategy::Beam{}), Strategy(strategy::Speculative{})}) {
    const std::optional<Strategy> back = strategy_of_key(strategy_key(s));
    ASSERT_TRUE(back) << strategy_key(s);
    EXPECT_EQ(back->index(), s.index());
  }
  EXPECT_FALSE(strategy_of_key("greedy"));
}

}  // namespace
}  // namespace kvscope
