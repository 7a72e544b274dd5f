#include "app/gui/layout.h"

#include <imgui.h>

#include <algorithm>

#include "app/gui/panels/lesson_panels.h"
#include "app/gui/panels/panels.h"
#include "app/platform/user_files.h"
#include "app/session/fitting.h"

namespace kvscope {

namespace {

constexpr ImGuiWindowFlags kDocked = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse |
                                     ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoBringToFrontOnFocus;

void append(Commands& to, Commands more) {
  to.insert(to.end(), more.begin(), more.end());
}

// A folded sidebar's strip as the fitting rules count it: the frame height
// and the window paddings, at this text scale. What decides which panels
// fold (fold_to_fit) counts this, so a sidebar that would be too narrow to
// read beside it folds as before.
float folded_width() {
  return ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().WindowPadding.x;
}

// The strip as drawn: the arrow with a thin margin. At a large text scale
// the scaled paddings would make two strips take half of a phone's width;
// the strip keeps the width above or the arrow's own (at least 36 px),
// whichever is narrower, and the 3D view gets the rest.
constexpr float kFoldedPad = 3.0f;  // the strip's window padding and the button's side padding, pixels
float folded_strip_width() {
  const float narrow = ImGui::CalcTextSize("\xE2\x96\xB6").x + 4 * kFoldedPad;
  return std::min(folded_width(), std::max(narrow, 36.0f));
}

// The bottom strip's height: the timeline row, and (`full`) a row with the
// lessons button and the history line, or with the lessons open their share
// of the window: 40 %, or at a large text scale up to half of it for the
// timeline, the tabs and four lines of the lesson.
float bottom_height(bool lessons, bool full, float H) {
  if (lessons) {
    const float want = 2 * ImGui::GetFrameHeightWithSpacing() + 4 * ImGui::GetTextLineHeightWithSpacing() +
                       2 * ImGui::GetStyle().WindowPadding.y;
    return std::clamp(std::max(H * 0.4f, want), std::min(200.0f, H * 0.5f), std::min(480.0f, H * 0.5f));
  }
  return ImGui::GetFrameHeightWithSpacing() + (full ? ImGui::GetTextLineHeightWithSpacing() : 0.0f) +
         2 * ImGui::GetStyle().WindowPadding.y;
}

// A folded sidebar: a strip with one button that opens it again.
float folded_strip(const char* id, const char* arrow, float x, float H, bool& open) {
  const float w = folded_strip_width();
  ImGui::SetNextWindowPos(ImVec2(x, 0), ImGuiCond_Always, ImVec2(x > 0 ? 1.0f : 0.0f, 0));
  ImGui::SetNextWindowSize(ImVec2(w, H), ImGuiCond_Always);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowMinSize, ImVec2(1, 1));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(std::min(kFoldedPad, ImGui::GetStyle().WindowPadding.x),
                                                          ImGui::GetStyle().WindowPadding.y));
  if (ImGui::Begin(id, nullptr, kDocked | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoScrollbar)) {
    ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, ImVec2(std::min(kFoldedPad, ImGui::GetStyle().FramePadding.x),
                                                           ImGui::GetStyle().FramePadding.y));
    if (ImGui::Button(arrow, ImVec2(-1, ImGui::GetFrameHeight() * 2))) open = true;
    ImGui::PopStyleVar();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("show the panels");
  }
  ImGui::End();
  ImGui::PopStyleVar(2);
  return w;
}

// The fold button at the top of an open sidebar.
void fold_button(const char* label, bool& open) {
  if (ImGui::SmallButton(label)) open = false;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("fold this sidebar (more room for the 3D view)");
}

// A sidebar's width: what its text wants at this scale, up to 27 % of the
// window, or beside a folded one (`alone`) up to 33 % while the 3D view keeps
// its half.
float sidebar_width(const UiState& ui, float W, bool alone) {
  const float lo = std::min(240.0f, W * 0.3f);
  const float cap = alone ? std::min(W * 0.33f, W * (1 - kMinViewWidthShare) - folded_width()) : W * 0.27f;
  return std::clamp(290.0f * ui.text_scale, lo, std::max(lo, cap));
}

