#include "panels.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine.h"
#include "scene_format.h"
#include "units.h"

namespace kvscope {

namespace {

const char* stop_text(StopReason r) {
  switch (r) {
    case StopReason::kEos:
      return "stopped: end-of-text token";
    case StopReason::kMaxNew:
      return "stopped: max new tokens reached";
    case StopReason::kContextFull:
      return "stopped: the context is full";
    case StopReason::kStop:
      return "stopped: stop string";
    case StopReason::kNone:
      break;
  }
  return "";
}

// Coloured button that reads as a toggle.
bool big_button(const char* label, const glm::vec3& colour, ImVec2 size) {
  ImGui::PushStyleColor(ImGuiCol_Button, v4(colour * 0.45f));
  ImGui::PushStyleColor(ImGuiCol_ButtonHovered, v4(colour * 0.6f));
  ImGui::PushStyleColor(ImGuiCol_ButtonActive, v4(colour * 0.75f));
  const bool pressed = ImGui::Button(label, size);
  ImGui::PopStyleColor(3);
  return pressed;
}

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
               float height, int marker) {
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
  const glm::vec3 oc = other_mode == CacheMode::kKV ? palette::kCacheHigh : palette::kRecomputed;
  polyline(dl, pts, to_imcolor(oc, 0.9f), 2.0f, true);
  // Solid: what ran, one segment per step in that step's colour.
  for (size_t i = 1; i < n; ++i) {
    const glm::vec3 c = modes[i] == CacheMode::kKV ? palette::kCacheHigh : palette::kRecomputed;
    dl->AddLine(pt(i - 1, actual[i - 1]), pt(i, actual[i]), to_imcolor(c), 2.5f);
  }
  if (n == 1) dl->AddCircleFilled(pt(0, actual[0]), 3.0f, to_imcolor(palette::kCacheHigh));
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

}  // namespace

void counter_row(const char* name, const std::string& value, const ImVec4* colour) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextUnformatted(name);
  ImGui::TableSetColumnIndex(1);
  if (colour)
    ImGui::TextColored(*colour, "%s", value.c_str());
  else
    ImGui::TextUnformatted(value.c_str());
}

