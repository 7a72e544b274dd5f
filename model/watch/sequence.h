// The publisher's sequence numbers on its live socket (one per batch,
// counting from 0 when the server starts): what each received number means
// for the watcher. The live socket never repeats a number (replays come on
// the other socket), so a number at or below the last one means a new
// publisher: the server restarted.
#pragma once

#include <cstdint>

namespace kvscope {

enum class SeqVerdict {
  kFirst,    // the first batch since the attach (a later number: the server ran before)
  kNext,     // the one after the last
  kGap,      // some were skipped: `missed` batches lost (ask the replay socket)
  kRestart,  // back at or below the last one: the server restarted, its cache is new; above 0, the
             // new run's first `missed` batches were lost (ask the replay socket from 0)
};

struct SeqStep {
  SeqVerdict verdict = SeqVerdict::kFirst;
  int64_t missed = 0;  // kGap: how many between the last and this one; kRestart: how many before this one
  int64_t last = -1;   // the last accepted number before this one (-1: none)
};

class SequenceTracker {
 public:
  // Classifies `seq` and accepts it as the last.
  SeqStep next(int64_t seq);
  int64_t last() const { return last_; }
  int64_t missed() const { return missed_; }
  int restarts() const { return restarts_; }

 private:
  int64_t last_ = -1;
  int64_t missed_ = 0;
  int restarts_ = 0;
};

}  // namespace kvscope
