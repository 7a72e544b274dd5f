#include "app/gui/panels/panels.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "app/platform/user_files.h"
#include "app/session/fitting.h"
#include "model/core/units.h"
#include "model/engine/engine.h"
#include "render/scene/scene_format.h"

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

}  // namespace

bool big_button(const char* label, const glm::vec3& colour, ImVec2 size) {
  ImGui::PushStyleColor(ImGuiCol_Button, v4(colour * 0.45f));
  ImGui::PushStyleColor(ImGuiCol_ButtonHovered, v4(colour * 0.6f));
  ImGui::PushStyleColor(ImGuiCol_ButtonActive, v4(colour * 0.75f));
  const bool pressed = ImGui::Button(label, size);
  ImGui::PopStyleColor(3);
  return pressed;
}

int shown_step_or_note(const EngineState& engine, const UiState& ui) {
  const int step = shown_step(engine, ui);
  if (step < 0) ImGui::TextDisabled("(no step yet)");
  return step;
}

void begin_wrapped_tooltip() {
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(std::min(ImGui::GetFontSize() * 30.0f, ImGui::GetIO().DisplaySize.x * 0.5f));
}

void end_wrapped_tooltip() {
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

void hover_help(const char* text) {
  if (!ImGui::IsItemHovered()) return;
  begin_wrapped_tooltip();
  ImGui::TextUnformatted(text);
  end_wrapped_tooltip();
}

bool begin_counters(const char* id) {
  // Names and values side by side while about 26 characters fit the width, else each value under its name.
  const int columns = ImGui::GetContentRegionAvail().x >= ImGui::GetFontSize() * 13.0f ? 2 : 1;
  if (!ImGui::BeginTable(id, columns, ImGuiTableFlags_SizingStretchProp)) return false;
  if (columns == 1) return true;
  // (fixed weights: wrapped cells would measure the proportional columns' widths from the wrapping itself)
  ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch, 1.2f);
  ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch, 1.0f);
  return true;
}

void counter_row(const char* name, const std::string& value, const ImVec4* colour) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextWrapped("%s", name);
  const bool stacked = ImGui::TableGetColumnCount() == 1;
  // Stacked: the value indented under its name, less where its longest word would not fit.
  float indent = 0;
  if (stacked) {
    float widest = 0;
    for (size_t i = 0; i < value.size();) {
      const size_t end = std::min(value.find(' ', i), value.size());
      widest = std::max(widest, ImGui::CalcTextSize(value.c_str() + i, value.c_str() + end).x);
      i = end + 1;
    }
    indent = std::clamp(ImGui::GetContentRegionAvail().x - widest - 1, 0.0f, ImGui::GetStyle().IndentSpacing);
    if (indent > 0) ImGui::Indent(indent);
  } else {
    ImGui::TableSetColumnIndex(1);
  }
  if (colour)
    text_wrapped_coloured(*colour, value);
  else
    text_wrapped_words(value);
  if (indent > 0) ImGui::Unindent(indent);
}

std::string header_label(const char* full, const char* brief) {
  const ImGuiStyle& st = ImGui::GetStyle();
  const float need = ImGui::CalcTextSize(full).x + ImGui::GetFontSize() + 4 * st.FramePadding.x;
  return std::string(need <= ImGui::GetContentRegionAvail().x ? full : brief) + "###" + full;
}

