// The Serving view: many requests served from one paged KV pool by
// model/serving's Server on the loaded model, open in place of the 3D view.
// A column of controls (presets, step / play, the timeline, the selected
// request's text) beside the picture, which render/scene/scene_serve.h
// builds from the records and this file only draws.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/gui/panels/panels.h"
#include "app/lessons/serve_presets.h"
#include "render/scene/scene_serve.h"

namespace kvscope {

namespace {

ImU32 col(const glm::vec3& c, float a = 1.0f) {
  return ImGui::ColorConvertFloat4ToU32(ImVec4(c.r, c.g, c.b, a));
}

const ServeRun* shown_run(const EngineState& engine, const UiState& ui) {
  const auto& runs = engine.serving.runs;
  if (runs.empty()) return nullptr;
  return &runs[static_cast<size_t>(std::clamp(ui.serving.run, 0, static_cast<int>(runs.size()) - 1))];
}

int shown_index(const ServeRun& r, const UiState& ui) {
  const int n = static_cast<int>(r.steps.size());
  return ui.serving.view_step < 0 ? n - 1 : std::min(ui.serving.view_step, n - 1);
}

std::string config_line(const SchedulerConfig& c, int block) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s batching; pool %d blocks of %d positions; up to %d positions per step, %d running%s",
                to_string(c.policy), c.pool_blocks, block, c.max_batch_tokens, c.max_running,
                c.prefix_caching ? "; prefix caching on" : "");
  return buf;
}

void preset_buttons(const UiState& ui, Commands& cmds) {
  const auto& presets = serve_presets();
  for (size_t i = 0; i < presets.size(); ++i) {
    const bool on = ui.serving.preset == static_cast<int>(i);
    if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    const std::string label =
        fit_text(presets[i].name, ImGui::GetContentRegionAvail().x - ImGui::GetStyle().FramePadding.x * 2);
    if (ImGui::Button((label + "##serve" + std::to_string(i)).c_str(), ImVec2(-1, 0)))
      cmds.push_back(cmd::ServeStart{static_cast<int>(i)});
    if (on) ImGui::PopStyleColor();
    hover_help(presets[i].what);
  }
  text_wrapped_words(
      presets[static_cast<size_t>(std::clamp(ui.serving.preset, 0, static_cast<int>(presets.size()) - 1))].what);
}

void playback(const EngineState& engine, UiState& ui, const ServeRun& run, Commands& cmds) {
  const ButtonRow row = button_row({ui.serving.playing ? "Pause" : "Play", "\xE2\x97\x80 Back", "Step \xE2\x96\xB6"});
  if (ImGui::Button(ui.serving.playing ? "Pause" : "Play", row.size)) cmds.push_back(cmd::ServePlay{});
  row.next();
  if (ImGui::Button("\xE2\x97\x80 Back", row.size)) cmds.push_back(cmd::ServeStep{-1});
  row.next();
  if (ImGui::Button("Step \xE2\x96\xB6", row.size)) cmds.push_back(cmd::ServeStep{1});
  ImGui::SetNextItemWidth(-1);
  ImGui::SliderFloat("##serve_speed", &ui.serving.speed, 0.25f, 20.0f, "%.2g steps/s", ImGuiSliderFlags_Logarithmic);
  const int n = engine.serving.steps();
  // Counted from 1, as the canvas' "step 5 of 13" (the records' "step" counts from 0).
  int shown = shown_index(run, ui) + 1;
  ImGui::SetNextItemWidth(-1);
  if (n > 1 && ImGui::SliderInt("##serve_step", &shown, 1, n, "step %d")) cmds.push_back(cmd::ServeScrubTo{shown - 1});
  if (engine.serving.busy) ImGui::TextDisabled("computing...");
}

