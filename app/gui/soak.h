// Long-run checks of the window (kvscope --soak-rounds N, scripts/soak.sh):
// generate to the full context, reset, switch the cache mode, N times, and
// watch resident memory and the GL objects the renderer owns. Also the frame
// time statistics that scripted runs (--demo-frames, --soak-rounds) print.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "app/session/state.h"

namespace kvscope {

// Resident set size of this process in bytes (/proc/self/statm), 0 if unknown.
uint64_t resident_bytes();

// Frame durations of a scripted run, split by whether a model was loading.
class FrameStats {
 public:
  void add(double seconds, bool loading);
  // "frames: 812, median 16.1 ms, p95 31.0 ms, max 48.2 ms; while loading: 120, median ..., max ..."
  std::string summary() const;
  double max_ms(bool loading) const;

 private:
  std::vector<float> ms_, loading_ms_;
};

class SoakRun {
 public:
  // Writes the saved view the first round ends with (see frame()).
  explicit SoakRun(int rounds);
  ~SoakRun();
  SoakRun(const SoakRun&) = delete;
  SoakRun& operator=(const SoakRun&) = delete;
  // Once per frame, after the worker's events are taken: when the current
  // generation has stopped and the engine is idle, records the round and
  // returns {switch the cache mode, reset} for the next one. The first round
  // also restores a saved view made with a bigger model (layer and head 4095,
  // step 4095, presentation mode, its own prompt), which the session must fit
  // to the loaded model; the later rounds run with that view's prompt.
  std::vector<UiCommand> frame(const EngineState& engine, bool engine_idle);
  bool finished() const { return static_cast<int>(rounds_done_.size()) >= rounds_; }
  // Per-round lines and the verdict to `out`; `gl_live_after` = GL objects
  // still alive once the renderer is gone (must be 0). Returns the exit code:
  // 1 when a round did not end at the context limit, resident memory after
  // the last round is more than 5 % above the first, the renderer's live GL
  // objects grew between the first and the last round, or any leaked.
  int report(std::FILE* out, int64_t gl_live_after) const;

 private:
  struct Round {
    StopReason stop = StopReason::kNone;
    CacheMode mode = CacheMode::kKV;
    int positions = 0, context = 0;
    uint64_t rss = 0;
    int64_t gl_live = 0;
    std::string gl_summary;
  };
  int rounds_;
  std::string view_path_;  // the other model's saved view, removed at the end
  uint64_t handled_generation_ = 0;
  std::vector<Round> rounds_done_;
};

}  // namespace kvscope
