// The Cache & compute panel: the KV CACHE / NO CACHE switch, the counters of
// what the engine ran, the cache's memory layout and the FLOP plots against
// the other mode's cost from the formula.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/gui/panels/panels.h"
#include "app/session/fitting.h"
#include "model/core/units.h"
#include "model/engine/engine.h"
#include "render/scene/scene_format.h"

namespace kvscope {
namespace {

// A polyline in the plot, solid or dashed (on/off in pixels).
void polyline(ImDrawList* dl, const std::vector<ImVec2>& pts, ImU32 col, float thickness, bool dashed) {
  if (pts.size() < 2) return;
  if (!dashed) {
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), col, 0, thickness);
    return;
  }
  const float on = 7.0f, off = 5.0f;
  float phase = 0.0f;  // distance into the current on+off period
  for (size_t i = 1; i < pts.size(); ++i) {
    ImVec2 a = pts[i - 1];
    const ImVec2 b = pts[i];
    float len = std::hypot(b.x - a.x, b.y - a.y);
    const ImVec2 dir = len > 0 ? ImVec2((b.x - a.x) / len, (b.y - a.y) / len) : ImVec2(0, 0);
    while (len > 0) {
      const bool drawing = phase < on;
      const float left = drawing ? on - phase : on + off - phase;
      const float step = std::min(left, len);
      const ImVec2 c(a.x + dir.x * step, a.y + dir.y * step);
      if (drawing) dl->AddLine(a, c, col, thickness);
      a = c;
      len -= step;
      phase += step;
      if (phase >= on + off) phase = 0;
    }
  }
}

// FLOPs over the steps: the real counters (solid, coloured by the mode each
// step ran in) and the other mode's cost from the formula (dashed).
void flop_plot(const char* id, const char* title, const std::vector<double>& actual,
               const std::vector<CacheMode>& modes, const std::vector<double>& other, CacheMode other_mode,
               float height, int marker, const Palette& pal) {
  ImGui::TextUnformatted(title);
  const float w = ImGui::GetContentRegionAvail().x;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(w, height));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p1(p0.x + w, p0.y + height);
  dl->AddRectFilled(p0, p1, IM_COL32(10, 12, 20, 255), 3.0f);
  dl->AddRect(p0, p1, IM_COL32(60, 68, 90, 255), 3.0f);
  const size_t n = actual.size();
  if (n == 0) return;
  double ymax = 1;
  for (double v : actual) ymax = std::max(ymax, v);
  for (double v : other) ymax = std::max(ymax, v);
  const float pad = 4.0f;
  auto pt = [&](size_t i, double v) {
    const float x = p0.x + pad + (n > 1 ? (w - 2 * pad) * static_cast<float>(i) / static_cast<float>(n - 1) : 0.0f);
    const float y = p1.y - pad - (height - 2 * pad) * static_cast<float>(v / ymax);
    return ImVec2(x, y);
  };
  // Dashed: the other mode, computed.
  std::vector<ImVec2> pts;
  for (size_t i = 0; i < other.size(); ++i) pts.push_back(pt(i, other[i]));
  const glm::vec3 oc = other_mode == CacheMode::kKV ? pal.cache_high : pal.recomputed;
  polyline(dl, pts, to_imcolor(oc, 0.9f), 2.0f, true);
  // Solid: what ran, one segment per step in that step's colour.
  for (size_t i = 1; i < n; ++i) {
    const glm::vec3 c = modes[i] == CacheMode::kKV ? pal.cache_high : pal.recomputed;
    dl->AddLine(pt(i - 1, actual[i - 1]), pt(i, actual[i]), to_imcolor(c), 2.5f);
  }
  if (n == 1) dl->AddCircleFilled(pt(0, actual[0]), 3.0f, to_imcolor(pal.cache_high));
  // The timeline's step.
  if (marker >= 0 && static_cast<size_t>(marker) < n) {
    const ImVec2 m = pt(static_cast<size_t>(marker), actual[static_cast<size_t>(marker)]);
    dl->AddLine(ImVec2(m.x, p0.y + 2), ImVec2(m.x, p1.y - 2), IM_COL32(255, 240, 120, 150), 1.0f);
    dl->AddCircleFilled(m, 4.0f, IM_COL32(255, 240, 120, 255));
  }
  const std::string top = format_flops(static_cast<uint64_t>(ymax));
  dl->AddText(ImVec2(p0.x + 6, p0.y + 3), IM_COL32(150, 160, 185, 255), top.c_str());
  if (hovered) {
    const float fx = (ImGui::GetIO().MousePos.x - p0.x - pad) / std::max(1.0f, w - 2 * pad);
    const size_t i = std::min(n - 1, static_cast<size_t>(std::max(0.0f, std::round(fx * static_cast<float>(n - 1)))));
    ImGui::BeginTooltip();
    ImGui::Text("step %zu (%s)", i, modes[i] == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
    ImGui::Text("ran:      %s", format_flops(static_cast<uint64_t>(actual[i])).c_str());
    if (i < other.size())
      ImGui::Text("%s (computed): %s", other_mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE",
                  format_flops(static_cast<uint64_t>(other[i])).c_str());
    ImGui::EndTooltip();
  }
}