std::vector<double> computed_flops(const Snapshot& snap, CacheMode mode) {
  std::vector<double> out;
  if (!snap.model) return out;
  const Config& c = snap.model->config;
  for (const RecordPtr& r : snap.records) {
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

Commands panel_prompt(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  (void)snap;
  // Presets on one row while they fit, wrapping at a narrow width or a large text scale.
  for (int i = 0; i <= kNumPresets; ++i) {
    const char* name = i < kNumPresets ? kPromptPresets[i].name : "Custom";
    const float w = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(name).x;
    if (i > 0 && ImGui::GetContentRegionAvail().x > 0) {
      ImGui::SameLine();
      if (ImGui::GetContentRegionAvail().x < w) ImGui::NewLine();
    }
    ImGui::RadioButton(name, &ui.preset, i);
  }
  if (ui.preset < kNumPresets) {
    ImGui::TextColored(ImVec4(0.75f, 0.8f, 0.95f, 1), "\"%s\"", kPromptPresets[ui.preset].text);
  } else {
    ImGui::InputTextMultiline("##custom", &ui.custom_prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 3.2f));
  }
  const std::string prompt = ui.preset < kNumPresets ? kPromptPresets[ui.preset].text : ui.custom_prompt;
  if (big_button("Generate", palette::kGeneratedToken, ImVec2(ImGui::GetContentRegionAvail().x * 0.5f, 0)))
    cmds.push_back(cmd::Start{prompt});
  ImGui::SameLine();
  if (ImGui::Button("Reset (R)", ImVec2(-1, 0))) cmds.push_back(cmd::Reset{});
  return cmds;
}

Commands panel_playback(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const float half = ImGui::GetContentRegionAvail().x * 0.5f - 4;
  if (big_button(ui.playing ? "Pause (Space)" : "Play (Space)",
                 ui.playing ? glm::vec3(0.8f, 0.7f, 0.3f) : glm::vec3(0.3f, 0.9f, 0.4f), ImVec2(half, 0)))
    cmds.push_back(cmd::PlayPause{});
  ImGui::SameLine();
  if (ImGui::Button("Step (\xE2\x86\x92)", ImVec2(-1, 0))) cmds.push_back(cmd::Step{});
  ImGui::BeginDisabled(ui.fastest);
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##speed", &ui.speed, 0.25f, 8.0f, "%.2f tokens/s", ImGuiSliderFlags_Logarithmic);
  ImGui::EndDisabled();
  ImGui::Checkbox("as fast as possible", &ui.fastest);
  const int ctx = snap.model ? snap.model->config.n_positions : 1024;
  int max_new = ui.max_new > 0 ? ui.max_new : kDefaultMaxNew;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##maxnew", &max_new, 1, std::max(2, ctx), "max new tokens: %d", ImGuiSliderFlags_Logarithmic)) {
    ui.max_new = max_new;
    cmds.push_back(cmd::SetMaxNew{max_new});
  }
  const int n_new = new_tokens(snap);
  if (snap.stop != StopReason::kNone) {
    ImGui::TextColored(ImVec4(1, 0.8f, 0.4f, 1), "%s (%d new)", stop_text(snap.stop), n_new);
  } else if (snap.started) {
    ImGui::Text("%s \xC2\xB7 %d new token%s",
                snap.step_in_flight ? "computing\xE2\x80\xA6" : (ui.playing ? "playing" : "paused"), n_new,
                n_new == 1 ? "" : "s");
  } else if (snap.loading_model) {
    ImGui::TextUnformatted("loading the model\xE2\x80\xA6");
  }
  return cmds;
}

