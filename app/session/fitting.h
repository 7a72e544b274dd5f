// The user's choices that outlive a moment (settings.json, a saved view, the
// command line, the previous model) fitted to their ranges and to the model
// that is loaded. Every path that restores or keeps them goes through
// fit_choices: the settings reader (no model yet: ranges only), a view
// restore and every model load or switch (a smaller model re-clamps what a
// larger one allowed). A value brought back is named in the notes: the file,
// the field, what it was and what it became.
#pragma once

#include <string>
#include <vector>

#include "app/session/state.h"
#include "app/session/text_scale.h"
#include "model/decoding/generator.h"
#include "model/decoding/setting_ranges.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

// Ranges of the restored choices (the panels' controls stay inside them).
namespace ui_range {
inline constexpr float kSpeedMin = 0.25f, kSpeedMax = 8.0f;  // tokens per second
// The sampling sliders' extents: a teaching part of each setting's one range
// (model/decoding/setting_ranges.h), which the CLI accepts in full.
inline constexpr float kTemperatureMin = 0.05f, kTemperatureMax = 2.0f;
inline constexpr float kTopPMin = 0.05f, kTopPMax = 1.0f;
inline constexpr float kPenaltyMin = 1.0f, kPenaltyMax = 2.0f;
static_assert(setting::kTemperature.contains(kTemperatureMin) && setting::kTemperature.contains(kTemperatureMax));
static_assert(setting::kTopP.contains(kTopPMin) && setting::kTopP.contains(kTopPMax));
static_assert(setting::kRepetitionPenalty.contains(kPenaltyMin) && setting::kRepetitionPenalty.contains(kPenaltyMax));
inline constexpr int kTopKMax = 100000;  // without a model; with one, its vocabulary
inline constexpr float kMinWeightMax = 1.0f;
inline constexpr int kMaxNewMax = kMaxNewLimit;  // without a model; with one, its context
inline constexpr int kKvContextMax = 1 << 20;
inline constexpr int kKvDtypes = 4;          // the KV calculator's formats: all_kv_dtypes(), f32 f16 q8_0 q4_0
inline constexpr int kBottomTabs = 5;        // branches, phases, KV memory, attention heads, training
inline constexpr int kHeadsMax = 4096;       // layers and heads without a model
inline constexpr size_t kTextMax = 1 << 16;  // bytes of a restored prompt or path
// The window (settings.json): its size, and a position on some monitor (-1 = centred).
inline constexpr int kWindowWMin = 640, kWindowHMin = 400, kWindowSideMax = 16384;
inline constexpr int kWindowPosMin = -32768, kWindowPosMax = 32767;
// A saved view's free camera: what the mouse can reach (scene_camera.cpp).
inline constexpr float kCamDistanceMin = 0.5f, kCamDistanceMax = 5000.0f;
inline constexpr float kCamPitchMax = 1.55f;                  // radians, up or down
inline constexpr float kCamYawMax = 1000.0f;                  // radians either way (a turn is 2 pi)
inline constexpr float kCamTargetMax = 1e5f;                  // world units from the origin, per axis
inline constexpr float kCamFovMin = 0.1f, kCamFovMax = 2.5f;  // radians
}  // namespace ui_range

// Positions per layer a rule of eviction by score starts with when chosen
// without a budget (the Cache panel, the page's kv_layout command).
inline constexpr int kEvictBudgetStart = 16;

struct WindowSettings;  // app/session/settings.h
struct SavedCamera;     // app/session/saved_view.h

struct FitContext {
  const Model* model = nullptr;  // null before one is loaded: ranges only
  std::string origin;            // the file the values came from ("" = kept across a model switch)
};

// Fits every restored choice of `ui` (and `pending_step`, a saved view's
// timeline step, when given) into its range and the model. Returns one
// note per value changed, e.g. "view.json: layer 11 is not in gpt2-tiny
// (4 layers, 0..3); showing the mean over layers". Never throws.
std::vector<std::string> fit_choices(UiState& ui, const FitContext& ctx, int* pending_step = nullptr);
// The window's size and position as restored (fit_window then fits them to
// the monitor's work area when the window opens). Notes as above.
std::vector<std::string> fit_window_settings(WindowSettings& w, const FitContext& ctx);
// A saved view's free camera, inside what the camera controls reach.
std::vector<std::string> fit_camera(SavedCamera& c, const FitContext& ctx);

// What the panels take from a W x H window (window units), and the 3D view's
// own text, as the layout measured them.
struct PanelRoom {
  float W = 0, H = 0;
  float sidebar = 0, folded = 0;  // an open / a folded sidebar's width
  float strip = 0, lessons = 0;   // the bottom strip's height: lessons folded / open
  float view_text = 0;            // the view's banner and legend bands (height)
  float alone = 0;                // an open sidebar's width beside a folded one (0 = `sidebar`)
  float compact = 0;              // the strip's height as the timeline row alone (0 = no such strip)
  float column = 0;               // the lessons' width in a column beside the view (0 = never there)
};
struct PanelsOpen {
  bool left = true, right = true, lessons = false;
  bool full_strip = true;     // the strip's second row: the lessons button and the history line
  bool lessons_side = false;  // the open lessons in a column beside the view, not under it
};
// The 3D view keeps half the window's width, and its picture (the view less
// its banner and legend) this share of the height, where folding helps.
inline constexpr float kMinViewWidthShare = 0.5f, kMinPictureShare = 0.35f;
// Below this share of the height the picture also takes the bottom strip's
// second row: the strip keeps the timeline row, with the lessons button at
// its end and the history line in a tooltip.
inline constexpr float kRoomyPictureShare = 0.5f;
// Folds what crowds the 3D view. For height: open lessons that would leave
// the picture short under the view move to a column beside it (`column`, where
// the view keeps its half of the width beside two folded sidebars), else they
// fold (or, when the user just opened them, `lessons_kept`, the right sidebar
// folds: a wider view wraps its text into fewer rows); then the strip's
// second row. For width the right sidebar, then the left (a sidebar left
// alone takes `alone`). Returns a note naming what folded now ("" = nothing).
std::string fit_panels(const PanelRoom& r, PanelsOpen& open, bool lessons_kept);