// SnapKV's budget (N >= 2), observation window (1..N-1, 0 = the default),
// pooling kernel (odd) and pooling.
void snap_controls(KVLayout& k, int budget_hi) {
  ImGui::SliderInt("##budget", &k.budget, 2, std::max(2, budget_hi), "keeps N %d per K/V head",
                   ImGuiSliderFlags_AlwaysClamp);
  if (k.snap_window >= k.budget) k.snap_window = 0;
  const int w_default = snap_default_window(k.budget);
  ImGui::SliderInt("##snap_window", &k.snap_window, 0, k.budget - 1,
                   k.snap_window == 0 ? ("window W: default " + std::to_string(w_default)).c_str() : "window W %d",
                   ImGuiSliderFlags_AlwaysClamp);
  int pool = k.snap_pool == 0 ? kSnapPoolDefault : k.snap_pool;
  if (ImGui::SliderInt("##snap_pool", &pool, 1, 31, "pooling kernel K %d", ImGuiSliderFlags_AlwaysClamp))
    k.snap_pool = pool % 2 ? pool : pool + 1;  // odd: centred on the position
  int pooling = static_cast<int>(k.snap_pooling);
  static const char* const kPooling[] = {"max pooling", "average pooling"};
  if (ImGui::Combo("##snap_pooling", &pooling, kPooling, 2)) k.snap_pooling = static_cast<KVPooling>(pooling);
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        "SnapKV: after the prefill each K/V head keeps the N - W prompt positions the last W prompt "
                        "queries of its query heads weighted most (pooled over K neighbours), and the window; "
                        "decoding then evicts nothing");
}

// Eviction by attention score: off, TOVA or H2O, and the positions each
// layer keeps (instead of a window: choosing one turns the window off). A
// model with its own sliding window (Mistral's) already evicts by position:
// one rule at a time, so the choice is off there.
void evict_controls(KVLayout& k, int budget_hi, int model_window) {
  static const char* const kRules[] = {"off", "TOVA", "H2O", "SnapKV"};
  int rule = static_cast<int>(k.evict);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("evict by score");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  ImGui::BeginDisabled(model_window > 0);
  if (ImGui::Combo("##evict", &rule, kRules, 4)) {
    k.evict = static_cast<KVEvict>(rule);
    k.budget = k.evict == KVEvict::kNone ? 0 : (k.budget > 0 ? k.budget : std::min(kEvictBudgetStart, budget_hi));
    if (k.evict != KVEvict::kNone) k.window = k.sinks = 0;
    if (k.evict != KVEvict::kSnapKV) k.snap_window = k.snap_pool = 0;
  }
  ImGui::EndDisabled();
  if (model_window > 0)
    text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                          "off: this model slides its own window of " + std::to_string(model_window) +
                              " positions (one eviction rule at a time)");
  if (k.evict == KVEvict::kNone) return;
  if (k.evict == KVEvict::kSnapKV) return snap_controls(k, budget_hi);
  ImGui::SliderInt("##budget", &k.budget, 1, budget_hi, "keeps N %d per layer", ImGuiSliderFlags_AlwaysClamp);
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        k.evict == KVEvict::kTova
                            ? "TOVA: each layer keeps the N keys its last query weighted most"
                            : "H2O: each layer keeps its N/2 newest keys and the heaviest by accumulated attention");
}

