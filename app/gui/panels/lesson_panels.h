// The teaching panels (timeline, branches, sampling made visible,
// prefill vs decode, KV memory at real scale, attention overview,
// presentation HUD). Like panels.h: functions of (EngineState, UiState) that
// draw ImGui widgets and return commands. The heatmap grid and the
// presentation HUD draw onto a plain ImDrawList so the headless renderer
// (`kvscope render --heatmaps / --presentation`) draws the same picture.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/gui/panels/panels.h"
#include "app/session/state.h"
#include "render/overlay/overlay.h"

namespace kvscope {

// The timeline's row: back/forward buttons, the slider and the shown step,
// leaving `reserve` (window units) at the row's end for the caller's widget.
// The step's tooltip carries the history line.
Commands panel_timeline(const EngineState& engine, UiState& ui, float reserve = 0);
// The history's memory (its bytes, the budget, what was trimmed): in full,
// and in brief for a narrow strip.
struct HistoryText {
  std::string full, brief;
  bool trimmed = false;
};
HistoryText history_text(const EngineState& engine);
// The tree of explored branches (text, probability), FLOPs saved by forking on the cache.
Commands panel_branches(const EngineState& engine, UiState& ui);
// Prefill vs decode, measured from the shown step's records.
Commands panel_phases(const EngineState& engine, UiState& ui);
// KV memory at real scale: the published configs, a context slider up to 1M, cache dtype.
Commands panel_kv_calculator(const EngineState& engine, UiState& ui);
// The (layer, head) attention heatmap grid; clicking one selects it for the beams.
Commands panel_heatmaps(const EngineState& engine, UiState& ui);

// What is under the mouse in the heatmap grid.
struct HeatmapHit {
  int layer = -1, head = -1;  // the cell
  int query = -1, key = -1;   // the bin's first query / key position (-1: outside the matrix)
  float weight = 0;           // the largest weight in the bin
  bool known = false;         // the query row's attention is held
};

// One small heatmap per (layer, head): the causal attention matrix of the
// sequence up to `step`, each row taken from the record that computed that
// query (prefill rows from the prefill), binned to at most `max_bins` per
// side (a bin shows its largest weight; brightness = sqrt(weight)). The
// shown step's query row is outlined; the selected layer/head is framed.
// `mouse` outside the rectangle = no hover. Returns the hovered cell. `memo`
// keeps the binned matrix while the step shown stays the same.
HeatmapHit draw_heatmap_grid(ImDrawList* dl, ImVec2 p0, ImVec2 size, const std::vector<RecordPtr>& records, int step,
                             int sel_layer, int sel_head, ImVec2 mouse, const ImFont* font, float font_size,
                             const Palette& pal, PanelMemo::Heat& memo);

// The presentation-mode HUD: model, step, mode, counters, the top candidates
// (hidden when predicting), and the keys.
struct HudInfo {
  std::string model_name;
  int step = -1, n_steps = 0;
  const StepRecord* record = nullptr;
  std::vector<std::string> top_pieces;  // visible pieces of record->top (same order)
  bool hidden = false;                  // predict mode: token and bars hidden until Enter
  bool live = true;                     // the shown step is the newest
  Palette palette = palette_for(false);
};
// Draws in [origin, origin + size): the card in a right column `card_w`
// wide, the strip in the bottom `strip_h` pixels; the 3D view goes in the rest.
void draw_presentation_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud);
// The room the HUD takes in a view of `size`: the card in a right column
// (fit_hud_card: its rows keep their size where the column has room), the
// strip's text shrinks (k < 1) to fit the width at any text scale.
struct HudGeometry {
  float card_w = 0;                  // right column, with the card's margin
  float title_k = 1, rows_k = 1;     // the card's headline and rows
  float piece_w = 0, percent_w = 0;  // the rows' columns at full size
  float strip_h = 0, strip_k = 1;    // bottom strip
};
HudGeometry presentation_hud_geometry(ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud);

}  // namespace kvscope