// The cache's layout (dtype, window + sinks, pages) for the next generation,
// and what the current one holds, against a dense f32 cache of the same positions.
static void kv_layout_section(const Snapshot& snap, UiState& ui) {
  // Open from the start when the settings chose a layout other than dense f32.
  KVSettings& k = ui.kv_layout;
  if (!ImGui::CollapsingHeader("KV memory layout", k.is_default() ? 0 : ImGuiTreeNodeFlags_DefaultOpen)) return;
  static const char* const kDtypes[] = {"f32", "f16", "q8_0", "q4_0"};
  int dt = static_cast<int>(k.dtype);
  if (ImGui::Combo("row format", &dt, kDtypes, 4)) k.dtype = static_cast<KVDtype>(dt);
  bool win = k.window > 0;
  if (ImGui::Checkbox("sliding window", &win)) k.window = win ? 64 : 0;
  if (win) {
    ImGui::SliderInt("window W", &k.window, 1, 1024);
    ImGui::SliderInt("sinks S", &k.sinks, 0, std::max(0, k.window - 1));
    k.sinks = std::min(k.sinks, k.window - 1);
  } else {
    k.sinks = 0;
  }
  bool paged = k.block > 0;
  if (ImGui::Checkbox("paged", &paged)) k.block = paged ? 16 : 0;
  if (paged) ImGui::SliderInt("block B", &k.block, 1, 256);
  ImGui::TextDisabled("applies from the next generation (Restart)");
  const StepRecord* r = snap.seq.current.get();
  if (!r || !ImGui::BeginTable("kvlayout", 2, ImGuiTableFlags_SizingStretchProp)) return;
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

Commands panel_cache(const Snapshot& snap, UiState& ui) {
  if (snap.decoding.mode != DecodeMode::kSample) {
    // The strategies' own counters; the layout (row format, pages) applies to them too.
    Commands cmds = panel_decode_cache(snap, ui);
    kv_layout_section(snap, ui);
    return cmds;
  }
  Commands cmds;
  const bool kv = snap.mode == CacheMode::kKV;
  if (big_button(kv ? "KV CACHE  (C to switch)" : "NO CACHE  (C to switch)",
                 kv ? palette::kCacheHigh : palette::kRecomputed, ImVec2(-1, ImGui::GetFrameHeight() * 1.5f)))
    cmds.push_back(cmd::ToggleCache{});
  ImGui::TextWrapped("%s", kv ? "Each step computes only the new position and reads the cached K/V of all earlier ones."
                              : "Each step recomputes K/V for every position, then throws them away.");
  const StepRecord* r = snap.seq.current.get();
  if (ImGui::BeginTable("counters", 2, ImGuiTableFlags_SizingStretchProp)) {
    const ImVec4 cyan = v4(palette::kCacheHigh), red = v4(palette::kRecomputed);
    counter_row("sequence length", r ? std::to_string(r->seq_len) + " positions" : "-");
    counter_row("FLOPs this step", r ? format_flops(r->flops) : "-");
    counter_row("FLOPs so far", r ? format_flops(r->flops_total) : "-");
    counter_row("KV-cache memory", r ? format_bytes(r->kv_bytes) : "-", r && r->kv_bytes ? &cyan : &red);
    counter_row("recomputed", r ? std::to_string(r->recomputed) + " positions" : "-");
    char buf[64];
    if (r) std::snprintf(buf, sizeof(buf), "%.2f ms", r->ms);
    counter_row("step time", r ? buf : "-");
    // Tokens per second over the decode steps so far (engine time only).
    double ms = 0;
    int n = 0;
    for (const RecordPtr& rec : snap.records)
      if (!rec->prefill) {
        ms += rec->ms;
        ++n;
      }
    if (n > 0) std::snprintf(buf, sizeof(buf), "%.1f tokens/s", 1000.0 * n / std::max(ms, 1e-6));
    counter_row("engine speed", n > 0 ? buf : "-");
    ImGui::EndTable();
  }
  kv_layout_section(snap, ui);
  kv_loss_plot(snap);
  std::vector<double> per, cum;
  std::vector<CacheMode> modes;
  for (const RecordPtr& rec : snap.records) {
    per.push_back(static_cast<double>(rec->flops));
    cum.push_back(static_cast<double>(rec->flops_total));
    modes.push_back(rec->mode);
  }
  const CacheMode other_mode = kv ? CacheMode::kNoCache : CacheMode::kKV;
  std::vector<double> other = computed_flops(snap, other_mode);
  std::vector<double> other_cum(other.size());
  double acc = 0;
  for (size_t i = 0; i < other.size(); ++i) other_cum[i] = acc += other[i];
  const float h = ImGui::GetTextLineHeight() * 5.5f;
  const int marker = snap.seq.current ? snap.seq.current->index : -1;
  flop_plot("##per", "FLOPs per step", per, modes, other, other_mode, h, marker);
  flop_plot("##cum", "FLOPs so far", cum, modes, other_cum, other_mode, h, marker);
  // Legend of the plots.
  ImGui::TextColored(v4(palette::kCacheHigh), "\xE2\x94\x81 KV CACHE");
  ImGui::SameLine();
  ImGui::TextColored(v4(palette::kRecomputed), "\xE2\x94\x81 NO CACHE");
  ImGui::SameLine();
  ImGui::TextDisabled("(solid: ran)");
  ImGui::TextColored(v4(other_mode == CacheMode::kKV ? palette::kCacheHigh : palette::kRecomputed),
                     "- - %s, computed from the formula", other_mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
  return cmds;
}

Commands panel_attention(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const int n_layer = snap.model ? snap.model->config.n_layer : 0;
  const int n_head = snap.model ? snap.model->config.n_head : 0;
  // Grouped-query models: query heads listed under the K/V head they share (group > 1).
  const int n_kv_head = snap.model ? snap.model->config.kv_heads() : 0;
  auto combo = [](const char* label, int* value, int n, const char* what, int group) {
    const std::string current = *value < 0 ? "mean of all " + std::string(what) : std::to_string(*value);
    ImGui::SetNextItemWidth(-1);
    const std::string shown = (std::string(what) == "layers" ? "layer: " : "head: ") + current;
    if (ImGui::BeginCombo(label, shown.c_str())) {
      if (ImGui::Selectable(("mean of all " + std::string(what)).c_str(), *value < 0)) *value = -1;
      for (int i = 0; i < n; ++i) {
        if (group > 1 && i % group == 0) ImGui::TextDisabled("K/V head %d (read by %d query heads)", i / group, group);
        if (ImGui::Selectable(((group > 1 ? "  " : "") + std::to_string(i)).c_str(), *value == i)) *value = i;
      }
      ImGui::EndCombo();
    }
  };
  if (ui.layer >= n_layer) ui.layer = -1;
  if (ui.head >= n_head) ui.head = -1;
  combo("##layer", &ui.layer, n_layer, "layers", 1);
  combo("##head", &ui.head, n_head, "heads", n_kv_head > 0 && n_kv_head < n_head ? n_head / n_kv_head : 1);
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##min", &ui.min_weight, 0.0f, 0.5f, "beams with weight \xE2\x89\xA5 %.3f",
                     ImGuiSliderFlags_Logarithmic);
  ImGui::Checkbox("show beams", &ui.beams);
  ImGui::TextWrapped("Beams: the newest token's attention over every cached position; width and brightness = weight.");
  return cmds;
}

// panel_next_token: app/panel_sampling.cpp

Commands panel_model(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  if (snap.model) {
    const Config& c = snap.model->config;
    if (ImGui::BeginTable("model", 2, ImGuiTableFlags_SizingStretchProp)) {
      counter_row("name", snap.model->name);
      counter_row("parameters", format_si(static_cast<double>(snap.model->n_params)));
      counter_row("layers", std::to_string(c.n_layer));
      counter_row("heads",
                  std::to_string(c.n_head) + " \xC3\x97 " + std::to_string(c.head_dim()) + " dims" +
                      (c.kv_heads() < c.n_head ? ", " + std::to_string(c.kv_heads()) + " K/V heads (GQA)" : ""));
      counter_row("width", std::to_string(c.n_embd));
      counter_row("context", std::to_string(c.n_positions) + " tokens");
      counter_row("vocabulary", std::to_string(c.vocab_size) + " tokens");
      counter_row("KV bytes/token", format_bytes(kv_bytes_per_position(c)) + " (2 \xC3\x97 " +
                                        std::to_string(c.n_layer) + " \xC3\x97 " +
                                        std::to_string(c.kv_heads() * c.head_dim()) + " \xC3\x97 4 B)");
      if (c.kv_heads() < c.n_head) {
        // What multi-head attention with one K/V per query head would hold.
        const uint64_t mha = 2ull * c.n_layer * static_cast<uint64_t>(c.n_head) * c.head_dim() * 4;
        counter_row("with full MHA",
                    format_bytes(mha) + " (" + std::to_string(c.n_head / c.kv_heads()) + "\xC3\x97 more)");
      }
      counter_row("weights", snap.model->stored_dtype);
      ImGui::EndTable();
    }
  } else if (snap.loading_model) {
    ImGui::TextUnformatted("loading\xE2\x80\xA6");
  } else {
    ImGui::TextColored(v4(palette::kRecomputed), "no model loaded");
  }
  ImGui::TextUnformatted("Load a model folder (GPT-2, Llama, Mistral, Qwen2):");
  ImGui::SetNextItemWidth(-60);
  const bool enter =
      ImGui::InputTextWithHint("##dir", "/path/to/model", &ui.model_dir_input, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  ImGui::BeginDisabled(snap.loading_model || ui.model_dir_input.empty());
  if (ImGui::Button("Load", ImVec2(-1, 0)) || (enter && !ui.model_dir_input.empty()))
    cmds.push_back(cmd::LoadModel{ui.model_dir_input});
  ImGui::EndDisabled();
  if (snap.loading_model) {
    // The load runs on its own thread; the current model keeps generating.
    char pct[32];
    std::snprintf(pct, sizeof(pct), "loading %.0f%%", 100.0 * snap.load_progress);
    ImGui::ProgressBar(snap.load_progress, ImVec2(ImGui::GetContentRegionAvail().x - 70, 0), pct);
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(-1, 0))) cmds.push_back(cmd::CancelLoad{});
    ImGui::TextDisabled("(the current model keeps working until the new one is ready)");
  }
  if (!snap.model_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, v4(palette::kRecomputed));
    ImGui::TextWrapped("Could not load: %s", snap.model_error.c_str());
    ImGui::PopStyleColor();
    if (snap.model) ImGui::TextDisabled("(still using %s)", snap.model->name.c_str());
  }
  return cmds;
}