// The cache's layout (dtype, window + sinks, pages) for the next generation,
// and what the current one holds, against a dense f32 cache of the same positions.
void kv_layout_section(const EngineState& engine, UiState& ui) {
  // Open from the start when the settings chose a layout other than dense f32.
  KVLayout& k = ui.kv_layout;
  if (!ImGui::CollapsingHeader(header_label("KV memory layout", "KV layout").c_str(),
                               k.is_default() ? 0 : ImGuiTreeNodeFlags_DefaultOpen))
    return;
  static const char* const kDtypes[] = {"f32", "f16", "q8_0", "q4_0"};
  int dt = static_cast<int>(k.dtype);
  // Labels before or inside the controls, so a narrow sidebar or a large text scale never clips them.
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("row format");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::Combo("##row_format", &dt, kDtypes, 4)) k.dtype = static_cast<KVDtype>(dt);
  // The controls reach only what the loaded model's context (--ctx) holds;
  // without a model, sizes a classroom model has.
  const Config* c = engine.model ? &engine.model->config : nullptr;
  const KVLayoutLimits lim = kv_layout_limits(k, c);
  const int window_hi = c ? lim.window_max : 1024, block_hi = std::min(lim.block_max, 256);
  const ImGuiSliderFlags clamp = ImGuiSliderFlags_AlwaysClamp;  // typed values (Ctrl+click) too
  bool win = k.window > 0;
  if (ImGui::Checkbox("sliding window", &win)) {
    k.window = win ? std::min(64, window_hi) : 0;
    if (win) k.evict = KVEvict::kNone, k.budget = 0;  // one eviction rule at a time
  }
  ImGui::PushItemWidth(-1);
  if (win) {
    ImGui::SliderInt("##window", &k.window, 1, window_hi, "window W %d", clamp);
    const int sinks_hi = kv_layout_limits(k, c).sinks_max;  // for the window just chosen
    ImGui::SliderInt("##sinks", &k.sinks, 0, sinks_hi, "sinks S %d", clamp);
    k.sinks = std::min(k.sinks, sinks_hi);
  } else {
    k.sinks = 0;
  }
  evict_controls(k, window_hi, c ? c->sliding_window : 0);
  bool paged = k.block > 0;
  if (ImGui::Checkbox("paged", &paged)) k.block = paged ? std::min(16, block_hi) : 0;
  if (paged) ImGui::SliderInt("##block", &k.block, 1, block_hi, "block B %d", clamp);
  ImGui::PopItemWidth();
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled), "applies from the next generation (Restart)");
  const StepRecord* r = engine.seq.current.get();
  if (!r || !begin_counters("kvlayout")) return;
  const KVLayout& lay = r->kv_layout;
  counter_row("running", lay.describe());
  counter_row("positions held", std::to_string(r->kv_positions) + " of " + std::to_string(r->seq_len));
  // Every distinct row of every branch the cache holds, shared ones once.
  const uint64_t dense = static_cast<uint64_t>(r->kv_rows) * 2 * static_cast<uint64_t>(lay.n_layer) *
                         kv_row_bytes(KVDtype::kF32, lay.kv_dim());
  if (r->kv_sequences > 1) {
    counter_row("branches in the cache", std::to_string(r->kv_sequences));
    counter_row("as separate caches", format_bytes(r->kv_bytes_separate));
  }
  counter_row(r->kv_sequences > 1 ? "bytes held (shared once)" : "bytes held", format_bytes(r->kv_bytes));
  counter_row("dense f32, same rows", format_bytes(dense));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2fx", dense ? static_cast<double>(r->kv_bytes) / static_cast<double>(dense) : 0.0);
  counter_row("ratio", dense ? buf : "-");
  if (r->evicted) counter_row("evicted this step", std::to_string(r->evicted) + " positions");
  if (lay.paged()) {
    counter_row("pages", std::to_string(r->kv_blocks) + " \xC3\x97 " + std::to_string(lay.block) + " positions");
    counter_row("wasted slots", std::to_string(r->kv_slots_wasted));
  }
  ImGui::EndTable();
}

}  // namespace

std::vector<double> computed_flops(const EngineState& engine, CacheMode mode) {
  std::vector<double> out;
  if (!engine.model) return out;
  const Config& c = engine.model->config;
  for (const RecordPtr& r : engine.records()) {
    const int T = r->seq_len;
    uint64_t f = 0;
    if (r->prefill || mode == CacheMode::kNoCache)
      f = forward_flops(c, T, T);
    else
      f = forward_flops(c, 1, T);
    out.push_back(static_cast<double>(f));
  }
  return out;
}