namespace {

float button_width(const char* label) {
  return ImGui::CalcTextSize(label, nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x;
}

}  // namespace

void ButtonRow::next() const {
  if (one_row) ImGui::SameLine();
}

ButtonRow button_row(const std::vector<const char*>& labels) {
  std::vector<float> widths;
  for (const char* l : labels) widths.push_back(button_width(l));
  const float avail = ImGui::GetContentRegionAvail().x, spacing = ImGui::GetStyle().ItemSpacing.x;
  ButtonRow row;
  row.one_row = buttons_fit_side_by_side(widths, spacing, avail);
  const float n = static_cast<float>(std::max<size_t>(1, labels.size()));
  row.size = ImVec2(row.one_row ? (avail - spacing * (n - 1)) / n : -1, 0);
  return row;
}

const char* fitting_label(const std::vector<const char*>& labels) {
  const float avail = ImGui::GetContentRegionAvail().x;
  for (const char* l : labels)
    if (button_width(l) <= avail) return l;
  return labels.empty() ? "" : labels.back();
}

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string keyed(const UiState& ui, const std::string& label, const char* key) {
  return ui.touch ? label : label + " (" + key + ")";
}

std::string fit_text(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  const char* ellipsis = "\xE2\x80\xA6";
  size_t cut = text.size();
  while (cut > 0) {
    --cut;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    const std::string s = text.substr(0, cut) + ellipsis;
    if (ImGui::CalcTextSize(s.c_str()).x <= width) return s;
  }
  return ellipsis;
}

namespace {

// One paragraph (no line break) wrapped at its spaces, its lines joined by line breaks.
std::string wrap_paragraph(const std::string& text, float avail) {
  std::vector<std::string> words;
  std::vector<float> widths;
  for (size_t i = 0; i <= text.size();) {
    const size_t end = std::min(text.find(' ', i), text.size());
    if (end > i) {
      words.push_back(text.substr(i, end - i));
      widths.push_back(ImGui::CalcTextSize(words.back().c_str()).x);
    }
    i = end + 1;
  }
  const std::vector<size_t> starts = wrap_words(widths, ImGui::CalcTextSize(" ").x, avail);
  std::string lines;
  for (size_t l = 0; l < starts.size(); ++l) {
    if (l > 0) lines += '\n';
    for (size_t i = starts[l]; i < (l + 1 < starts.size() ? starts[l + 1] : words.size()); ++i)
      lines += (i > starts[l] ? " " : "") + words[i];
  }
  return lines;
}

}  // namespace

void text_wrapped_words(const std::string& text) {
  // A pixel spare: the line's width summed by word may round above the whole line's.
  const float avail = ImGui::GetContentRegionAvail().x - 1.0f;
  std::string lines;
  for (size_t i = 0; i <= text.size();) {
    const size_t end = std::min(text.find('\n', i), text.size());
    lines += (i > 0 ? "\n" : "") + wrap_paragraph(text.substr(i, end - i), avail);
    i = end + 1;
  }
  ImGui::TextWrapped("%s", lines.c_str());  // (a word wider than the line still wraps inside)
}

void text_wrapped_wordsf(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text(static_cast<size_t>(std::max(0, n)), '\0');
  if (n > 0) std::vsnprintf(text.data(), text.size() + 1, fmt, again);
  va_end(again);
  text_wrapped_words(text);
}

void text_wrapped_coloured(const ImVec4& colour, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, colour);
  text_wrapped_words(text);
  ImGui::PopStyleColor();
}

float checkbox_width(const char* label) {
  return ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label, nullptr, true).x;
}

void same_line_if_fits(float width) {
  ImGui::SameLine();
  if (ImGui::GetContentRegionAvail().x < width) ImGui::NewLine();
}

bool checkbox_wrapped(const char* label, bool* v) {
  ImGui::PushID(label);
  bool changed = ImGui::Checkbox("##box", v);
  ImGui::PopID();
  ImGui::SameLine();
  ImGui::TextWrapped("%s", label);
  if (ImGui::IsItemClicked()) {
    *v = !*v;
    changed = true;
  }
  return changed;
}

Commands panel_prompt(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  Commands cmds;
  (void)engine;
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
    text_wrapped_coloured(ImVec4(0.75f, 0.8f, 0.95f, 1), std::string("\"") + kPromptPresets[ui.preset].text + "\"");
  } else {
    ImGui::InputTextMultiline("##custom", &ui.custom_prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 3.2f));
  }
  const std::string prompt = ui.preset < kNumPresets ? kPromptPresets[ui.preset].text : ui.custom_prompt;
  const std::string reset = keyed(ui, "Reset", "R");
  const ButtonRow row = button_row({"Generate", reset.c_str()});
  if (big_button("Generate", pal.generated_token, row.size)) cmds.push_back(cmd::Start{prompt});
  row.next();
  if (ImGui::Button(reset.c_str(), ImVec2(-1, 0))) cmds.push_back(cmd::Reset{});
  return cmds;
}

