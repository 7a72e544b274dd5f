#include "app/session/fitting.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "app/session/choices.h"
#include "app/session/saved_view.h"
#include "app/session/settings.h"
#include "model/core/error.h"
#include "model/core/overloaded.h"
#include "model/kv/kv_cache.h"
#include "model/kv/kv_quant.h"

namespace kvscope {

namespace {

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// Brings values into ranges and writes what it changed.
class Fitter {
 public:
  explicit Fitter(const FitContext& ctx) : ctx_(ctx) {}

  // A number outside [lo, hi] goes to the nearest bound; a non-finite one to `fallback`.
  void range(float& v, float lo, float hi, const char* field, float fallback) {
    const float was = v;
    v = std::isfinite(v) ? std::clamp(v, lo, hi) : fallback;
    if (v != was || !std::isfinite(was))
      note(std::string(field) + " " + num(was) + " is outside " + num(lo) + ".." + num(hi) + "; using " + num(v));
  }
  // `why` (optional) says where the bounds come from, e.g. the model's context.
  void range(int& v, int lo, int hi, const char* field, const std::string& why = "") {
    const int was = v;
    v = std::clamp(v, lo, hi);
    if (v != was)
      note(std::string(field) + " " + std::to_string(was) + " is outside " + std::to_string(lo) + ".." +
           std::to_string(hi) + why + "; using " + std::to_string(v));
  }
  // An index into something the model has `count` of; -1 (the mean) always fits.
  void model_index(int& v, int count, const char* what) {
    if (v >= -1 && v < count) return;
    note(std::string(what) + " " + std::to_string(v) + " is not in " + model_name() + " (" + std::to_string(count) +
         " " + what + "s, 0.." + std::to_string(count - 1) + "); showing the mean over " + what + "s");
    v = -1;
  }
  void text(std::string& s, const char* field) {
    if (s.size() <= ui_range::kTextMax) return;
    note(std::string(field) + " is " + std::to_string(s.size()) + " bytes long (at most " +
         std::to_string(ui_range::kTextMax) + "); cut to that length");
    s.resize(ui_range::kTextMax);
  }
  void note(const std::string& what) { notes_.push_back(ctx_.origin.empty() ? what : ctx_.origin + ": " + what); }
  std::string model_name() const { return ctx_.model->name.empty() ? "the loaded model" : ctx_.model->name; }
  const Config* config() const { return ctx_.model ? &ctx_.model->config : nullptr; }
  std::vector<std::string> take() { return std::move(notes_); }

