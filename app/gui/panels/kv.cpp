// The KV cache's layout in the window: what a KV block's tooltip says about
// eviction, sinks, pages and the stored row's quantization error. Every
// number comes from the step records (their StepCache: kv_held, pages, kv_qerr).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/gui/panels/panels.h"
#include "app/worker/kv_scoring.h"
#include "model/core/units.h"
#include "render/scene/scene_format.h"
#include "render/scene/scene_kv.h"

namespace kvscope {

namespace {

// Eviction by score: why layer `layer` dropped `pos` (a hole), or the score
// it holds it by (a block): the numbers the rule ranked, from the records.
void evict_tooltip(const SequenceState& seq, const StepRecord& r, int pos, int layer, KvState state) {
  const KVLayout& lay = r.kv_layout;
  const bool tova = lay.evict == KVEvict::kTova;
  const bool snap = lay.per_head();
  const char* rule = evict_name(lay.evict);
  const char* what = tova   ? "the last query's attention weight (mean over heads)"
                     : snap ? "the prompt window's attention, pooled, mean over a K/V head's query heads (best head)"
                            : "attention accumulated over every query so far (mean over heads)";
  if (state == KvState::kEvicting || state == KvState::kEvicted) {
    const int at = seq.dropped_at_step(pos, layer);
    const double score = seq.dropped_with_score(pos, layer);
    ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.5f, 1.0f), "dropped by %s from layer %d", rule, layer);
    if (at >= 0) ImGui::Text("at step %d%s", at, at == 0 ? " (the prefill)" : "");
    if (score >= 0) ImGui::Text("with score %.4f: %s", score, what);
    if (snap) {
      text_wrapped_wordsf(
          "After the prefill each K/V head of layer %d kept its %d best-scored prompt positions and "
          "the window; no head of the layer kept this one.",
          layer, lay.budget - lay.snap_window);
    } else {
      text_wrapped_wordsf(tova
                              ? "Layer %d keeps the %d keys its last query weighted most; this one ranked lower. Other "
                                "layers decide for themselves."
                              : "Layer %d keeps its newest %d/2 keys and the heaviest of the rest; this one was older "
                                "and lighter. Other layers decide for themselves.",
                          layer, lay.budget);
    }
    ImGui::TextDisabled("Its K/V rows are gone from this layer: a later query here cannot see it.");
    return;
  }
  double score = 0;
  if (r.mode != CacheMode::kKV || !held_score(r, pos, layer, &score)) return;
  ImGui::Text("held by layer %d under %s (budget %d): score %.4f", layer, rule, lay.budget, score);
  ImGui::TextDisabled("score = %s; the block's colour and bar show it against the layer's highest (%.4f)", what,
                      max_held_score(r, layer));
  if (tova) ImGui::TextDisabled("(the rays of layer %d show the same weights: choose layer %d)", layer, layer);
}

}  // namespace

void kv_layout_tooltip(const SequenceState& seq, int pos, int layer, KvState state) {
  const StepRecord* r = seq.current.get();
  if (!r || pos < 0 || pos >= r->seq_len) return;
  const KVLayout& lay = r->kv_layout;
  if (lay.evicting() && layer >= 0) {
    evict_tooltip(seq, *r, pos, layer, state);
    if (state == KvState::kEvicting || state == KvState::kEvicted) return;
  }
  if (state == KvState::kEvicting || state == KvState::kEvicted) {
    const int at = static_cast<size_t>(pos) < seq.evicted_at.size() ? seq.evicted_at[static_cast<size_t>(pos)] : -1;
    ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.5f, 1.0f), "evicted by the sliding window");
    if (at >= 0) ImGui::Text("at step %d: its bytes were freed", at);
    text_wrapped_wordsf("No later query can see it: a query at i reads [i-%d, i] plus the first %d position%s.",
                        lay.window - 1, lay.sinks, lay.sinks == 1 ? "" : "s");
    return;
  }
  if (r->mode != CacheMode::kKV || state == KvState::kEmpty) return;
  if (lay.windowed() && pos < lay.sinks)
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "sink position: kept for every later query");
  int page = -1, refs = 0;
  if (page_of(*r, pos, &page, &refs)) {
    ImGui::Text("page %d, slot %d of %d%s", page, pos % lay.block, lay.block,
                refs > 1 ? (" \xC2\xB7 shared by " + std::to_string(refs) + " sequences").c_str() : "");
  }
  const int d = lay.kv_dim();
  ImGui::Text("stored as %s: %s per K or V row", to_string(lay.dtype), format_bytes(lay.row_bytes()).c_str());
  const float* e = seq.quant_error(pos, layer);
  if (!e || d <= 0) return;
  // Relative to the row's rms value, |x| / sqrt(d).
  const float kn = seq.knorm(pos, layer), vn = seq.vnorm(pos, layer);
  const double sd = std::sqrt(static_cast<double>(d));
  auto rel = [&](float rms, float norm) { return norm > 0 ? 100.0 * rms / (norm / sd) : 0.0; };
  ImGui::Text("quantization error (stored - computed):");
  ImGui::Text("  K: max |d| %.4f  rms %.4f  (%.2f%% of rms K)", e[0], e[1], rel(e[1], kn));
  ImGui::Text("  V: max |d| %.4f  rms %.4f  (%.2f%% of rms V)", e[2], e[3], rel(e[3], vn));
}