Commands panel_playback(const EngineState& engine, UiState& ui) {
  Commands cmds;
  // (measured with the wider of Play / Pause, so the row does not jump when it toggles)
  const std::string pause = keyed(ui, "Pause", "Space"), step = keyed(ui, "Step", "\xE2\x86\x92");
  const ButtonRow row = button_row({pause.c_str(), step.c_str()});
  // Stopped, the button plays again (cmd::PlayPause), so it reads Play; "###" keeps its id whatever its label.
  const bool pausable = ui.playing && engine.stop == StopReason::kNone;
  const std::string play = (pausable ? pause : keyed(ui, "Play", "Space")) + "###play";
  if (big_button(play.c_str(), pausable ? glm::vec3(0.8f, 0.7f, 0.3f) : glm::vec3(0.3f, 0.9f, 0.4f), row.size))
    cmds.push_back(cmd::PlayPause{});
  row.next();
  if (ImGui::Button(step.c_str(), ImVec2(-1, 0))) cmds.push_back(cmd::Step{});
  ImGui::BeginDisabled(ui.fastest);
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##speed", &ui.speed, 0.25f, 8.0f, "%.2f tokens/s", ImGuiSliderFlags_Logarithmic);
  ImGui::EndDisabled();
  checkbox_wrapped("as fast as possible", &ui.fastest);
  const int ctx = engine.model ? engine.model->config.n_positions : 1024;
  int max_new = ui.max_new > 0 ? ui.max_new : kDefaultMaxNew;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderInt("##maxnew", &max_new, 1, std::max(2, ctx), "max new tokens: %d", ImGuiSliderFlags_Logarithmic)) {
    ui.max_new = max_new;
    cmds.push_back(cmd::SetMaxNew{max_new});
  }
  const int n_new = new_tokens(engine);
  const int n = engine.timeline_size(), s = shown_step(engine, ui);
  if (n > 0 && s >= 0 && s < n - 1) {
    // Looking at the past: the stop (or the play state) belongs to the newest step, not to this one.
    text_wrapped_coloured(ImVec4(1, 0.8f, 0.4f, 1), "showing step " + std::to_string(s) + " of 0\xE2\x80\x93" +
                                                        std::to_string(n - 1) + " (the timeline below)");
    if (engine.stop != StopReason::kNone)
      text_wrapped_coloured(ImGui::GetStyle().Colors[ImGuiCol_TextDisabled], stop_text(engine.stop));
  } else if (engine.stop != StopReason::kNone) {
    text_wrapped_coloured(ImVec4(1, 0.8f, 0.4f, 1),
                          std::string(stop_text(engine.stop)) + " (" + std::to_string(n_new) + " new)");
  } else if (engine.started) {
    text_wrapped_wordsf("%s \xC2\xB7 %d new token%s",
                        engine.step_in_flight ? "computing\xE2\x80\xA6" : (ui.playing ? "playing" : "paused"), n_new,
                        n_new == 1 ? "" : "s");
  } else if (engine.loading_model) {
    ImGui::TextUnformatted("loading the model\xE2\x80\xA6");
  }
  return cmds;
}

Commands panel_attention(const EngineState& engine, UiState& ui) {
  Commands cmds;
  const int n_layer = engine.model ? engine.model->config.n_layer : 0;
  const int n_head = engine.model ? engine.model->config.n_head : 0;
  // Grouped-query models: query heads listed under the K/V head they share (group > 1).
  const int n_kv_head = engine.model ? engine.model->config.kv_heads() : 0;
  auto combo = [](const char* label, int* value, int n, const char* what, int group) {
    const std::string current = *value < 0 ? "mean of all " + std::string(what) : std::to_string(*value);
    ImGui::SetNextItemWidth(-1);
    std::string shown = (std::string(what) == "layers" ? "layer: " : "head: ") + current;
    // (a narrow sidebar: "layer: mean"; the list still names the mean in full)
    if (*value < 0 &&
        ImGui::CalcTextSize(shown.c_str()).x + ImGui::GetFrameHeight() * 1.5f > ImGui::GetContentRegionAvail().x)
      shown = (std::string(what) == "layers" ? "layer: " : "head: ") + std::string("mean");
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
  ImGui::SliderFloat("##min", &ui.min_weight, 0.0f, 0.5f,
                     fitting_label({"rays with weight \xE2\x89\xA5 %.3f", "rays \xE2\x89\xA5 %.3f"}),
                     ImGuiSliderFlags_Logarithmic);
  hover_help("Attention rays are drawn for the cached positions with at least this attention weight.");
  checkbox_wrapped("show attention rays", &ui.rays);
  // Spelled out where it takes up to three lines; at a large text scale (six lines pushing the
  // Q·K·V inspector off the window) it is the checkbox's tooltip.
  const char* rays_help =
      "Attention rays: the newest token's attention over every cached position; width and brightness = weight.";
  if (ImGui::CalcTextSize(rays_help).x > 3 * ImGui::GetContentRegionAvail().x)
    hover_help(rays_help);
  else
    ImGui::TextWrapped("%s", rays_help);
  return cmds;
}

// panel_next_token: app/gui/panels/sampling.cpp

void model_load_progress(const EngineState& engine, Commands& cmds) {
  if (!engine.loading_model) return;
  // The load runs on its own thread; the current model keeps generating.
  char pct[32];
  std::snprintf(pct, sizeof(pct), "loading %.0f%%", 100.0 * engine.load_progress);
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  ImGui::ProgressBar(engine.load_progress, ImVec2(-(button_width("Cancel") + spacing), 0), pct);
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(-1, 0))) cmds.push_back(cmd::CancelLoad{});
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        "(the current model keeps working until the new one is ready)");
}