Commands panel_cache(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  if (!is_sampling(engine.strategy)) {
    // The strategies' own counters; the layout (row format, pages) applies to them too.
    Commands cmds = panel_decode_cache(engine, ui);
    kv_layout_section(engine, ui);
    return cmds;
  }
  Commands cmds;
  const bool kv = engine.mode == CacheMode::kKV;
  const char* label = ui.touch ? (kv ? fitting_label({"KV CACHE  (tap to switch)", "KV CACHE"})
                                     : fitting_label({"NO CACHE  (tap to switch)", "NO CACHE"}))
                      : kv     ? fitting_label({"KV CACHE  (C to switch)", "KV CACHE  (C)", "KV CACHE"})
                               : fitting_label({"NO CACHE  (C to switch)", "NO CACHE  (C)", "NO CACHE"});
  if (big_button(label, kv ? pal.cache_high : pal.recomputed, ImVec2(-1, ImGui::GetFrameHeight() * 1.5f)))
    cmds.push_back(cmd::ToggleCache{});
  hover_help("Switch between the KV cache and recomputing every position (C).");
  ImGui::TextWrapped("%s", kv ? "Each step computes only the new position and reads the cached K/V of all earlier ones."
                              : "Each step recomputes K/V for every position, then throws them away.");
  const StepRecord* r = engine.seq.current.get();
  if (begin_counters("counters")) {
    const ImVec4 cyan = v4(pal.cache_high), red = v4(pal.recomputed);
    counter_row("sequence length", r ? std::to_string(r->seq_len) + " positions" : "-");
    counter_row("FLOPs this step", r ? format_flops(r->flops) : "-");
    counter_row("FLOPs so far", r ? format_flops(r->flops_total) : "-");
    counter_row("KV-cache memory", r ? format_bytes(r->kv_bytes) : "-", r && r->kv_bytes ? &cyan : &red);
    counter_row("recomputed", r ? std::to_string(r->recomputed) + " positions" : "-");
    char buf[64];
    if (r) std::snprintf(buf, sizeof(buf), "%.2f ms", r->ms);
    counter_row("step time", r ? buf : "-");
    // Tokens per second over this branch's decode steps up to the shown one
    // (engine time only): its total less the prefill's.
    const int n = r ? r->index : 0;
    const double ms = n > 0 && !engine.records().empty() ? r->ms_total - engine.records().front()->ms : 0;
    if (n > 0) std::snprintf(buf, sizeof(buf), "%.1f tokens/s", 1000.0 * n / std::max(ms, 1e-6));
    counter_row("engine speed", n > 0 ? buf : "-");
    ImGui::EndTable();
  }
  kv_layout_section(engine, ui);
  kv_loss_plot(engine, pal, cmds);
  std::vector<double> per, cum;
  std::vector<CacheMode> modes;
  for (const RecordPtr& rec : engine.records()) {
    per.push_back(static_cast<double>(rec->flops));
    cum.push_back(static_cast<double>(rec->flops_total));
    modes.push_back(rec->mode);
  }
  const CacheMode other_mode = kv ? CacheMode::kNoCache : CacheMode::kKV;
  std::vector<double> other = computed_flops(engine, other_mode);
  std::vector<double> other_cum(other.size());
  double acc = 0;
  for (size_t i = 0; i < other.size(); ++i) other_cum[i] = acc += other[i];
  const float h = ImGui::GetTextLineHeight() * 5.5f;
  const int marker = engine.seq.current ? engine.seq.current->index : -1;
  flop_plot("##per", "FLOPs per step", per, modes, other, other_mode, h, marker, pal);
  flop_plot("##cum", "FLOPs so far", cum, modes, other_cum, other_mode, h, marker, pal);
  // Legend of the plots.
  // (each entry on the next line where the sidebar has no room left for it)
  ImGui::TextColored(v4(pal.cache_high), "\xE2\x94\x81 KV CACHE");
  same_line_if_fits(ImGui::CalcTextSize("\xE2\x94\x81 NO CACHE").x);
  ImGui::TextColored(v4(pal.recomputed), "\xE2\x94\x81 NO CACHE");
  same_line_if_fits(ImGui::CalcTextSize("(solid: ran)").x);
  ImGui::TextDisabled("(solid: ran)");
  text_wrapped_coloured(
      v4(other_mode == CacheMode::kKV ? pal.cache_high : pal.recomputed),
      std::string("- - ") + (other_mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE") + ", computed from the formula");
  return cmds;
}

}  // namespace kvscope