// Static vs continuous: which run is drawn, and both runs' step counts.
void run_choice(const EngineState& engine, UiState& ui) {
  const auto& runs = engine.serving.runs;
  if (runs.size() < 2) return;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) same_line_if_fits(checkbox_width(to_string(runs[i].info->config.policy)));
    ImGui::RadioButton(to_string(runs[i].info->config.policy), &ui.serving.run, static_cast<int>(i));
  }
  std::string line;
  for (const ServeRun& r : runs)
    line += std::string(line.empty() ? "" : "; ") + to_string(r.info->config.policy) + ": " +
            std::to_string(r.steps.size()) + (r.done ? " steps, all done" : " steps so far");
  text_wrapped_words(line);
}

std::string request_text(const ServeRun& run, int req, int shown) {
  const ServeRequest& q = run.info->requests.at(static_cast<size_t>(req));
  std::vector<int> gen;
  for (int k = 0; k <= shown; ++k)
    for (const ServeEntry& e : run.steps[static_cast<size_t>(k)]->entries)
      if (e.req == req && e.token >= 0) gen.push_back(e.token);
  const Tokenizer& tok = run.info->model->tokenizer;
  // Bytes cut mid-character and control characters show as \xNN, as on the text line.
  return q.id + ": " + visible_text(tok.decode(q.prompt)) + " \xE2\x86\x92" + visible_text(tok.decode(gen));
}

void heading(const char* text) {
  ImGui::Spacing();
  ImGui::TextDisabled("%s", text);
  ImGui::Separator();
}

void controls(const EngineState& engine, UiState& ui, Commands& cmds) {
  if (ImGui::Button("\xE2\x97\x80 Back to the 3D view", ImVec2(-1, 0))) cmds.push_back(cmd::ServeOpen{false});
  const ServeRun* run = shown_run(engine, ui);
  if (!engine.serving.error.empty()) text_wrapped_coloured(ImVec4(1, 0.45f, 0.4f, 1), engine.serving.error);
  if (run) {
    heading("Steps");
    playback(engine, ui, *run, cmds);
    run_choice(engine, ui);
  }
  heading("Serving many requests");
  preset_buttons(ui, cmds);
  if (!run) return;
  text_wrapped_words(config_line(run->info->config, run->info->block));
  const int shown = shown_index(*run, ui);
  if (shown < 0) return;
  heading("Request");
  if (ui.serving.selected >= 0 && ui.serving.selected < static_cast<int>(run->info->requests.size())) {
    text_wrapped_words(request_text(*run, ui.serving.selected, shown));
    if (ui.serving.view_w <= 0) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      text_wrapped_words(ui.memo.serve_request.view.seq.current
                             ? "its attention rays: no room for the 3D view at this text scale and window height"
                             : "no attention rays: no step has computed it yet, or its rows were not kept");
      ImGui::PopStyleColor();
    } else if (ui.serving.folded) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      text_wrapped_words("click its lane again for every lane, the pool and the plot");
      ImGui::PopStyleColor();
    }
  } else
    ImGui::TextDisabled("click a lane for its text");
}

void draw_scene(const ServeScene& sc, ImVec2 o, ImDrawList* dl) {
  for (const ServeRect& r : sc.rects) {
    const ImVec2 a(o.x + r.pos.x, o.y + r.pos.y), b(a.x + r.size.x, a.y + r.size.y);
    dl->AddRectFilled(a, b, col(r.fill, r.alpha), 3.0f);
    if (r.border_w > 0) dl->AddRect(a, b, col(r.border), 3.0f, 0, r.border_w);
  }
  for (const ServeLine& l : sc.lines) {
    std::vector<ImVec2> pts;
    for (const glm::vec2& p : l.points) pts.emplace_back(o.x + p.x, o.y + p.y);
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), col(l.colour), 0, l.width);
  }
  for (const ServeText& t : sc.texts) dl->AddText(ImVec2(o.x + t.pos.x, o.y + t.pos.y), col(t.colour), t.text.c_str());
}