Commands panel_view(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  (void)snap;
  const char* names[] = {"FRONT (1)", "TOP (2)", "SIDE (3)", "FOLLOW (4)"};
  const CameraPreset presets[] = {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow};
  const float bw = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) * 0.5f;
  for (int i = 0; i < 4; ++i) {
    if (i % 2) ImGui::SameLine();
    const bool active = ui.auto_camera && ui.camera == presets[i];
    if (active) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    if (ImGui::Button(names[i], ImVec2(bw, 0))) {
      cmds.push_back(cmd::SetCamera{presets[i]});
    }
    if (active) ImGui::PopStyleColor();
  }
  if (!ui.auto_camera && ImGui::Button("Fit the sequence again", ImVec2(-1, 0))) cmds.push_back(cmd::Fit{});
  ImGui::TextDisabled("drag: orbit \xC2\xB7 right-drag: pan \xC2\xB7 wheel: zoom\nTab: hide/show the panels");
  ImGui::Checkbox("token labels", &ui.labels);
  ImGui::SameLine();
  ImGui::Checkbox("legend", &ui.legend);
  ImGui::Checkbox("counters", &ui.hud);
  ImGui::SameLine();
  ImGui::Checkbox("grid", &ui.grid);
  float scale = ui.text_scale;
  ImGui::SetNextItemWidth(-ImGui::CalcTextSize("text scale ").x);
  ImGui::SliderFloat("text scale", &scale, 0.75f, 2.5f, "%.2f");
  if (ImGui::IsItemDeactivatedAfterEdit()) {
    cmds.push_back(cmd::TextScale{scale});
  } else if (ImGui::IsItemActive()) {
    ImGui::SetTooltip("applies on release");
  }
  if (ImGui::Button(ui.fullscreen ? "Window (F11)" : "Fullscreen (F11)", ImVec2(bw, 0)))
    cmds.push_back(cmd::Fullscreen{});
  ImGui::SameLine();
  if (ImGui::Button("Screenshot (F12)", ImVec2(bw, 0))) cmds.push_back(cmd::Screenshot{});
  // Presentation: F5, predict, palette, saved views.
  if (ImGui::Button("Presentation (F5)", ImVec2(bw, 0))) cmds.push_back(cmd::Presentation{});
  ImGui::SameLine();
  if (ImGui::Button(ui.predict ? "Predict: on (P)" : "Predict: off (P)", ImVec2(bw, 0))) cmds.push_back(cmd::Predict{});
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Hides each new token and its bars until Enter, so the class can guess first.");
  bool cb = ui.colour_blind;
  if (ImGui::Checkbox("colour-blind-safe, projector palette", &cb)) cmds.push_back(cmd::Palette{});
  if (ui.view_path.empty()) {
    const std::string dir = std::getenv("HOME") ? std::string(std::getenv("HOME")) : std::string(".");
    ui.view_path = dir + "/kvscope-view.json";
  }
  ImGui::SetNextItemWidth(-1);
  ImGui::InputText("##viewpath", &ui.view_path);
  if (ImGui::Button("Save view", ImVec2(bw, 0))) cmds.push_back(cmd::SaveView{ui.view_path});
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("camera + step + settings, to prepare a lesson");
  ImGui::SameLine();
  if (ImGui::Button("Load view", ImVec2(bw, 0))) cmds.push_back(cmd::LoadView{ui.view_path});
  if (!ui.status.empty()) ImGui::TextWrapped("%s", ui.status.c_str());
  return cmds;
}

