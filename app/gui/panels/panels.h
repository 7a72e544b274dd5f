// The ImGui panels. Each is a function of (engine state, UI state) that
// draws its widgets and returns what the user asked for; the frame loop
// (gui.cpp) carries the commands out. Widgets may edit UiState fields that
// are purely presentational (sliders, text buffers).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/session/state.h"
#include "render/overlay/overlay.h"
#include "render/scene/scene.h"

namespace kvscope {

Commands panel_prompt(const EngineState& engine, UiState& ui);
Commands panel_playback(const EngineState& engine, UiState& ui);
Commands panel_cache(const EngineState& engine, UiState& ui);  // toggle, counters, FLOP plots
Commands panel_attention(const EngineState& engine, UiState& ui);
Commands panel_next_token(const EngineState& engine, UiState& ui);  // top-10 bars + sampling
Commands panel_model(const EngineState& engine, UiState& ui);
// While a model loads: its progress bar, Cancel, and that the current model
// keeps working (the Model panel, and the page's sidebar under its Open buttons).
void model_load_progress(const EngineState& engine, Commands& cmds);
// Sampling, beam search or speculative decoding (app/gui/panels/decode.cpp).
Commands panel_decoding(const EngineState& engine, UiState& ui);
// The Next-token panel under beam search (2N candidates, beams, hypotheses)
// or speculative decoding (drafted tokens, p, q, verdicts, α).
Commands panel_decode_step(const EngineState& engine, UiState& ui);
// The Cache & compute panel under beam search or speculative decoding: the
// counters of what ran (forwards, K/V shared vs per beam, draft vs target).
Commands panel_decode_cache(const EngineState& engine, UiState& ui);
// The lesson on the running strategy (a tab under the timeline).
Commands panel_decode_lesson(const EngineState& engine, UiState& ui);
// A button in `colour` that reads as a toggle (the big Generate, Play and KV CACHE buttons).
bool big_button(const char* label, const glm::vec3& colour, ImVec2 size);
// A counters table: names and values in two columns, or in a narrow
// sidebar each value indented under its name. EndTable closes it, as for
// ImGui::BeginTable.
bool begin_counters(const char* id);
// A name / value row of a counters table (each cell wraps rather than clip
// in a narrow sidebar or at a large text scale).
void counter_row(const char* name, const std::string& value, const ImVec4* colour = nullptr);
// Buttons that share a row while their labels fit (app/session/fitting.h's
// buttons_fit_side_by_side), else one per row at full width: give each
// button `size`, and call next() between them.
struct ButtonRow {
  bool one_row = true;
  ImVec2 size;
  void next() const;
};
ButtonRow button_row(const std::vector<const char*>& labels);
// The first of `labels` (fullest first) whose button fits the width left on
// the line; the last one when none does.
const char* fitting_label(const std::vector<const char*>& labels);
// `text` cut to `width` with an ellipsis where it is wider (on a UTF-8 boundary).
std::string fit_text(const std::string& text, float width);
// One number by a printf format with a single double ("%.2f ms").
std::string fixed(const char* format, double v);
// A button's label with its keyboard key, "Play (Space)", or without it on a
// touch screen (UiState::touch), where no key is at hand.
std::string keyed(const UiState& ui, const std::string& label, const char* key);
// A collapsing header's label: `full` where it fits the width, else
// `brief`; the header's id stays `full`'s either way.
std::string header_label(const char* full, const char* brief);
// Text wrapped at its spaces only (ImGui's own wrapping breaks after a full
// stop, splitting "39.4%" across two lines).
void text_wrapped_words(const std::string& text);
// The same in a colour.
void text_wrapped_coloured(const ImVec4& colour, const std::string& text);
// The same for printf-style text (ImGui::TextWrapped's arguments): the
// lessons' sentences full of numbers ("8.54 GFLOP/s") wrap between words,
// never after a number's full stop.
void text_wrapped_wordsf(const char* fmt, ...) IM_FMTARGS(1);
// A checkbox's width with its label; the next item on this line when it
// fits there, else on the next one.
float checkbox_width(const char* label);
void same_line_if_fits(float width);
// A checkbox whose label wraps onto more lines rather than clip; the label
// toggles it too.
bool checkbox_wrapped(const char* label, bool* v);
// The shown step, or -1 after saying "(no step yet)" where the panel's content would go.
int shown_step_or_note(const EngineState& engine, const UiState& ui);
// A tooltip at most half the window wide (longer lines wrap, ImGui::Text's
// too), so ImGui can keep all of it inside the window at any text scale.
void begin_wrapped_tooltip();
void end_wrapped_tooltip();
// `text` wrapped in a tooltip while the last item is hovered.
void hover_help(const char* text);
// Q·Kᵀ/√d → softmax → ·V for the shown step and the selected layer and head (app/gui/panels/qkv.cpp).
Commands panel_qkv(const EngineState& engine, UiState& ui);
// The k and v rows (one head's slice) of a KV block, for its tooltip.
void kv_rows_tooltip(const EngineState& engine, int layer, int head, int pos, int step);
Commands panel_view(const EngineState& engine, UiState& ui);
// The loaded model's training run: loss curve, checkpoints to load (app/gui/panels/training.cpp).
Commands panel_training(const EngineState& engine, UiState& ui);
// The Serving view: many requests from one paged KV pool, over the whole
// window while UiState::serving.open (app/gui/panels/serving.cpp).
Commands panel_serving(const EngineState& engine, UiState& ui);
// The chat view's column: messages, the message box, the context meter and
// each turn's counters, beside the conversation's 3D view while
// UiState::chat.open (app/gui/panels/chat.cpp).
Commands panel_chat(const EngineState& engine, UiState& ui);
// The chat view's tooltip for a position of the conversation's 3D view: its
// token, who said it, its turn, and whether the cache reused it, this turn
// prefilled it or the reply generated it.
void chat_tooltip(const ChatState& chat, int pos);
// A floating window listing errors until dismissed (nothing when none).
Commands panel_errors(const UiState& ui);
// The cache layout's part of a KV block's tooltip: evicted, sink, page,
// row format and quantization error (app/gui/panels/kv.cpp).
void kv_layout_tooltip(const SequenceState& seq, int pos, int layer, KvState state);
// The text on screen scored per position under the running layout, dense f32
// and the same window with / without sinks: the session scores it on
// cmd::ScoreKvLayouts (the panel's button); the plot shows EngineState::kv_scores.
void kv_loss_plot(const EngineState& engine, const Palette& pal, Commands& cmds);
// Tooltip for what the mouse is over in the 3D view.
// `layer` / `head` (-1 = mean): the beam whose weight a KV block's tooltip shows.
// `newest_hidden` (predict mode, prediction_hidden): the newest token has no
// tooltip, and no other block's names it.
void hover_tooltip(const EngineState& engine, const Pick& pick, int layer = -1, int head = -1,
                   bool newest_hidden = false);

// The counters' "other mode" curve: FLOPs each step would have cost in
// `mode`, from the formula (kvscope::forward_flops), for the same sequence.
std::vector<double> computed_flops(const EngineState& engine, CacheMode mode);

}  // namespace kvscope
