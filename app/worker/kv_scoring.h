// The Cache panel's loss-per-position plot: the text on screen scored under
// several cache layouts (dense f32, the running one, the same window with
// and without sinks) by the real engine, on a thread of its own: one forward
// over up to the whole context per layout can take seconds on a large model.
// The Session owns the scorer and starts it only on cmd::ScoreKvLayouts.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "model/decoding/kv_eval.h"

namespace kvscope {

struct LayoutScoreRequest {
  std::shared_ptr<const Model> model;
  std::vector<int> tokens;        // the text: prompt + generated, at most n_positions
  std::vector<KVLayout> layouts;  // scored in this order; the first is the reference (dense f32)
  // The step whose text this is (held, so no later record reuses its
  // address): the result is current while that step is shown.
  RecordPtr at;
};

struct LayoutScoreResult {
  LayoutScoreRequest request;
  std::vector<LayoutScores> scores;  // (layouts): nll per position; the others also against layouts[0]
  std::string error;                 // a failed run (e.g. a layout the model cannot hold)
};

// The layouts the plot compares for the running layout `run`: dense f32,
// then `run`; with a window also that window without sinks and with 4 sinks
// (whichever `run` is not); evicting by score with budget N, also the other
// rule (TOVA / H2O) at N and a window of N positions, 4 of them sinks (N > 8).
std::vector<KVLayout> layouts_to_compare(const KVLayout& run, const KVLayout& dense);

class LayoutScorer {
 public:
  LayoutScorer() = default;
  ~LayoutScorer();
  LayoutScorer(const LayoutScorer&) = delete;
  LayoutScorer& operator=(const LayoutScorer&) = delete;

  // Queues `r`, replacing one not started yet; runs one request at a time.
  void request(LayoutScoreRequest r);
  bool busy() const;
  // The newest finished result, null before the first.
  std::shared_ptr<const LayoutScoreResult> result() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<LayoutScoreRequest> pending_;
  std::shared_ptr<const LayoutScoreResult> result_;
  bool running_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace kvscope