Commands panel_model(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  Commands cmds;
  if (engine.model) {
    const Config& c = engine.model->config;
    if (begin_counters("model")) {
      counter_row("name", engine.model->name);
      counter_row("parameters", format_si(static_cast<double>(engine.model->n_params)));
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
      counter_row("weights", engine.model->stored_dtype);
      ImGui::EndTable();
    }
  } else if (engine.loading_model) {
    ImGui::TextUnformatted("loading\xE2\x80\xA6");
  } else {
    ImGui::TextColored(v4(pal.recomputed), "no model loaded");
  }
  ImGui::TextWrapped("Load a model folder (GPT-2, Llama, Mistral, Qwen2):");
  // The buttons beside the field and the bar as wide as their labels at any text scale.
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  if (kFilesThroughBrowser) {  // the page: the browser's folder picker (or a folder dropped on the page)
    ImGui::BeginDisabled(engine.loading_model);
    if (ImGui::Button("Open model folder...", ImVec2(-1, 0))) ask_user_for_model_folder();
    ImGui::EndDisabled();
  } else {
    ImGui::SetNextItemWidth(-(button_width("Load") + spacing));
    const bool enter =
        ImGui::InputTextWithHint("##dir", "/path/to/model", &ui.model_dir_input, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    ImGui::BeginDisabled(engine.loading_model || ui.model_dir_input.empty());
    if (ImGui::Button("Load", ImVec2(-1, 0)) || (enter && !ui.model_dir_input.empty()))
      cmds.push_back(cmd::LoadModel{ui.model_dir_input});
    ImGui::EndDisabled();
  }
  model_load_progress(engine, cmds);
  if (!engine.model_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, v4(pal.recomputed));
    text_wrapped_wordsf("Could not load: %s", engine.model_error.c_str());
    ImGui::PopStyleColor();
    if (engine.model)
      text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                            "(still using " + engine.model->name + ")");
  }
  return cmds;
}

namespace {
// Save / load a view: a path on the desktop; in the page a download and the browser's file picker.
void saved_view_buttons(UiState& ui, const ButtonRow& pair, Commands& cmds) {
  if (kFilesThroughBrowser) {  // the page: a download and the browser's file picker, no path
    if (ImGui::Button("Save view", pair.size)) cmds.push_back(cmd::SaveView{kBrowserViewFile});
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("downloads camera + step + settings as kvscope-view.json");
    pair.next();
    if (ImGui::Button("Open view...", pair.size)) cmds.push_back(cmd::LoadView{""});
    if (!ui.status.empty()) text_wrapped_words(ui.status);
    return;
  }
  if (ui.view_path.empty()) {
    const std::string dir = std::getenv("HOME") ? std::string(std::getenv("HOME")) : std::string(".");
    ui.view_path = dir + "/kvscope-view.json";
  }
  ImGui::SetNextItemWidth(-1);
  ImGui::InputText("##viewpath", &ui.view_path);
  // A path longer than the field (a narrow sidebar): the whole of it on hover.
  if (ImGui::IsItemHovered() && !ImGui::IsItemActive() &&
      ImGui::CalcTextSize(ui.view_path.c_str()).x + 2 * ImGui::GetStyle().FramePadding.x > ImGui::GetItemRectSize().x)
    ImGui::SetTooltip("%s", ui.view_path.c_str());
  if (ImGui::Button("Save view", pair.size)) cmds.push_back(cmd::SaveView{ui.view_path});
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("camera + step + settings, to prepare a lesson");
  pair.next();
  if (ImGui::Button("Load view", pair.size)) cmds.push_back(cmd::LoadView{ui.view_path});
  if (!ui.status.empty()) text_wrapped_words(ui.status);
}

}  // namespace