// The page's two ways to a model of one's own, at the sidebar's top where a
// first-time visitor looks (corner buttons over the canvas covered the
// timeline): the browser's folder picker, and a model by its hub id.
void page_model_buttons(const EngineState& engine, Commands& cmds) {
  const char* open = "Open model\xE2\x80\xA6";
  const char* hub = "From the hub\xE2\x80\xA6";
  const ImGuiStyle& st = ImGui::GetStyle();
  const float half = (ImGui::GetContentRegionAvail().x - st.ItemSpacing.x) / 2;
  // Side by side where both labels fit whole, else one under the other (a phone's narrow sidebar).
  const bool side_by_side =
      std::max(ImGui::CalcTextSize(open).x, ImGui::CalcTextSize(hub).x) + 2 * st.FramePadding.x <= half;
  const float w = side_by_side ? half : -1;
  const float label = (side_by_side ? half : ImGui::GetContentRegionAvail().x) - 2 * st.FramePadding.x;
  ImGui::BeginDisabled(engine.loading_model);
  if (ImGui::Button(fit_text(open, label).c_str(), ImVec2(w, 0))) ask_user_for_model_folder();
  hover_help("Open a GPT-2 or Llama-family model folder (or drop one onto the page).");
  if (side_by_side) ImGui::SameLine();
  if (ImGui::Button(fit_text(hub, label).c_str(), ImVec2(-1, 0))) ask_user_for_hub_model();
  hover_help("Fetch a model from the Hugging Face hub by its id (kept in the browser for the next visit).");
  ImGui::EndDisabled();
  model_load_progress(engine, cmds);
}

float left_sidebar(const EngineState& engine, UiState& ui, float W, float H, Commands& cmds) {
  if (!ui.left_open) return folded_strip("##left_folded", "\xE2\x96\xB6", 0, H, ui.left_open);
  ImGui::SetNextWindowPos(ImVec2(0, 0), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(sidebar_width(ui, W, !ui.right_open), H), ImGuiCond_Always);
  float w = 0;
  if (ImGui::Begin("Generation", nullptr, kDocked | ImGuiWindowFlags_NoResize)) {
    fold_button("\xE2\x97\x80 fold", ui.left_open);
    if (kFilesThroughBrowser) page_model_buttons(engine, cmds);
    if (ImGui::Button(fit_text("Serving: many requests \xE2\x96\xB6", ImGui::GetContentRegionAvail().x).c_str(),
                      ImVec2(-1, 0)))
      cmds.push_back(cmd::ServeOpen{true});
    hover_help(
        "Many requests served from one paged KV pool by the loaded model: continuous batching, prefix "
        "caching, preemption (the Serving view, over the whole window).");
    if (ImGui::Button(fit_text("Chat: a conversation \xE2\x96\xB6", ImGui::GetContentRegionAvail().x).c_str(),
                      ImVec2(-1, 0)))
      cmds.push_back(cmd::ChatOpen{true});
    hover_help(
        "Talk to the loaded model through its chat template: every turn re-reads the whole conversation, and the "
        "KV cache keeps what it has read (the chat view: messages beside the conversation's 3D view).");
    if (ImGui::CollapsingHeader("Prompt", ImGuiTreeNodeFlags_DefaultOpen)) append(cmds, panel_prompt(engine, ui));
    if (ImGui::CollapsingHeader("Playback", ImGuiTreeNodeFlags_DefaultOpen)) append(cmds, panel_playback(engine, ui));
    if (!is_sampling(engine.strategy)) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
    if (ImGui::CollapsingHeader("Decoding")) append(cmds, panel_decoding(engine, ui));
    if (ImGui::CollapsingHeader(header_label("Cache & compute", "Cache").c_str(), ImGuiTreeNodeFlags_DefaultOpen))
      append(cmds, panel_cache(engine, ui));
  }
  w = ImGui::GetWindowWidth();
  ImGui::End();
  return w;
}

// A sidebar's section. Opened by a click or from elsewhere (`focus`, e.g. a
// demo view) it scrolls to the sidebar's top: at a large text scale it
// would open at the window's bottom edge with its numbers below it.
bool section(const char* label, bool& focus, ImGuiTreeNodeFlags flags = 0) {
  if (focus) ImGui::SetNextItemOpen(true, ImGuiCond_Always);
  const bool open = ImGui::CollapsingHeader(label, flags);
  if (focus || (open && ImGui::IsItemToggledOpen())) ImGui::SetScrollHereY(0.0f);
  focus = false;
  return open;
}