namespace {

// A short name for a layout in the plot's legend.
std::string layout_name(const KVLayout& l) {
  std::string s = to_string(l.dtype);
  if (l.windowed()) s += " W=" + std::to_string(l.window) + (l.sinks ? " +" + std::to_string(l.sinks) + " sinks" : "");
  if (l.evicting()) s += std::string(" ") + evict_name(l.evict) + " N=" + std::to_string(l.budget);
  if (l.paged()) s += " paged";
  if (l.is_default()) s += " dense";
  return s;
}

glm::vec3 curve_colour(size_t i, const KVLayout& l, const Palette& pal) {
  if (i == 0) return glm::vec3(0.72f, 0.74f, 0.80f);  // dense f32
  if (l.windowed()) return l.sinks > 0 ? pal.sink : pal.evicted;
  if (l.evicting()) return l.evict == KVEvict::kTova ? pal.ray : pal.new_kv;
  return pal.cache_high;
}

// Running mean of `v` over `k` positions ending at each one (per-token loss is noisy).
std::vector<double> running_mean(const std::vector<double>& v, size_t k) {
  std::vector<double> out(v.size());
  double sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    if (i >= k) sum -= v[i - k];
    out[i] = sum / static_cast<double>(std::min(i + 1, k));
  }
  return out;
}

// Mean of v[from..]: where a window of W has evicted something, from = W.
double mean_from(const std::vector<double>& v, size_t from) {
  double s = 0;
  for (size_t i = from; i < v.size(); ++i) s += v[i];
  return v.size() > from ? s / static_cast<double>(v.size() - from) : 0.0;
}

void draw_loss_curves(const LayoutScoreResult& res, float height, const Palette& pal) {
  constexpr size_t kSmooth = 8;
  const float w = ImGui::GetContentRegionAvail().x;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##losscurves", ImVec2(w, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p1(p0.x + w, p0.y + height);
  dl->AddRectFilled(p0, p1, IM_COL32(10, 12, 20, 255), 3.0f);
  dl->AddRect(p0, p1, IM_COL32(60, 68, 90, 255), 3.0f);
  const size_t n = res.scores[0].nll.size();
  std::vector<std::vector<double>> curves;
  double ymax = 0.5;
  for (const LayoutScores& sc : res.scores) {
    curves.push_back(running_mean(sc.nll, kSmooth));
    for (double v : curves.back()) ymax = std::max(ymax, v);
  }
  const float pad = 4.0f;
  auto pt = [&](size_t i, double v) {
    const float x = p0.x + pad + (n > 1 ? (w - 2 * pad) * static_cast<float>(i) / static_cast<float>(n - 1) : 0.0f);
    return ImVec2(x, p1.y - pad - (height - 2 * pad) * static_cast<float>(v / ymax));
  };
  const KVLayout& run = res.request.layouts.back();
  const int edge = run.windowed() ? run.window : run.evicting() ? run.budget : 0;
  if (edge > 0 && static_cast<size_t>(edge) < n) {  // from here on the window (or the rule) evicts
    const float x = pt(static_cast<size_t>(edge), 0).x;
    dl->AddLine(ImVec2(x, p0.y + 2), ImVec2(x, p1.y - 2), IM_COL32(200, 200, 220, 110), 1.0f);
    dl->AddText(ImVec2(x + 3, p1.y - ImGui::GetTextLineHeight() - 2), IM_COL32(170, 175, 195, 255),
                run.windowed() ? "W" : "N");
  }
  for (size_t c = 0; c < curves.size(); ++c) {
    std::vector<ImVec2> pts;
    for (size_t i = 0; i < n; ++i) pts.push_back(pt(i, curves[c][i]));
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()),
                    to_imcolor(curve_colour(c, res.request.layouts[c], pal), 0.95f), 0, c == 0 ? 2.5f : 1.8f);
  }
  char top[32];
  std::snprintf(top, sizeof(top), "%.1f nats", ymax);
  dl->AddText(ImVec2(p0.x + 6, p0.y + 3), IM_COL32(150, 160, 185, 255), top);
}

}  // namespace