// What fitting folded and is still folded: the "(folded to fit)" mark and
// its note stand while any of these stays folded, whenever it was folded.
struct FitFolded {
  bool left = false, right = false, lessons = false, history = false;
};
// `was` updated for a frame whose panels went from `before` (as the user
// left them) to `after` (as fit_panels left them; = before where no fitting
// ran): what fitting folded joins, what is open again (a click, a new fit)
// leaves.
FitFolded track_fit_folded(FitFolded was, const PanelsOpen& before, const PanelsOpen& after);
// When the lessons close: the sidebars that `folded` names open again, then
// fit_panels folds what the window still needs. Returns its note.
std::string fit_lessons_closed(const PanelRoom& r, PanelsOpen& open, const FitFolded& folded);
// The note for what `f` names ("" = nothing folded by fitting).
std::string fit_folded_note(const FitFolded& f);

// A row of texts, each offered in variants from the fullest to the shortest
// (`widths[i][v]`, window units), laid out with `spacing` between them in
// `avail`: every text starts at its fullest, and while the row is too wide
// the texts in `shorten_order` give up variants, each down to its shortest
// before the next one starts. Returns the variant chosen for each text (the
// row may still be too wide when every text is at its shortest: the caller
// cuts the last one with an ellipsis).
std::vector<int> fit_row(const std::vector<std::vector<float>>& widths, float spacing, float avail,
                         const std::vector<int>& shorten_order);
// Whether buttons whose labels need `widths` fit side by side, each one an
// equal share of `avail` with `spacing` between them (else one per row).
bool buttons_fit_side_by_side(const std::vector<float>& widths, float spacing, float avail);

// A row of tabs labelled in full or in brief (`full[i]`, `brief[i]`: each
// tab's width, window units), `spacing` between them, in `avail`: every tab
// in full where they all fit, else every tab in brief, else none fits and a
// menu replaces the tabs.
enum class TabLabels { kFull, kBrief, kMenu };
TabLabels fit_tabs(const std::vector<float>& full, const std::vector<float>& brief, float spacing, float avail);

// The Next-token panel's candidates, each a token's name, its bar and its
// percentage tag (`widest_name`, `widest_tag`: the widest of each, window
// units), in `avail` with `gap` between the parts. On one row where the
// names' column, a bar of at least `min_bar` and the tags fit; else stacked:
// the name and its tag share a line above a bar of the full width, and a
// name is cut (with an ellipsis, the whole token in its tooltip) only where
// it is wider than that line leaves it.
struct CandidateRows {
  bool stacked = false;
  float name_w = 0;  // one row: the names' column; stacked: the most a name may take beside the widest tag
  float bar_x = 0;   // where the bars start, from the row's left
  float bar_w = 0;   // the longest bar's length
};
CandidateRows fit_candidate_rows(float widest_name, float widest_tag, float gap, float avail, float min_bar);

// Whether a table fits `avail`: `cells[row][column]` are its texts' widths
// (window units, the header row too), each column as wide as its widest
// cell plus `pad` (both sides' padding). Where not, a panel lists each row
// as lines instead of cutting every column.
bool columns_fit(const std::vector<std::vector<float>>& cells, float pad, float avail);

// Words of `widths` (window units) wrapped at the spaces between them
// (`space` wide) into lines of at most `avail`: the index of each line's
// first word. A word wider than a line has a line of its own. Unlike
// ImGui's wrapping it never breaks after a full stop, so "39.4%" stays whole.
std::vector<size_t> wrap_words(const std::vector<float>& widths, float space, float avail);

// The presentation HUD's card (the next token and its candidates) in a
// column of at most kHudCardShare of a W-wide view and `max_h` tall. `full`
// is what its text takes at full size (window units): the headline, in the
// banner's large font, and the candidate rows with their padding (a row's
// width with its narrowest bar). The card is as wide as they want up to the
// column: the rows keep their size where it has room and the headline
// shrinks to the card's width first; where the column is short both shrink.
inline constexpr float kHudCardShare = 0.35f;
struct HudCardSize {
  float title_w = 0, title_h = 0;
  float rows_w = 0, rows_h = 0;
};
struct HudCardFit {
  float w = 0;                    // the card's width (window units)
  float title_k = 1, rows_k = 1;  // scale of the headline and of the rows
};
HudCardFit fit_hud_card(const HudCardSize& full, float W, float max_h);

}  // namespace kvscope