Commands panel_errors(const UiState& ui) {
  Commands cmds;
  if (ui.errors.empty()) return cmds;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.35f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSizeConstraints(ImVec2(360, 0), ImVec2(vp->WorkSize.x * 0.6f, vp->WorkSize.y * 0.6f));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, ImVec4(0.25f, 0.04f, 0.05f, 0.96f));
  ImGui::PushStyleColor(ImGuiCol_TitleBgActive, ImVec4(0.6f, 0.08f, 0.08f, 1));
  ImGui::PushStyleColor(ImGuiCol_TitleBg, ImVec4(0.5f, 0.06f, 0.06f, 1));
  if (ImGui::Begin(
          "Something went wrong", nullptr,
          ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings)) {
    for (const std::string& e : ui.errors) {
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 34.0f);
      ImGui::Bullet();
      ImGui::TextUnformatted(e.c_str());
      ImGui::PopTextWrapPos();
    }
    if (ImGui::Button("OK", ImVec2(120, 0)) || ImGui::IsKeyPressed(GLFW_KEY_ESCAPE))
      cmds.push_back(cmd::DismissErrors{});
  }
  ImGui::End();
  ImGui::PopStyleColor(3);
  return cmds;
}

namespace {

// An aggregated column of a long sequence (scene_lod.h): what it sums up.
void aggregated_tooltip(const SequenceState& seq, const Pick& pick, int layer, int head) {
  const int p0 = pick.pos, p1 = std::min(pick.pos + pick.span, static_cast<int>(seq.tokens.size()));
  ImGui::BeginTooltip();
  ImGui::Text("positions %d\xE2\x80\x93%d: %d positions drawn as one column", p0, p1 - 1, p1 - p0);
  ImGui::TextDisabled("(a long sequence: older positions are binned, the newest have a column each)");
  const StepRecord* r = seq.current.get();
  if (pick.kind == Pick::kKv) {
    double sum = 0;
    int n = 0;
    for (int p = p0; p < p1; ++p)
      if (seq.knorm(p, pick.layer) >= 0) sum += seq.knorm(p, pick.layer), ++n;
    ImGui::Text("layer %d: %s; mean |K| = %.3f over %d rows", pick.layer, to_string(pick.state), n > 0 ? sum / n : 0.0,
                n);
  }
  if (r && r->n_rows > 0) {
    double w = 0;
    for (int p = p0; p < std::min(p1, r->seq_len); ++p) w += attention_weight(*r, layer, head, p);
    ImGui::Text("beam from the newest token: weight %.4f summed over these keys (%s, %s)", w,
                layer < 0 ? "mean of layers" : ("layer " + std::to_string(layer)).c_str(),
                head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str());
  }
  ImGui::EndTooltip();
}

}  // namespace