void kv_loss_plot(const EngineState& engine, const Palette& pal, Commands& cmds) {
  const StepRecord* r = engine.seq.current.get();
  if (!engine.model || !r) return;
  const ImGuiTreeNodeFlags open =
      r->kv_layout.windowed() || r->kv_layout.evicting() ? ImGuiTreeNodeFlags_DefaultOpen : 0;
  if (!ImGui::CollapsingHeader(header_label("Loss per position vs dense f32", "Loss vs f32").c_str(), open)) return;
  const LayoutScoreResult* res = engine.kv_scores.get();
  const bool fresh = res && res->request.at == engine.seq.current && res->request.model == engine.model;
  const bool busy = engine.kv_scoring;
  ImGui::TextWrapped(
      "Every position of the text on screen scored by the real model under each layout "
      "(-log p of the next token, running mean over 8).");
  ImGui::BeginDisabled(busy || fresh || engine.seq.tokens.size() < 2);
  if (ImGui::Button(busy ? "scoring on a background thread\xE2\x80\xA6" : "Score this text"))
    cmds.push_back(cmd::ScoreKvLayouts{});
  ImGui::EndDisabled();
  if (!res) return;
  if (!res->error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.5f, 0.4f, 1), "could not score: %s", res->error.c_str());
    return;
  }
  if (!fresh) ImGui::TextDisabled("(for an earlier text or layout: score again)");
  if (res->scores.empty() || res->scores[0].nll.size() < 2) return;
  if (engine.seq.n_prompt + 1 < static_cast<int>(res->request.tokens.size()) && r->kv_layout != res->request.layouts[0])
    text_wrapped_wordsf(
        "The generated part of this text was chosen under %s, so it favours that layout; a long prompt "
        "of your own (Custom) compares the layouts on text none of them chose.",
        layout_name(r->kv_layout).c_str());
  draw_loss_curves(*res, ImGui::GetTextLineHeight() * 6.0f, pal);
  const KVLayout& run = res->request.layouts.back();
  // Before W (or the budget N) positions every layout holds everything: the means start there.
  const int edge = run.windowed() ? run.window : run.evicting() ? run.budget : 0;
  const size_t from = static_cast<size_t>(std::max(0, edge));
  const char* edge_name = run.windowed() ? "W" : "N";
  for (size_t i = 0; i < res->scores.size(); ++i) {
    const LayoutScores& sc = res->scores[i];
    ImGui::TextColored(v4(curve_colour(i, res->request.layouts[i], pal)), "\xE2\x94\x81 %s",
                       layout_name(res->request.layouts[i]).c_str());
    ImGui::SameLine();
    if (sc.nll.size() <= from) {
      ImGui::TextDisabled("(text shorter than %s)", edge_name);
      continue;
    }
    ImGui::Text("NLL %.3f%s%s", mean_from(sc.nll, from), from ? " after " : "", from ? edge_name : "");
    if (i == 0 || sc.kl.empty()) continue;
    double agree = 0;
    for (size_t k = from; k < sc.top1_agree.size(); ++k) agree += sc.top1_agree[k];
    ImGui::TextDisabled("   KL %.3f \xC2\xB7 top-1 same %.0f%%", mean_from(sc.kl, from),
                        100.0 * agree / static_cast<double>(sc.top1_agree.size() - from));
  }
}

}  // namespace kvscope