float right_sidebar(const EngineState& engine, UiState& ui, float W, float H, Commands& cmds) {
  if (!ui.right_open) return folded_strip("##right_folded", "\xE2\x97\x80", W, H, ui.right_open);
  ImGui::SetNextWindowPos(ImVec2(W, 0), ImGuiCond_Always, ImVec2(1, 0));
  ImGui::SetNextWindowSize(ImVec2(sidebar_width(ui, W, !ui.left_open), H), ImGuiCond_Always);
  float w = 0;
  if (ImGui::Begin("Inspect", nullptr, kDocked | ImGuiWindowFlags_NoResize)) {
    fold_button("fold \xE2\x96\xB6", ui.right_open);
    // Without a model the Model panel is what is needed: first, and open.
    const bool no_model = !engine.model && !engine.loading_model;
    if (no_model) {
      ImGui::SetNextItemOpen(true, ImGuiCond_Always);
      if (ImGui::CollapsingHeader("Model")) append(cmds, panel_model(engine, ui));
    }
    if (ImGui::CollapsingHeader("Attention", ImGuiTreeNodeFlags_DefaultOpen)) append(cmds, panel_attention(engine, ui));
    if (section(header_label("Q\xC2\xB7K\xC2\xB7V inspector", "Q\xC2\xB7K\xC2\xB7V").c_str(), ui.qkv_open))
      append(cmds, panel_qkv(engine, ui));
    if (section("Next token", ui.next_token_open, ImGuiTreeNodeFlags_DefaultOpen))
      append(cmds, panel_next_token(engine, ui));
    if (ImGui::CollapsingHeader("View", ImGuiTreeNodeFlags_DefaultOpen)) append(cmds, panel_view(engine, ui));
    if (!no_model && section("Model", ui.model_open)) append(cmds, panel_model(engine, ui));
  }
  w = ImGui::GetWindowWidth();
  ImGui::End();
  return w;
}

// The lessons under the timeline: tabs named in full where they fit, else in
// brief (the full name in a tooltip), else a menu (fit_tabs); the last item
// of the row hides them. Only the lesson below scrolls.
struct Lesson {
  const char* name;
  const char* brief;
  int tab;  // UiState::bottom_tab; -1 = beam search or speculative decoding
};

std::vector<Lesson> lessons_shown(const EngineState& engine) {
  // Beam search and speculative decoding keep records of their own: their
  // lesson replaces the lessons read from one sequence's records.
  std::vector<Lesson> out;
  if (is_beam(engine.strategy)) out.push_back({"Beam search", "Beams", -1});
  if (is_speculative(engine.strategy)) out.push_back({"Speculative decoding", "Speculative", -1});
  const Lesson all[] = {{"Branches", "Forks", 0},
                        {"Prefill vs decode", "Prefill", 1},
                        {"KV memory", "KV", 2},
                        {"Attention heads", "Heads", 3},
                        {"Training", "Train", 4}};
  const bool decoding = !out.empty();
  for (const Lesson& l : all)
    if (!decoding || l.tab == 2 || l.tab == 4) out.push_back(l);
  return out;
}

void lesson_body(const EngineState& engine, UiState& ui, int tab, Commands& cmds) {
  if (!ImGui::BeginChild("##lesson", ImVec2(0, 0))) {
    ImGui::EndChild();
    return;
  }
  if (tab < 0) append(cmds, panel_decode_lesson(engine, ui));
  if (tab == 0) append(cmds, panel_branches(engine, ui));
  if (tab == 1) append(cmds, panel_phases(engine, ui));
  if (tab == 2) append(cmds, panel_kv_calculator(engine, ui));
  if (tab == 3) append(cmds, panel_heatmaps(engine, ui));
  if (tab == 4) append(cmds, panel_training(engine, ui));
  ImGui::EndChild();
}

// The button that hides the lessons: an arrow towards where they go.
const char* hide_arrow(const UiState& ui) {
  return ui.panel_fit.lessons_side ? "\xE2\x96\xB6" : "\xE2\x96\xBC";
}

