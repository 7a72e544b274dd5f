#include "app/gui/soak.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "app/session/saved_view.h"
#include "model/core/units.h"
#include "render/gl/gl_objects.h"

namespace kvscope {

uint64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void FrameStats::add(double seconds, bool loading) {
  (loading ? loading_ms_ : ms_).push_back(static_cast<float>(seconds * 1000.0));
}

namespace {
std::string describe(std::vector<float> v) {
  if (v.empty()) return "none";
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%zu, median %.1f ms, p95 %.1f ms, max %.1f ms", v.size(), at(0.5), at(0.95),
                v.back());
  return buf;
}
}  // namespace

std::string FrameStats::summary() const {
  return "frames: " + describe(ms_) + "; while loading a model: " + describe(loading_ms_);
}

double FrameStats::max_ms(bool loading) const {
  const auto& v = loading ? loading_ms_ : ms_;
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

SoakRun::SoakRun(int rounds) : rounds_(rounds) {
  SavedView v;  // as saved with a 12-layer, 12-head model: indices the loaded one may lack
  v.layer = 4095;
  v.head = 4095;
  v.step = 4095;
  v.prompt = "The KV cache";  // short: fits any context the soak runs with
  v.max_new = 4096;
  v.presentation = true;
  view_path_ =
      (std::filesystem::temp_directory_path() / ("kvscope-soak-view-" + std::to_string(getpid()) + ".json")).string();
  save_view(v, view_path_);
}

SoakRun::~SoakRun() {
  std::remove(view_path_.c_str());
}

std::vector<UiCommand> SoakRun::frame(const EngineState& engine, bool engine_idle) {
  std::vector<UiCommand> cmds;
  if (finished() || !engine.started || engine.stop == StopReason::kNone || !engine_idle) return cmds;
  if (engine.generation == handled_generation_) return cmds;
  handled_generation_ = engine.generation;
  Round r;
  r.stop = engine.stop;
  r.mode = engine.records().empty() ? engine.mode : engine.records().back()->mode;
  r.positions = engine.records().empty() ? 0 : engine.records().back()->seq_len;
  r.context = engine.model ? engine.model->config.n_positions : 0;
  r.rss = resident_bytes();
  for (int i = 0; i < gl::kNumObjectKinds; ++i) r.gl_live += gl::object_count(static_cast<gl::ObjectKind>(i)).live();
  r.gl_summary = gl::object_counts_summary();
  rounds_done_.push_back(r);
  std::fprintf(stderr,
               "kvscope: soak: round %zu/%d: %s at %d/%d positions (%s), resident %s, %" PRId64 " GL objects live\n",
               rounds_done_.size(), rounds_, to_string(r.stop), r.positions, r.context, to_string(r.mode),
               format_bytes(static_cast<double>(r.rss)).c_str(), r.gl_live);
  if (!finished()) {
    if (rounds_done_.size() == 1) {
      std::fprintf(stderr, "kvscope: soak: restoring %s (a view saved with another model)\n", view_path_.c_str());
      cmds.push_back(cmd::LoadView{view_path_});
      // Its layer and head (4095) are reported in the error panel and fitted;
      // dismissed, so the scripted run's verdict counts only unexpected errors.
      cmds.push_back(cmd::DismissErrors{});
    }
    cmds.push_back(cmd::ToggleCache{});  // the next round runs in the other mode
    cmds.push_back(cmd::Reset{});
  }
  return cmds;
}

int SoakRun::report(std::FILE* out, int64_t gl_live_after) const {
  int rc = 0;
  if (rounds_done_.empty()) {
    std::fprintf(out, "kvscope: soak: FAIL: no round finished\n");
    return 1;
  }
  for (size_t i = 0; i < rounds_done_.size(); ++i) {
    const Round& r = rounds_done_[i];
    if (r.stop != StopReason::kContextFull || r.positions != r.context) {
      std::fprintf(out, "kvscope: soak: FAIL: round %zu stopped with '%s' at %d of %d positions\n", i + 1,
                   to_string(r.stop), r.positions, r.context);
      rc = 1;
    }
  }
  const Round& first = rounds_done_.front();
  const Round& last = rounds_done_.back();
  const double growth = first.rss ? static_cast<double>(last.rss) / static_cast<double>(first.rss) - 1.0 : 0.0;
  std::fprintf(out, "kvscope: soak: %zu rounds; resident after round 1: %s, after round %zu: %s (%+.2f %%)\n",
               rounds_done_.size(), format_bytes(static_cast<double>(first.rss)).c_str(), rounds_done_.size(),
               format_bytes(static_cast<double>(last.rss)).c_str(), 100.0 * growth);
  std::fprintf(out, "kvscope: soak: GL objects after round 1: %s\n", first.gl_summary.c_str());
  std::fprintf(out, "kvscope: soak: GL objects after round %zu: %s\n", rounds_done_.size(), last.gl_summary.c_str());
  std::fprintf(out, "kvscope: soak: GL objects alive after the renderer was destroyed: %" PRId64 "\n", gl_live_after);
  if (growth > 0.05) {
    std::fprintf(out, "kvscope: soak: FAIL: resident memory grew more than 5 %%\n");
    rc = 1;
  }
  if (last.gl_live > first.gl_live) {
    std::fprintf(out, "kvscope: soak: FAIL: live GL objects grew from %" PRId64 " to %" PRId64 "\n", first.gl_live,
                 last.gl_live);
    rc = 1;
  }
  if (gl_live_after != 0) {
    std::fprintf(out, "kvscope: soak: FAIL: %" PRId64 " GL objects were never deleted\n", gl_live_after);
    rc = 1;
  }
  if (rc == 0) std::fprintf(out, "kvscope: soak: ok\n");
  return rc;
}

}  // namespace kvscope
