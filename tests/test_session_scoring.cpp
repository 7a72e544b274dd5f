// The Cache panel's loss-per-position plot is scored by the session, on a
// command (cmd::ScoreKvLayouts): a finished generation left on screen starts
// no work by itself, and the scores the command brings back are the engine's
// next-token distributions of the text shown, checked against each record's
// own logits (the step-by-step generation: a different code path from the
// one batched forward the scorer runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "app/session/session.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using namespace std::chrono_literals;

const std::string& model_dir() {
  static testutil::TempDir dir("session_scoring");
  static const std::string path = [] {
    const std::string p = dir / "model";
    testutil::run_numpy_ref(
        "make --out " + testutil::shell_quote(p) + " --layers 2 --heads 2 --embd 32 --ctx 48 --seed 31",
        dir / "make.log");
    return p;
  }();
  return path;
}

// -log softmax(logits)[token], in double.
double nll_of(const std::vector<float>& logits, int token) {
  double mx = logits[0], z = 0;
  for (float v : logits) mx = std::max<double>(mx, v);
  for (float v : logits) z += std::exp(v - mx);
  return -(logits[static_cast<size_t>(token)] - mx - std::log(z));
}

// Frames of the window's loop, until `done` (each frame waits 1 ms; at most 60000 frames).
template <class F>
bool frames_until(Session& s, F done) {
  for (int i = 0; i < 60000; ++i) {
    s.update(1e9);  // a fixed clock: no playback, only what the test asks for
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(SessionScoring, ScoringStartsOnlyOnTheCommand) {
  Session s;
  s.ui.playing = false;
  s.ui.max_new = 6;
  s.ui.preset = kNumPresets;
  s.ui.custom_prompt = "abc ab";
  s.ui.sampler.greedy = true;
  s.load_model(model_dir());
  ASSERT_TRUE(frames_until(s, [&] { return s.engine.model != nullptr && s.engine.started; }));
  for (int i = 0; i < 10 && s.engine.stop == StopReason::kNone; ++i) {
    s.execute(cmd::Step{}, 0);
    ASSERT_TRUE(frames_until(s, [&] { return s.engine_idle() && !s.engine.step_in_flight; }));
  }
  ASSERT_GE(s.engine.records().size(), 3u);
  // A stopped or paused generation on screen, many frames: nothing is scored.
  for (int i = 0; i < 50; ++i) s.update(1e9);
  EXPECT_FALSE(s.engine.kv_scoring);
  EXPECT_EQ(s.engine.kv_scores, nullptr);

  s.execute(cmd::ScoreKvLayouts{}, 0);
  ASSERT_TRUE(frames_until(s, [&] { return s.engine.kv_scores != nullptr && !s.engine.kv_scoring; }));
  const LayoutScoreResult& res = *s.engine.kv_scores;
  ASSERT_TRUE(res.error.empty()) << res.error;
  EXPECT_EQ(res.request.at, s.engine.seq.current) << "the result names the step whose text it scored";
  ASSERT_EQ(res.scores.size(), res.request.layouts.size());
  ASSERT_EQ(res.request.tokens.size(), s.engine.seq.tokens.size());
  const LayoutScores& dense = res.scores[0];
  ASSERT_EQ(dense.nll.size(), res.request.tokens.size() - 1);
  // The generation ran dense f32 (the default layout): each record's logits
  // give the NLL of the token it chose at its position.
  for (const RecordPtr& r : s.engine.records()) {
    const size_t i = static_cast<size_t>(r->seq_len - 1);
    EXPECT_NEAR(dense.nll[i], nll_of(r->logits, r->token), 1e-4) << "position " << i;
  }
}

}  // namespace
}  // namespace kvscope
