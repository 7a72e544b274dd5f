#include "model/decoding/step_record.h"

#include <algorithm>

#include "model/core/error.h"

namespace kvscope {

const char* to_string(CacheMode m) {
  return m == CacheMode::kKV ? "kv_cache" : "no_cache";
}

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::kNone:
      return "";
    case StopReason::kEos:
      return "eos";
    case StopReason::kMaxNew:
      return "max_new";
    case StopReason::kContextFull:
      return "context_full";
    case StopReason::kStop:
      return "stop";
  }
  return "";
}

PositionRuns PositionRuns::from_sorted(const std::vector<int>& ascending) {
  // A call per stretch of consecutive positions, not per position (a cache's
  // held positions are one to three stretches; in WebAssembly each call from
  // here passes through a JavaScript exception trampoline).
  PositionRuns out;
  for (size_t i = 0, j; i < ascending.size(); i = j) {
    for (j = i + 1; j < ascending.size() && ascending[j] == ascending[j - 1] + 1;) ++j;
    out.push_run(ascending[i], static_cast<int>(j - i));
  }
  return out;
}

void PositionRuns::push_back(int pos) {
  push_run(pos, 1);
}

void PositionRuns::push_run(int first, int n) {
  if (!runs_.empty()) {
    Run& last = runs_.back();
    const int end = last.first + last.n;
    if (first < end) {
      throw Error("PositionRuns::push_back: position " + std::to_string(first) + " after " + std::to_string(end - 1) +
                  " (expected ascending, distinct positions)");
    }
    if (first == end) {
      last.n += n;
      count_ += n;
      return;
    }
  }
  runs_.push_back({first, n});
  count_ += n;
}

bool PositionRuns::contains(int pos) const {
  // The first run starting after pos; the run before it is the only one that may hold pos.
  const auto after = std::upper_bound(runs_.begin(), runs_.end(), pos, [](int p, const Run& r) { return p < r.first; });
  if (after == runs_.begin()) return false;
  const Run& r = *(after - 1);
  return pos < r.first + r.n;
}

std::vector<int> PositionRuns::positions() const {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(count_));
  for (int p : *this) out.push_back(p);
  return out;
}

const PageRun* StepCache::page_at(int pos) const {
  const auto after = std::upper_bound(kv_page_runs.begin(), kv_page_runs.end(), pos,
                                      [](int p, const PageRun& r) { return p < r.pos; });
  if (after == kv_page_runs.begin()) return nullptr;
  const PageRun& r = *(after - 1);
  return pos < r.pos + r.n ? &r : nullptr;
}

}  // namespace kvscope