Commands panel_view(const EngineState& engine, UiState& ui) {
  Commands cmds;
  (void)engine;
  // With their keys while the pairs fit, else the names alone (the keys in the tooltip).
  const char* keyed[] = {"FRONT (1)", "TOP (2)", "SIDE (3)", "FOLLOW (4)"};
  const char* plain[] = {"FRONT", "TOP", "SIDE", "FOLLOW"};
  const bool with_keys = button_row({keyed[0], keyed[3]}).one_row;
  const char* const* names = with_keys ? keyed : plain;
  const ButtonRow row = button_row({names[0], names[3]});
  const CameraPreset presets[] = {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow};
  for (int i = 0; i < 4; ++i) {
    if (i % 2) row.next();
    const bool active = ui.auto_camera && ui.camera == presets[i];
    if (active) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    if (ImGui::Button(names[i], row.size)) cmds.push_back(cmd::SetCamera{presets[i]});
    if (!with_keys && ImGui::IsItemHovered()) ImGui::SetTooltip("key %d", i + 1);
    if (active) ImGui::PopStyleColor();
  }
  if (!ui.auto_camera && ImGui::Button("Fit the sequence again", ImVec2(-1, 0))) cmds.push_back(cmd::Fit{});
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        "drag: orbit \xC2\xB7 right-drag: pan \xC2\xB7 wheel: zoom\nTab: hide/show the panels");
  ImGui::Checkbox("token labels", &ui.labels);
  same_line_if_fits(checkbox_width("legend"));
  ImGui::Checkbox("legend", &ui.legend);
  ImGui::Checkbox("counters", &ui.hud);
  same_line_if_fits(checkbox_width("grid"));
  ImGui::Checkbox("grid", &ui.grid);
  float scale = ui.text_scale;
  ImGui::SetNextItemWidth(-1);  // (the label inside: a narrow sidebar keeps the slider wide)
  ImGui::SliderFloat("##textscale", &scale, 0.75f, 2.5f, fitting_label({"text scale %.2f", "text \xC3\x97%.2f"}));
  if (ImGui::IsItemDeactivatedAfterEdit()) {
    cmds.push_back(cmd::TextScale{scale});
  } else if (ImGui::IsItemActive()) {
    ImGui::SetTooltip("applies on release");
  }
  const ButtonRow pair = button_row({"Fullscreen (F11)", "Presentation (F5)"});
  // Each with its key while it fits, else without (the key in the tooltip).
  auto keyed_button = [&](const char* full, const char* brief, const char* tip) {
    const char* label = fitting_label({full, brief});
    const bool clicked = ImGui::Button(label, pair.size);
    if (label != full && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
    return clicked;
  };
  if (keyed_button(ui.fullscreen ? "Window (F11)" : "Fullscreen (F11)", ui.fullscreen ? "Window" : "Fullscreen",
                   "key F11"))
    cmds.push_back(cmd::Fullscreen{});
  pair.next();
  if (keyed_button("Screenshot (F12)", "Screenshot", "key F12")) cmds.push_back(cmd::Screenshot{});
  // Presentation: F5, predict, palette, saved views.
  if (keyed_button("Presentation (F5)", "Presentation", "presentation mode, key F5"))
    cmds.push_back(cmd::Presentation{});
  pair.next();
  if (ImGui::Button(ui.predict ? "Predict: on (P)" : "Predict: off (P)", pair.size)) cmds.push_back(cmd::Predict{});
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Hides each new token and its bars until Enter, so the class can guess first.");
  bool cb = ui.colour_blind;
  // (no word longer than "blindness)": a narrow sidebar wraps it between words)
  if (checkbox_wrapped("projector palette (safe for colour blindness)", &cb)) cmds.push_back(cmd::Palette{});
  saved_view_buttons(ui, pair, cmds);
  return cmds;
}

Commands panel_errors(const UiState& ui) {
  Commands cmds;
  if (ui.errors.empty()) return cmds;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.35f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  const float max_w = std::max(360.0f, vp->WorkSize.x * 0.6f);
  ImGui::SetNextWindowSizeConstraints(ImVec2(360, 0), ImVec2(max_w, vp->WorkSize.y * 0.6f));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, ImVec4(0.25f, 0.04f, 0.05f, 0.96f));
  ImGui::PushStyleColor(ImGuiCol_TitleBgActive, ImVec4(0.6f, 0.08f, 0.08f, 1));
  ImGui::PushStyleColor(ImGuiCol_TitleBg, ImVec4(0.5f, 0.06f, 0.06f, 1));
  if (ImGui::Begin(
          "Something went wrong", nullptr,
          ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings)) {
    // About 34 characters a line, but never past the panel's widest (its
    // right padding and a scrollbar's room kept): large text in a small
    // window wraps instead of running off the edge.
    const ImGuiStyle& st = ImGui::GetStyle();
    const float wrap = std::min(ImGui::GetFontSize() * 34.0f, max_w - st.WindowPadding.x - st.ScrollbarSize);
    for (const std::string& e : ui.errors) {
      ImGui::PushTextWrapPos(wrap);
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

}  // namespace kvscope