void lessons_menu(const EngineState& engine, UiState& ui, const std::vector<Lesson>& lessons, float hide_w,
                  Commands& cmds) {
  const auto current = std::find_if(lessons.begin(), lessons.end(), [&](const Lesson& l) {
    return l.tab == ui.bottom_tab || (l.tab < 0 && ui.bottom_tab != 2 && ui.bottom_tab != 4);
  });
  const Lesson shown = current != lessons.end() ? *current : lessons.front();
  const float menu_w = ImGui::GetContentRegionAvail().x - hide_w - ImGui::GetStyle().ItemSpacing.x;
  ImGui::SetNextItemWidth(menu_w);
  // The menu's own text: the lesson's full name where it fits beside the arrow, else its brief one.
  const float text_w = menu_w - ImGui::GetFrameHeight() - 2 * ImGui::GetStyle().FramePadding.x;
  if (ImGui::BeginCombo("##lesson_menu", ImGui::CalcTextSize(shown.name).x <= text_w ? shown.name : shown.brief)) {
    for (const Lesson& l : lessons)
      if (ImGui::Selectable(l.name, l.tab == shown.tab)) ui.bottom_tab = std::max(0, l.tab);
    ImGui::EndCombo();
  }
  ui.select_tab = false;
  ImGui::SameLine();
  if (ImGui::Button((std::string(hide_arrow(ui)) + "##hide_lessons").c_str(), ImVec2(hide_w, 0))) ui.teach_open = false;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("hide the lessons");
  lesson_body(engine, ui, shown.tab, cmds);
}

void teach_tabs(const EngineState& engine, UiState& ui, Commands& cmds) {
  const std::vector<Lesson> lessons = lessons_shown(engine);
  const ImGuiStyle& st = ImGui::GetStyle();
  auto tab_w = [&](const char* t) { return ImGui::CalcTextSize(t).x + 2 * st.FramePadding.x; };
  const float hide_w = tab_w(hide_arrow(ui));
  std::vector<float> full, brief;
  for (const Lesson& l : lessons) full.push_back(tab_w(l.name)), brief.push_back(tab_w(l.brief));
  const TabLabels labels =
      fit_tabs(full, brief, st.ItemInnerSpacing.x, ImGui::GetContentRegionAvail().x - hide_w - st.ItemInnerSpacing.x);
  if (labels == TabLabels::kMenu) {
    lessons_menu(engine, ui, lessons, hide_w, cmds);
    return;
  }
  if (!ImGui::BeginTabBar("teach_tabs")) return;
  for (const Lesson& l : lessons) {
    const ImGuiTabItemFlags f = ui.select_tab && ui.bottom_tab == l.tab ? ImGuiTabItemFlags_SetSelected : 0;
    const std::string label = std::string(labels == TabLabels::kFull ? l.name : l.brief) + "###" + l.name;
    const bool open = ImGui::BeginTabItem(label.c_str(), nullptr, f);
    if (labels == TabLabels::kBrief && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", l.name);
    if (!open) continue;
    if (!ui.select_tab) ui.bottom_tab = std::max(0, l.tab);
    lesson_body(engine, ui, l.tab, cmds);
    ImGui::EndTabItem();
  }
  if (ImGui::TabItemButton(hide_arrow(ui), ImGuiTabItemFlags_Trailing)) ui.teach_open = false;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%s",
                      ("hide the lessons" + (ui.panel_fit.note.empty() ? "" : "\n\n" + ui.panel_fit.note)).c_str());
  ui.select_tab = false;
  ImGui::EndTabBar();
}

const char* lessons_label(const EngineState& engine) {
  return is_beam(engine.strategy) ? "\xE2\x96\xB2 lessons: beam search, KV memory, training"
         : is_speculative(engine.strategy)
             ? "\xE2\x96\xB2 lessons: speculative decoding, KV memory, training"
             : "\xE2\x96\xB2 lessons: branches, prefill vs decode, KV memory, heads, training";
}