// A pool block's tooltip: who holds it.
void block_tooltip(const ServeRun& run, const ServeStep& s, int block, BlockLook look) {
  std::string who;
  for (size_t j = 0; j < s.tables.size() && j < s.running_after.size(); ++j)
    if (std::find(s.tables[j].begin(), s.tables[j].end(), block) != s.tables[j].end())
      who += (who.empty() ? "" : ", ") + run.info->requests[static_cast<size_t>(s.running_after[j])].id;
  begin_wrapped_tooltip();
  ImGui::Text("pool block %d", block);
  if (look == BlockLook::kCached)
    ImGui::TextUnformatted("free, still cached: a request whose prompt starts with these tokens reuses it");
  else if (look == BlockLook::kFree)
    ImGui::TextUnformatted("free");
  else
    ImGui::Text("held by %s", who.c_str());
  end_wrapped_tooltip();
}

// A folded lane's tile: whose it is and where it stands.
void lane_tooltip(const ServeRun& run, const ServeLane& l) {
  begin_wrapped_tooltip();
  ImGui::Text("%s: %s", run.info->requests.at(static_cast<size_t>(l.req)).id.c_str(), to_string(l.state));
  ImGui::TextUnformatted("click: its tokens and attention in the 3D view");
  end_wrapped_tooltip();
}

// The selected request in the 3D view's terms, rebuilt only when what it
// is built from changed; null while there is nothing to draw.
const ServeRequestView* request_view(const EngineState& engine, UiState& ui, const ServeRun& run, int shown) {
  PanelMemo::ServeRequest3D& m = ui.memo.serve_request;
  const int req = ui.serving.selected;
  if (m.version != engine.serving.version || m.run != ui.serving.run || m.shown != shown || m.req != req) {
    ServeSceneInput in;
    in.requests = &run.info->requests;
    in.steps = &run.steps;
    in.shown = shown;
    const Tokenizer& tok = run.info->model->tokenizer;
    in.token_text = [&tok](int t) { return tok.display_piece(t); };
    m.view = serve_request_view(in, req, run.info->model->config);
    m.version = engine.serving.version, m.run = ui.serving.run, m.shown = shown, m.req = req;
  }
  return m.view.seq.current ? &m.view : nullptr;
}

// Where the scene leaves the selected request's 3D view (drawn by the
// window's renderer under this panel, in window pixels for layout_panels),
// and a button over it: the pointer on it orbits and zooms the one camera
// (app/gui/input.cpp's view_mouse), as in the plain view.
void view_3d(const ServeScene& sc, ImVec2 o, UiState& ui) {
  UiState::Serving& sv = ui.serving;
  sv.view_w = sc.view_size.x > 0 && sc.view_size.y > 0 ? sc.view_size.x : 0;
  sv.view_hovered = false;
  sv.folded = sc.folded;
  if (sv.view_w <= 0) return;
  sv.view_x = o.x + sc.view_pos.x;
  sv.view_y = o.y + sc.view_pos.y;
  sv.view_h = sc.view_size.y;
  ImGui::SetCursorScreenPos(ImVec2(sv.view_x, sv.view_y));
  ImGui::InvisibleButton(
      "##serve_3d", ImVec2(sc.view_size.x, sc.view_size.y),
      ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight | ImGuiButtonFlags_MouseButtonMiddle);
  sv.view_hovered = ImGui::IsItemHovered() || ImGui::IsItemActive();
}

ServeViewOptions view_options(const EngineState& engine, UiState& ui, const ServeRun& run, int shown, ImVec2 size) {
  ServeViewOptions opt;
  opt.width = size.x;
  opt.height = size.y;
  opt.line_h = ImGui::GetTextLineHeight();
  opt.text_width = [](const std::string& s) { return ImGui::CalcTextSize(s.c_str()).x; };
  opt.palette = &palette_for(ui.colour_blind);
  opt.colour_blind = ui.colour_blind;
  opt.selected = ui.serving.selected;
  opt.request_3d = ui.serving.selected >= 0 && request_view(engine, ui, run, shown) != nullptr;
  return opt;
}

