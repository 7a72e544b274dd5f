#include "model/watch/sequence.h"

namespace kvscope {

SeqStep SequenceTracker::next(int64_t seq) {
  SeqStep s;
  s.last = last_;
  if (last_ < 0) {
    s.verdict = SeqVerdict::kFirst;
  } else if (seq == last_ + 1) {
    s.verdict = SeqVerdict::kNext;
  } else if (seq > last_ + 1) {
    s.verdict = SeqVerdict::kGap;
    s.missed = seq - last_ - 1;
    missed_ += s.missed;
  } else {
    s.verdict = SeqVerdict::kRestart;
    s.missed = seq;
    missed_ += seq;
    ++restarts_;
  }
  last_ = seq;
  return s;
}

}  // namespace kvscope