float small_button_width(const char* label) {
  return ImGui::CalcTextSize(label, nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x;
}

// The lessons button; its tooltip lists them and says what folded by itself.
void lessons_button(const EngineState& engine, UiState& ui, const char* label) {
  if (ImGui::SmallButton(label)) ui.teach_open = !ui.teach_open;
  if (!ImGui::IsItemHovered()) return;
  const std::string help = std::string(ui.teach_open ? "hide the lessons" : lessons_label(engine) + 4) +
                           (ui.panel_fit.note.empty() ? "" : "\n\n" + ui.panel_fit.note);
  hover_help(help.c_str());
}

// The strip's second row while the lessons are closed: their button,
// "(folded to fit)" and the history line, each as full as the width allows
// (fit_row).
void strip_second_row(const EngineState& engine, UiState& ui) {
  const HistoryText hist = history_text(engine);
  const char* lessons[] = {lessons_label(engine), "\xE2\x96\xB2 lessons", "\xE2\x96\xB2"};
  const char* marks[] = {"(folded to fit)", "(folded)"};
  const bool folded = !ui.panel_fit.note.empty();
  auto text_w = [](const std::string& t) { return ImGui::CalcTextSize(t.c_str()).x; };
  const std::vector<std::vector<float>> widths = {
      {small_button_width(lessons[0]), small_button_width(lessons[1]), small_button_width(lessons[2])},
      folded ? std::vector<float>{text_w(marks[0]), text_w(marks[1])} : std::vector<float>{},
      {text_w(hist.full), text_w(hist.brief)}};
  const std::vector<int> pick =
      fit_row(widths, ImGui::GetStyle().ItemSpacing.x, ImGui::GetContentRegionAvail().x, {2, 0, 1});
  lessons_button(engine, ui, lessons[pick[0]]);
  if (folded) {
    ImGui::SameLine();
    ImGui::TextDisabled("%s", fit_text(marks[pick[1]], ImGui::GetContentRegionAvail().x).c_str());
    hover_help(ui.panel_fit.note.c_str());
  }
  ImGui::SameLine();
  const std::string shown = fit_text(pick[2] == 0 ? hist.full : hist.brief, ImGui::GetContentRegionAvail().x);
  ImGui::TextColored(hist.trimmed ? ImVec4(1.0f, 0.8f, 0.4f, 1) : ImGui::GetStyle().Colors[ImGuiCol_TextDisabled], "%s",
                     shown.c_str());
  if (shown != hist.full) hover_help(hist.full.c_str());
}

// Between the sidebars, under the 3D view: the timeline, and the teaching
// tabs when opened (the history line then in the step counter's tooltip).
// Where the picture is short (fit_panels) the strip keeps the timeline row
// alone, with the lessons button at its end. Returns its height.
float bottom_strip(const EngineState& engine, UiState& ui, float x, float w, float H, Commands& cmds) {
  const bool full = !ui.teach_open && ui.panel_fit.full_strip;
  const bool lessons_here = ui.teach_open && !ui.panel_fit.lessons_side;
  const float h = bottom_height(lessons_here, full, H);
  ImGui::SetNextWindowPos(ImVec2(x, H - h), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(std::max(100.0f, w), h), ImGuiCond_Always);
  if (ImGui::Begin("Teach", nullptr, kDocked | ImGuiWindowFlags_NoResize)) {
    // The compact strip's lessons button: named while the slider keeps a third of the row, else an arrow.
    const float row = ImGui::GetContentRegionAvail().x, named = small_button_width("\xE2\x96\xB2 lessons");
    const char* up = row - named - 2 * ImGui::GetFrameHeight() * 1.6f - ImGui::CalcTextSize("00 / 00 LIVE").x > row / 3
                         ? "\xE2\x96\xB2 lessons"
                         : "\xE2\x96\xB2";
    const bool button = !full && !ui.teach_open;
    append(cmds, panel_timeline(engine, ui, button ? small_button_width(up) + ImGui::GetStyle().ItemSpacing.x : 0.0f));
    if (full) strip_second_row(engine, ui);
    if (button) {
      ImGui::SameLine();
      lessons_button(engine, ui, up);
    }
    if (lessons_here) teach_tabs(engine, ui, cmds);
  }
  ImGui::End();
  return h;
}

// The lessons in a column left of the right sidebar (open or folded) from
// the window's top to its bottom, where fit_panels put them beside the view.
// Returns its width (0 = the lessons are not there).
float lessons_column(const EngineState& engine, UiState& ui, float W, float right_x, float H, Commands& cmds) {
  if (!ui.teach_open || !ui.panel_fit.lessons_side) return 0;
  const float w = sidebar_width(ui, W, true);
  ImGui::SetNextWindowPos(ImVec2(right_x, 0), ImGuiCond_Always, ImVec2(1, 0));
  ImGui::SetNextWindowSize(ImVec2(w, H), ImGuiCond_Always);
  if (ImGui::Begin("Lessons", nullptr, kDocked | ImGuiWindowFlags_NoResize)) teach_tabs(engine, ui, cmds);
  ImGui::End();
  return w;
}

// The one place panels fold by themselves: when the window's size or text
// scale changes, the view's banner and legend grow (a model loads, a layout
// adds entries) or the lessons open, fit_panels folds what would crowd the
// 3D view (and may put the lessons beside it). When the lessons close, the
// sidebars folded by fitting open again and fit_panels folds what this size
// still needs. The user's clicks after that stand until the next change.
void fold_to_fit(UiState& ui, float W, float H) {
  UiState::PanelFit& f = ui.panel_fit;
  const bool resized = f.w != W || f.h != H || f.text_scale != ui.text_scale || ui.view_text_h > 1.25f * f.view_text;
  const bool lessons_opened = ui.teach_open && !f.lessons, lessons_closed = !ui.teach_open && f.lessons;
  const PanelsOpen before{ui.left_open, ui.right_open, ui.teach_open, f.full_strip, ui.teach_open && f.lessons_side};
  const FitFolded was{f.left, f.right, f.lessons_folded, f.history};
  PanelsOpen open = before;
  if ((resized && ui.view_text_h > 0) || lessons_opened || lessons_closed) {
    open.full_strip = resized || f.full_strip;  // the strip's second row is the layout's own: a new size shows it first
    const PanelRoom room{W,
                         H,
                         sidebar_width(ui, W, false),
                         folded_width(),
                         bottom_height(false, true, H),
                         bottom_height(true, true, H),
                         ui.view_text_h,
                         sidebar_width(ui, W, true),
                         bottom_height(false, false, H),
                         sidebar_width(ui, W, true)};
    const std::string note =
        lessons_closed ? fit_lessons_closed(room, open, was) : fit_panels(room, open, lessons_opened);
    if (!note.empty() && !lessons_closed) ui.status = note;
    ui.left_open = open.left;
    ui.right_open = open.right;
    ui.teach_open = open.lessons;
    f.full_strip = open.full_strip;
    f.lessons_side = open.lessons_side;
    if (ui.view_text_h > 0) f.w = W, f.h = H, f.text_scale = ui.text_scale, f.view_text = ui.view_text_h;
  }
  const FitFolded now = track_fit_folded(was, before, open);
  f.left = now.left, f.right = now.right, f.lessons_folded = now.lessons, f.history = now.history;
  f.note = fit_folded_note(now);
  f.lessons = ui.teach_open;
}

// The chat view: its column on the left (what its text wants at this scale,
// between 30 % and half of the window), the conversation's 3D view beside it.
ViewRect chat_column(const EngineState& engine, UiState& ui, float W, float H, Commands& cmds) {
  const float w = std::clamp(380.0f * ui.text_scale, std::min(300.0f, W * 0.3f), W * 0.5f);
  ImGui::SetNextWindowPos(ImVec2(0, 0), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(w, H), ImGuiCond_Always);
  if (ImGui::Begin("Chat", nullptr, kDocked | ImGuiWindowFlags_NoResize)) append(cmds, panel_chat(engine, ui));
  ImGui::End();
  return ViewRect{w, 0, std::max(1.0f, W - w), std::max(1.0f, H)};
}

}  // namespace

ViewRect layout_panels(const EngineState& engine, UiState& ui, float W, float H, Commands& cmds) {
  ViewRect r{0, 0, std::max(1.0f, W), std::max(1.0f, H)};
  if (ui.chat.open && W > 0) return chat_column(engine, ui, W, H, cmds);
  if (ui.serving.open) {  // the Serving view takes the window, but for the selected request's 3D view
    append(cmds, panel_serving(engine, ui));
    if (ui.serving.view_w > 0)
      r = ViewRect{ui.serving.view_x, ui.serving.view_y, std::max(1.0f, ui.serving.view_w),
                   std::max(1.0f, ui.serving.view_h)};
    return r;
  }
  if (!ui.show_panels || W <= 0) return r;
  fold_to_fit(ui, W, H);
  const float left = left_sidebar(engine, ui, W, H, cmds);
  const float right = right_sidebar(engine, ui, W, H, cmds);
  const float column = lessons_column(engine, ui, W, W - right, H, cmds);
  const float bottom = bottom_strip(engine, ui, left, W - left - right - column, H, cmds);
  r.x = left;
  r.w = std::max(1.0f, W - left - right - column);
  r.h = std::max(1.0f, H - bottom);
  return r;
}

}  // namespace kvscope