 private:
  const FitContext& ctx_;
  std::vector<std::string> notes_;
};

void fit_sampler(SamplerSettings& s, Fitter& f) {
  const SamplerSettings d;
  f.range(s.temperature, ui_range::kTemperatureMin, ui_range::kTemperatureMax, "temperature", d.temperature);
  f.range(s.top_p, ui_range::kTopPMin, ui_range::kTopPMax, "top-p", d.top_p);
  f.range(s.repetition_penalty, ui_range::kPenaltyMin, ui_range::kPenaltyMax, "repetition penalty",
          d.repetition_penalty);
  const Config* c = f.config();
  f.range(s.top_k, 0, c ? c->vocab_size : ui_range::kTopKMax, "top-k");
}

// Eviction by score: a budget of 1..the context per layer with a rule, none
// without one, and never beside a window (one eviction rule at a time).
void fit_kv_evict(KVLayout& k, Fitter& f, const KVLayoutLimits& lim, const std::string& within) {
  int ev = static_cast<int>(k.evict);
  f.range(ev, 0, static_cast<int>(KVEvict::kSnapKV), "kv_layout.evict");
  k.evict = static_cast<KVEvict>(ev);
  if (k.evict != KVEvict::kSnapKV) {
    f.range(k.snap_window, 0, 0, "kv_layout.snap_window", " (a SnapKV setting)");
    f.range(k.snap_pool, 0, 0, "kv_layout.snap_pool", " (a SnapKV setting)");
  }
  if (k.evict == KVEvict::kNone) {
    f.range(k.budget, 0, 0, "kv_layout.budget", " (a budget needs an eviction rule)");
    return;
  }
  if (k.window > 0 || k.sinks > 0) {
    f.note(std::string("kv_layout.evict ") + to_string(k.evict) +
           " with a sliding window: one eviction rule at a time; using the window alone");
    k.evict = KVEvict::kNone;
    k.budget = 0;
    return;
  }
  if (const Config* c = f.config(); c && c->sliding_window > 0) {
    f.note(std::string("kv_layout.evict ") + to_string(k.evict) + ": " + f.model_name() +
           " has its own sliding window of " + std::to_string(c->sliding_window) +
           " positions; one eviction rule at a time; using the model's window alone");
    k.evict = KVEvict::kNone;
    k.budget = 0;
    return;
  }
  f.range(k.budget, k.evict == KVEvict::kSnapKV ? 2 : 1, std::max(2, lim.window_max), "kv_layout.budget", within);
  if (k.evict != KVEvict::kSnapKV) return;
  // SnapKV: a window below the budget (0 = the default) and an odd kernel (0 = the default).
  f.range(k.snap_window, 0, k.budget - 1, "kv_layout.snap_window", " (W < the budget; 0 = the default)");
  f.range(k.snap_pool, 0, 63, "kv_layout.snap_pool");
  if (k.snap_pool % 2 == 0 && k.snap_pool != 0) {
    f.note("kv_layout.snap_pool " + std::to_string(k.snap_pool) + " is even (expected an odd kernel); using " +
           std::to_string(kSnapPoolDefault));
    k.snap_pool = 0;
  }
}

// The cache layout (settings.json's kv_layout): its own ranges, then the
// model's, field by field, each change named with what is used instead:
// block formats need K/V rows of whole 32-value blocks (else f16, which any
// row width can store), the window, its sinks and a page fit the context.
void fit_kv_layout(KVLayout& k, Fitter& f) {
  int dt = static_cast<int>(k.dtype);
  f.range(dt, 0, static_cast<int>(KVDtype::kQ4_0), "kv_layout.dtype");
  k.dtype = static_cast<KVDtype>(dt);
  const Config* c = f.config();
  const KVLayoutLimits lim = kv_layout_limits(k, c);
  const std::string within =
      c ? " (" + f.model_name() + "'s context is " + std::to_string(c->n_positions) + " positions)" : "";
  f.range(k.window, 0, lim.window_max, "kv_layout.window", within);
  f.range(
      k.sinks, 0, lim.sinks_max, "kv_layout.sinks",
      k.window > 0 ? " (sinks < the window of " + std::to_string(lim.sinks_max + 1) + ")" : " (sinks need a window)");
  f.range(k.block, 0, lim.block_max, "kv_layout.block", within);
  fit_kv_evict(k, f, lim, within);
  if (!c) return;
  const int row = KVLayout::for_model(*c).kv_dim();
  if ((k.dtype == KVDtype::kQ8_0 || k.dtype == KVDtype::kQ4_0) && row % kQuantBlock != 0) {
    f.note(std::string("kv_layout.dtype ") + to_string(k.dtype) + " does not fit " + f.model_name() +
           " (its K/V rows have " + std::to_string(row) + " values, not a multiple of the " +
           std::to_string(kQuantBlock) + "-value block); using f16");
    k.dtype = KVDtype::kF16;
  }
  try {
    (void)k.on_model(*c);  // anything the fields above do not cover
  } catch (const Error& e) {
    f.note(std::string("the KV cache layout does not fit ") + f.model_name() + " (" + e.what() +
           "); using a dense f32 cache");
    k = KVLayout();
  }
}

// Beam search and speculative decoding (the Decoding panel): the CLI's ranges, by the one clamp.
void fit_strategy(Strategy& s, Fitter& f) {
  const Strategy fitted = clamp_strategy(s);
  if (!(fitted == s))
    f.note(std::string(strategy_name(s)) + " with " + strategy_parameters(s) + " is outside the ranges of " +
           strategy_ranges(s) + "; using " + strategy_parameters(fitted));
  s = fitted;
  if (auto* p = std::get_if<strategy::Speculative>(&s)) f.text(p->draft_dir, "the draft model folder");
}

}  // namespace

std::vector<std::string> fit_window_settings(WindowSettings& w, const FitContext& ctx) {
  Fitter f(ctx);
  using namespace ui_range;
  f.range(w.width, kWindowWMin, kWindowSideMax, "window width");
  f.range(w.height, kWindowHMin, kWindowSideMax, "window height");
  // (-1 centres the window; any other position outside the desktop's range centres it too)
  for (int* v : {&w.x, &w.y}) {
    const char* field = v == &w.x ? "window x" : "window y";
    if (*v < kWindowPosMin || *v > kWindowPosMax) {
      f.note(std::string(field) + " " + std::to_string(*v) + " is outside " + std::to_string(kWindowPosMin) + ".." +
             std::to_string(kWindowPosMax) + "; centring the window");
      w.x = w.y = -1;
    }
  }
  return f.take();
}

std::vector<std::string> fit_camera(SavedCamera& c, const FitContext& ctx) {
  Fitter f(ctx);
  using namespace ui_range;
  const SavedCamera d;
  const char* axes[3] = {"camera.target[0]", "camera.target[1]", "camera.target[2]"};
  for (int i = 0; i < 3; ++i) f.range(c.target[i], -kCamTargetMax, kCamTargetMax, axes[i], d.target[i]);
  f.range(c.distance, kCamDistanceMin, kCamDistanceMax, "camera.distance", d.distance);
  f.range(c.yaw, -kCamYawMax, kCamYawMax, "camera.yaw", d.yaw);
  f.range(c.pitch, -kCamPitchMax, kCamPitchMax, "camera.pitch", d.pitch);
  f.range(c.fov_y, kCamFovMin, kCamFovMax, "camera.fov_y", d.fov_y);
  return f.take();
}

namespace {

// One row of the choices' table (choices.h) into its range, narrowed to the
// loaded model where the row says so; a number that is not finite to its default.
void fit_row(const ChoiceRow& row, UiState& ui, Fitter& f) {
  const Config* c = f.config();
  const UiState defaults;
  std::visit(overloaded{[&](int UiState::*m) {
                          if (c && row.model_limit == ModelLimit::kLayer)
                            return f.model_index(ui.*m, c->n_layer, "layer");
                          if (c && row.model_limit == ModelLimit::kHead) return f.model_index(ui.*m, c->n_head, "head");
                          const int hi =
                              c && row.model_limit == ModelLimit::kContext ? c->n_positions : static_cast<int>(row.hi);
                          f.range(ui.*m, static_cast<int>(row.lo), hi, row.label);
                        },
                        [&](float UiState::*m) {
                          f.range(ui.*m, static_cast<float>(row.lo), static_cast<float>(row.hi), row.label,
                                  defaults.*m);
                        },
                        [](bool UiState::*) {}, [&](std::string UiState::*m) { f.text(ui.*m, row.label); }},
             row.member);
}

}  // namespace

std::vector<std::string> fit_choices(UiState& ui, const FitContext& ctx, int* pending_step) {
  Fitter f(ctx);
  const Config* c = f.config();
  for (const ChoiceRow& row : choice_table()) fit_row(row, ui, f);
  fit_sampler(ui.sampler, f);
  fit_kv_layout(ui.kv_layout, f);
  fit_strategy(ui.strategy, f);
  f.text(ui.draft_dir, "the draft model folder");
  f.range(ui.kv_selected, -1, std::numeric_limits<int>::max(), "KV calculator row");  // (the table checks its rows)
  if (pending_step && *pending_step >= 0) {
    // A step past what this model's context can generate: the last one it can.
    const int last = c ? c->n_positions - 1 : (1 << 24);
    if (*pending_step > last) {
      f.note("step " + std::to_string(*pending_step) + " is past " + (c ? f.model_name() : std::string("the limit")) +
             "'s context (" + std::to_string(last + 1) + " positions); showing step " + std::to_string(last));
      *pending_step = last;
    }
  }
  return f.take();
}

namespace {

// Open lessons that leave the picture under the view short: beside the view
// where it keeps half the width beside two folded sidebars, else folded (or
// the right sidebar, for lessons just opened).
void fit_lessons(const PanelRoom& r, PanelsOpen& open, bool lessons_kept, float picture_under,
                 std::vector<std::string>& folded) {
  open.lessons_side = false;
  if (!open.lessons || picture_under >= kMinPictureShare * r.H) return;
  const float compact = r.compact > 0 ? r.compact : r.strip;
  if (r.column > 0 && compact < r.lessons && r.W - r.column - 2 * r.folded >= kMinViewWidthShare * r.W) {
    open.lessons_side = true;
  } else if (!lessons_kept && r.strip < r.lessons) {
    open.lessons = false;
    folded.push_back("the lessons");
  } else if (lessons_kept && open.right && r.view_text > 0) {
    open.right = false;
    folded.push_back("the right sidebar");
  }
}

std::string folded_note(const std::vector<std::string>& folded) {
  if (folded.empty()) return "";
  std::string note = "folded ";
  for (size_t i = 0; i < folded.size(); ++i) note += (i ? " and " : "") + folded[i];
  return note + " so the 3D view keeps its room at this window size and text scale (their buttons reopen them)";
}

constexpr const char* kHistoryFolded = "the history line (the step counter's tooltip shows it)";

}  // namespace

std::string fit_panels(const PanelRoom& r, PanelsOpen& open, bool lessons_kept) {
  auto strip = [&] {
    if (open.lessons) return open.lessons_side ? (r.compact > 0 ? r.compact : r.strip) : r.lessons;
    return open.full_strip ? r.strip : r.compact;
  };
  auto picture = [&] { return r.H - strip() - r.view_text; };
  auto side = [&](bool me, bool other) { return !me ? r.folded : other || r.alone <= 0 ? r.sidebar : r.alone; };
  auto width = [&] {
    return r.W - side(open.left, open.right) - side(open.right, open.left) - (open.lessons_side ? r.column : 0.0f);
  };
  std::vector<std::string> folded;
  fit_lessons(r, open, lessons_kept, picture(), folded);
  if (!open.lessons && open.full_strip && r.compact > 0 && r.compact < r.strip &&
      picture() < kRoomyPictureShare * r.H) {
    open.full_strip = false;
    folded.push_back(kHistoryFolded);
  }
  while (width() < kMinViewWidthShare * r.W && (open.left || open.right) && r.folded < r.sidebar) {
    bool& s = open.right ? open.right : open.left;
    folded.push_back(&s == &open.right ? "the right sidebar" : "the left sidebar");
    s = false;
  }
  return folded_note(folded);
}

FitFolded track_fit_folded(FitFolded was, const PanelsOpen& before, const PanelsOpen& after) {
  auto track = [](bool was_folded, bool open_before, bool open_after) {
    return !open_after && (was_folded || open_before);
  };
  was.left = track(was.left, before.left, after.left);
  was.right = track(was.right, before.right, after.right);
  was.lessons = track(was.lessons, before.lessons, after.lessons);
  was.history = track(was.history, before.full_strip, after.full_strip);
  return was;
}

std::string fit_lessons_closed(const PanelRoom& r, PanelsOpen& open, const FitFolded& folded) {
  open.left = open.left || folded.left;
  open.right = open.right || folded.right;
  return fit_panels(r, open, false);
}

std::string fit_folded_note(const FitFolded& f) {
  std::vector<std::string> folded;
  if (f.lessons) folded.push_back("the lessons");
  if (f.history) folded.push_back(kHistoryFolded);
  if (f.right) folded.push_back("the right sidebar");
  if (f.left) folded.push_back("the left sidebar");
  return folded_note(folded);
}

std::vector<int> fit_row(const std::vector<std::vector<float>>& widths, float spacing, float avail,
                         const std::vector<int>& shorten_order) {
  std::vector<int> pick(widths.size(), 0);
  auto total = [&] {
    float t = 0;
    for (size_t i = 0; i < widths.size(); ++i)
      if (!widths[i].empty()) t += widths[i][static_cast<size_t>(pick[i])] + (i > 0 ? spacing : 0.0f);
    return t;
  };
  for (int i : shorten_order) {
    if (i < 0 || static_cast<size_t>(i) >= widths.size()) continue;
    const int last = static_cast<int>(widths[static_cast<size_t>(i)].size()) - 1;
    while (total() > avail && pick[static_cast<size_t>(i)] < last) ++pick[static_cast<size_t>(i)];
  }
  return pick;
}

bool buttons_fit_side_by_side(const std::vector<float>& widths, float spacing, float avail) {
  if (widths.empty()) return true;
  const float share = (avail - spacing * static_cast<float>(widths.size() - 1)) / static_cast<float>(widths.size());
  return std::all_of(widths.begin(), widths.end(), [&](float w) { return w <= share; });
}

TabLabels fit_tabs(const std::vector<float>& full, const std::vector<float>& brief, float spacing, float avail) {
  auto fits = [&](const std::vector<float>& w) {
    float total = 0;
    for (size_t i = 0; i < w.size(); ++i) total += w[i] + (i > 0 ? spacing : 0.0f);
    return total <= avail;
  };
  return fits(full) ? TabLabels::kFull : fits(brief) ? TabLabels::kBrief : TabLabels::kMenu;
}

HudCardFit fit_hud_card(const HudCardSize& full, float W, float max_h) {
  HudCardFit f;
  f.w = std::min(kHudCardShare * W, std::max(full.rows_w, full.title_w));
  f.rows_k = std::min(1.0f, f.w / std::max(1.0f, full.rows_w));
  f.title_k = std::min(1.0f, f.w / std::max(1.0f, full.title_w));
  const float h = full.title_h * f.title_k + full.rows_h * f.rows_k;
  if (h > max_h && h > 0) {
    const float k = std::max(0.0f, max_h) / h;
    f.rows_k *= k;
    f.title_k *= k;
    f.w = std::min(f.w, std::max(full.rows_w * f.rows_k, full.title_w * f.title_k));
  }
  return f;
}

CandidateRows fit_candidate_rows(float widest_name, float widest_tag, float gap, float avail, float min_bar) {
  CandidateRows r;
  r.name_w = widest_name;
  r.bar_x = widest_name + gap;
  r.bar_w = avail - r.bar_x - gap - widest_tag;
  if (r.bar_w >= min_bar) return r;
  r.stacked = true;
  r.name_w = std::max(0.0f, avail - gap - widest_tag);
  r.bar_x = 0;
  r.bar_w = std::max(0.0f, avail);
  return r;
}

std::vector<size_t> wrap_words(const std::vector<float>& widths, float space, float avail) {
  std::vector<size_t> starts;
  float line = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (starts.empty() || line + space + widths[i] > avail) {
      starts.push_back(i);
      line = widths[i];
    } else {
      line += space + widths[i];
    }
  }
  return starts;
}

bool columns_fit(const std::vector<std::vector<float>>& cells, float pad, float avail) {
  std::vector<float> col;
  for (const std::vector<float>& row : cells) {
    if (row.size() > col.size()) col.resize(row.size(), 0.0f);
    for (size_t c = 0; c < row.size(); ++c) col[c] = std::max(col[c], row[c]);
  }
  float total = 0;
  for (float w : col) total += w + pad;
  return total <= avail;
}

}  // namespace kvscope