void hover_tooltip(const Snapshot& snap, const Pick& pick, int layer, int head) {
  if (pick.kind == Pick::kNothing || !snap.seq.current) return;
  const SequenceState& seq = snap.seq;
  if (pick.pos < 0 || pick.pos >= static_cast<int>(seq.tokens.size())) return;
  if (pick.span > 1) return aggregated_tooltip(seq, pick, layer, head);
  const TokenInfo& t = seq.tokens[pick.pos];
  ImGui::BeginTooltip();
  if (pick.kind == Pick::kToken) {
    ImGui::Text("token %d at position %d", t.id, pick.pos);
    ImGui::Text("text:  %s", visible_piece(t.piece).c_str());
    const std::string raw = snap.model ? snap.model->tokenizer.token_bytes(t.id) : std::string();
    ImGui::Text("bytes: %s", format_hex_bytes(raw).c_str());
    if (t.prompt) {
      ImGui::TextUnformatted("part of the prompt");
    } else {
      ImGui::Text("chosen at step %d with probability %.1f%%", t.chosen_at, 100.0 * t.prob);
    }
    if (pick.pos == seq.seq_len()) ImGui::TextUnformatted("newest: its K/V are computed in the next step");
  } else {
    ImGui::Text("KV block: layer %d, position %d (%s)", pick.layer, pick.pos, visible_piece(t.piece).c_str());
    if (pick.kv_head >= 0 && seq.n_kv_head > 0) {
      const int group = seq.n_head / seq.n_kv_head;
      ImGui::Text("K/V head %d: query heads %d\xE2\x80\x93%d read this K/V head", pick.kv_head, pick.kv_head * group,
                  pick.kv_head * group + group - 1);
    }
    const float kn = seq.knorm(pick.pos, pick.layer), vn = seq.vnorm(pick.pos, pick.layer);
    switch (pick.state) {
      case KvState::kEmpty:
        ImGui::TextUnformatted(pick.pos >= seq.seq_len() ? "empty: computed in the next step"
                                                         : "empty: NO CACHE keeps nothing between steps");
        break;
      case KvState::kResident:
        ImGui::TextUnformatted("held in the KV cache, read again this step");
        break;
      case KvState::kNew:
        ImGui::TextUnformatted("computed this step and added to the cache");
        break;
      case KvState::kPrefill:
        ImGui::TextUnformatted("computed in the prefill pass, kept in the cache");
        break;
      case KvState::kRefill:
        ImGui::TextUnformatted("recomputed to rebuild the cache, kept");
        break;
      case KvState::kRecomputed:
        ImGui::TextUnformatted("recomputed this step, then thrown away (NO CACHE)");
        break;
      case KvState::kNewDropped:
        ImGui::TextUnformatted("computed this step, then thrown away (NO CACHE)");
        break;
      case KvState::kEvicting:
      case KvState::kEvicted:
        break;  // kv_layout_tooltip says when and why
    }
    kv_layout_tooltip(seq, pick.pos, pick.layer, pick.state);
    // The beam that lands here: the newest query's attention to this position.
    const StepRecord* r = seq.current.get();
    if (r && r->n_rows > 0 && pick.pos < r->seq_len) {
      const float w = attention_weight(*r, layer, head, pick.pos);
      ImGui::Text("beam from the newest token \"%s\": weight %.4f (%s, %s)",
                  visible_piece(seq.tokens[static_cast<size_t>(r->seq_len)].piece).c_str(), w,
                  layer < 0 ? "mean of layers" : ("layer " + std::to_string(layer)).c_str(),
                  head < 0 ? "mean of heads" : ("head " + std::to_string(head)).c_str());
    }
    if (kn >= 0) {
      const int d = seq.kv_dim > 0 ? seq.kv_dim : seq.n_embd;
      if (seq.n_kv_head > 0 && seq.n_kv_head < seq.n_head) {
        ImGui::Text("holds K and V rows of %d numbers each (%d K/V heads, each read by %d query heads)", d,
                    seq.n_kv_head, seq.n_head / seq.n_kv_head);
      } else {
        ImGui::Text("holds K and V rows of %d numbers each (%d heads)", d, seq.n_head);
      }
      ImGui::Text("|K| = %.3f   |V| = %.3f", kn, vn);
      kv_rows_tooltip(snap, pick.layer, head, pick.pos, static_cast<int>(snap.seq_count) - 1);
      const KVDtype dt = seq.current->kv_layout.dtype;
      ImGui::TextDisabled("(%s of memory when cached as %s)", format_bytes(2 * kv_row_bytes(dt, d)).c_str(),
                          to_string(dt));
    }
  }
  ImGui::EndTooltip();
}

}  // namespace kvscope
