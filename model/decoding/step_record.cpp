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
  PositionRuns out;
  for (int p : ascending) out.push_back(p);
  return out;
}

void PositionRuns::push_back(int pos) {
  if (!runs_.empty()) {
    Run& last = runs_.back();
    const int end = last.first + last.n;
    if (pos < end) {
      throw Error("PositionRuns::push_back: position " + std::to_string(pos) + " after " + std::to_string(end - 1) +
                  " (expected ascending, distinct positions)");
    }
    if (pos == end) {
      ++last.n;
      ++count_;
      return;
    }
  }
  runs_.push_back({pos, 1});
  ++count_;
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