void canvas(const EngineState& engine, UiState& ui) {
  const ServeRun* run = shown_run(engine, ui);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImVec2 size = ImGui::GetContentRegionAvail();
  ui.serving.view_w = 0;
  ui.serving.view_hovered = ui.serving.folded = false;
  if (!run || run->steps.empty()) {
    ImGui::TextDisabled("%s", engine.serving.busy ? "computing the first step..." : "choose a preset");
    return;
  }
  ServeSceneInput in;
  in.requests = &run->info->requests;
  in.config = run->info->config;
  in.block = run->info->block;
  in.steps = &run->steps;
  in.shown = shown_index(*run, ui);
  if (engine.serving.runs.size() > 1)  // static vs continuous: both runs' step counts above the one drawn
    for (const ServeRun& r : engine.serving.runs)
      in.caption.push_back(std::string(to_string(r.info->config.policy)) + ": " + std::to_string(r.steps.size()) +
                           (r.done ? " steps" : " steps so far"));
  const Tokenizer& tok = run->info->model->tokenizer;
  in.token_text = [&tok](int t) { return tok.display_piece(t); };
  const ServeScene sc = build_serve_scene(in, view_options(engine, ui, *run, in.shown, size));
  // The lanes, pool and plot: all of the canvas but the 3D view under them.
  const ImVec2 top(size.x, sc.view_size.y > 0 ? std::max(1.0f, sc.view_pos.y) : size.y);
  ImGui::InvisibleButton("##serve_canvas", top);
  const bool clicked = ImGui::IsItemClicked(), hovered = ImGui::IsItemHovered();
  view_3d(sc, o, ui);
  draw_scene(sc, o, ImGui::GetWindowDrawList());
  if (!hovered) return;
  const ImVec2 m = ImGui::GetIO().MousePos;
  for (auto it = sc.rects.rbegin(); it != sc.rects.rend(); ++it) {
    if (m.x < o.x + it->pos.x || m.y < o.y + it->pos.y || m.x > o.x + it->pos.x + it->size.x ||
        m.y > o.y + it->pos.y + it->size.y)
      continue;
    if (it->block >= 0)
      block_tooltip(*run, *run->steps[static_cast<size_t>(in.shown)], it->block,
                    sc.blocks[static_cast<size_t>(it->block)]);
    if (it->tile) lane_tooltip(*run, sc.lanes.at(static_cast<size_t>(it->lane)));
    if (clicked && it->lane >= 0) ui.serving.selected = ui.serving.selected == it->lane ? -1 : it->lane;
    if (it->lane >= 0 || it->block >= 0) break;
  }
}

}  // namespace

Commands panel_serving(const EngineState& engine, UiState& ui) {
  Commands cmds;
  const ImVec2 ds = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(0, 0), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ds, ImGuiCond_Always);
  // Its background is painted below (opaque: the 3D view's text layer stays
  // behind it), all but the selected request's 3D view.
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                 ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus |
                                 ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoBackground;
  if (ImGui::Begin("Serving", nullptr, flags)) {
    const float side = std::clamp(260.0f * ui.text_scale, std::min(240.0f, ds.x * 0.3f), ds.x * 0.34f);
    if (ImGui::BeginChild("##serve_controls", ImVec2(side, 0))) controls(engine, ui, cmds);
    ImGui::EndChild();
    ImGui::SameLine();
    if (ImGui::BeginChild("##serve_canvas_child", ImVec2(0, 0), false,
                          ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse))
      canvas(engine, ui);
    ImGui::EndChild();
    // (the window's own draw list is drawn before its children's)
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec4 bg = ImGui::GetStyleColorVec4(ImGuiCol_WindowBg);
    bg.w = 1.0f;
    const ImU32 bgc = ImGui::ColorConvertFloat4ToU32(bg);
    const UiState::Serving& sv = ui.serving;
    if (sv.view_w <= 0) {
      dl->AddRectFilled(ImVec2(0, 0), ds, bgc);
    } else {  // around the 3D view: above it, left of it and right of it
      dl->AddRectFilled(ImVec2(0, 0), ImVec2(ds.x, sv.view_y), bgc);
      dl->AddRectFilled(ImVec2(0, sv.view_y), ImVec2(sv.view_x, ds.y), bgc);
      dl->AddRectFilled(ImVec2(sv.view_x + sv.view_w, sv.view_y), ds, bgc);
    }
  }
  ImGui::End();
  return cmds;
}

}  // namespace kvscope
