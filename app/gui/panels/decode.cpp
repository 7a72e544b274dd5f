// The decoding strategies in the window: the Decoding panel (sampling, beam
// search, speculative decoding) and what the Next-token panel shows for the
// two strategies: the 2N beam candidates and their fates, or the drafted
// tokens with p, q and the acceptance test. Everything is read from the
// shown step's immutable record (BeamStepRecord, SpecIteration).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "app/gui/panels/panels.h"
#include "app/gui/panels/table_or_lines.h"
#include "app/lessons/decode.h"
#include "app/platform/assets.h"
#include "app/session/fitting.h"
#include "model/core/overloaded.h"
#include "model/core/units.h"
#include "model/decoding/speculative_accept.h"
#include "render/overlay/overlay.h"
#include "render/scene/scene_spec.h"

namespace kvscope {

namespace {

const ImVec4 kGood(0.45f, 1.0f, 0.55f, 1), kBad(1.0f, 0.45f, 0.4f, 1), kGold(1.0f, 0.82f, 0.35f, 1);

// A table whose first row names its columns (`headers`); with ScrollY in
// `flags` that row stays in view.
bool begin_headed_table(const char* id, std::initializer_list<const char*> headers,
                        ImGuiTableFlags flags = ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg,
                        ImVec2 size = ImVec2(0, 0)) {
  if (!ImGui::BeginTable(id, static_cast<int>(headers.size()), flags, size)) return false;
  if (flags & ImGuiTableFlags_ScrollY) ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h : headers) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  return true;
}

void section(const char* title) {
  ImGui::Separator();
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled), title);
}

// A shipped model by name, or a path; "" when none is set. (A few stat calls:
// the name is read from the file system, through links and relative paths.)
std::string model_label(const std::string& dir) {
  const std::string name = shipped_model_name(dir);
  return name.empty() ? dir : name;
}

// "beam search, beams N = 4, length penalty L = 1.00" for the strategy a generation runs.
std::string describe(const Strategy& d) {
  if (is_sampling(d)) return "sampling, one token per forward";
  std::string out = std::string(strategy_name(d)) + ", " + strategy_parameters(d);
  if (const auto* p = std::get_if<strategy::Speculative>(&d)) out += ", draft " + model_label(p->draft_dir);
  return out;
}

// The generated text of a token sequence (after the prompt).
std::string tail_text(const EngineState& engine, const std::vector<int>& tokens, int n_prompt) {
  if (!engine.model || n_prompt >= static_cast<int>(tokens.size())) return "";
  // Bytes cut mid-character and control characters show as \xNN, as on the text line.
  return visible_text(
      engine.model->tokenizer.decode(std::vector<int>(tokens.begin() + std::max(0, n_prompt), tokens.end())));
}

// The draft model: one of the shipped models by its name, or another folder.
// `other`: the folder field is shown rather than the shipped models (UiState::draft_other_folder).
void draft_picker(strategy::Speculative& d, bool& other) {
  const std::string shown = model_label(d.draft_dir);
  const bool shipped = !d.draft_dir.empty() && shown != d.draft_dir;
  ImGui::SetNextItemWidth(-1);
  if (ImGui::BeginCombo("##draft_pick", ("draft: " + (shipped && !other ? shown : "other folder")).c_str())) {
    for (const std::string& name : shipped_models())
      if (ImGui::Selectable(name.c_str(), shipped && !other && name == shown)) {
        d.draft_dir = asset_path("models/" + name);
        other = false;
      }
    if (ImGui::Selectable("other folder\xE2\x80\xA6", other || !shipped)) other = true;
    ImGui::EndCombo();
  }
  hover_help(
      "The draft must share the model's tokenizer (the shipped kvscope-draft drafts for kvscope-tiny; "
      "distilgpt2 for gpt2). Temperature, top-k and top-p of the Next token panel apply to both models.");
  if (!other && shipped) return;
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##draft", "draft model folder", &d.draft_dir);
}

// The strategy of radio button `mode` (the Strategy's alternative index): the
// one being edited when it is already of that kind, else the one running, else
// its defaults with the draft model the panel offers.
Strategy strategy_for_mode(int mode, const EngineState& engine, const UiState& ui) {
  if (static_cast<size_t>(mode) == ui.strategy.index()) return ui.strategy;
  if (static_cast<size_t>(mode) == engine.strategy.index()) return engine.strategy;
  if (mode == 1) return strategy::Beam{};
  if (mode == 2) return strategy::Speculative{ui.draft_dir, strategy::Speculative().k};
  return strategy::Sample{};
}

}  // namespace

Commands panel_decoding(const EngineState& engine, UiState& ui) {
  Commands cmds;
  int mode = static_cast<int>(ui.strategy.index());
  ImGui::RadioButton("sampling", &mode, 0);
  hover_help("One token per forward, drawn by the sampler (Next token panel).");
  same_line_if_fits(checkbox_width("beams"));
  ImGui::RadioButton("beams", &mode, 1);
  hover_help(
      "Beam search: keep the N most probable sequences; every step expands each beam and keeps the 2N best "
      "(beam, token) candidates. The beams share the prompt's K/V (paged cache, copied on write).");
  same_line_if_fits(checkbox_width("speculative"));
  ImGui::RadioButton("speculative", &mode, 2);
  hover_help(
      "A small draft model proposes K tokens; the model checks all of them in ONE forward, keeps the prefix "
      "the acceptance test passes, and replaces the first rejected token. Same output distribution as the "
      "model alone.");
  ui.strategy = strategy_for_mode(mode, engine, ui);
  // Labels inside the sliders, so a narrow sidebar or a large text scale never clips them.
  ImGui::PushItemWidth(-1);
  if (auto* b = std::get_if<strategy::Beam>(&ui.strategy)) {
    ImGui::SliderInt("##beams", &b->beams, 1, 8, "beams N %d");
    float l = static_cast<float>(b->length_penalty);
    if (ImGui::SliderFloat("##length_penalty", &l, -1.0f, 3.0f, fitting_label({"length penalty L %.2f", "L %.2f"})))
      b->length_penalty = l;
    hover_help("A finished hypothesis scores sum log p / (generated length)^L: L > 0 favours longer ones.");
  } else if (auto* p = std::get_if<strategy::Speculative>(&ui.strategy)) {
    ImGui::SliderInt("##drafted", &p->k, 1, 16, "drafted K %d");
    draft_picker(*p, ui.draft_other_folder);
    ui.draft_dir = p->draft_dir;
  }
  ImGui::PopItemWidth();
  const bool changed = !(ui.strategy == engine.strategy);
  ImGui::BeginDisabled(!changed || !engine.model);
  if (ImGui::Button(changed ? fitting_label({"Restart with this strategy", "Restart"}) : "running", ImVec2(-1, 0)))
    cmds.push_back(cmd::SetStrategy{ui.strategy});
  ImGui::EndDisabled();
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled), "now: " + describe(engine.strategy));
  return cmds;
}

// Beam search: the shown step's 2N candidates, best first, and what became of each.
void panel_beam_candidates(const BeamTimeline& t, int step) {
  const BeamStepRecord& r = *t[static_cast<size_t>(step)];
  text_wrapped_wordsf("step %d: %d beam%s expanded, the %d best (beam, token) kept:", step,
                      static_cast<int>(r.expanded.size()), r.expanded.size() == 1 ? "" : "s",
                      static_cast<int>(r.candidates.size()));
  std::vector<TableRow> rows;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const BeamCandidate& c = r.candidates[i];
    const int parent_id = c.parent < static_cast<int>(r.expanded.size()) ? r.expanded[c.parent].id : -1;
    const std::string piece = i < r.candidate_pieces.size() ? visible_piece(r.candidate_pieces[i]) : "?";
    TableRow row;
    row.cells = {(parent_id > 0 ? "b" + std::to_string(parent_id) : std::string("prompt")) + " + " + piece,
                 fixed("%.2f", c.token_logprob), fixed("%.2f", c.logprob),
                 c.running    ? "b" + std::to_string(c.beam_id)
                 : c.finished ? std::string("finished")
                 : c.stops    ? std::string("ends, not top N")
                              : std::string("dropped")};
    row.first = ImGui::GetStyleColorVec4(ImGuiCol_Text);
    row.last = c.running ? kGood : c.finished ? kGold : ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled);
    rows.push_back(row);
  }
  table_or_lines({"beam_cands", {"beam + token", "log p", "\xCE\xA3 log p", "kept as"}, {}, true}, rows);
}

void panel_beam_state(const EngineState& engine, const BeamTimeline& t, int step) {
  const BeamStepRecord& r = *t[static_cast<size_t>(step)];
  const int n_prompt = static_cast<int>(t.front()->prompt_pieces.size());
  section("running beams (\xCE\xA3 log p)");
  // (an old step's sequences may have been dropped by the history's budget: rebuilt from the steps)
  for (const Beam& b : r.running)
    text_wrapped_wordsf("b%d  %.3f  %s", b.id, b.logprob,
                        tail_text(engine, beam_tokens(t, step, b.id), n_prompt).c_str());
  if (r.running.empty()) ImGui::TextDisabled("(none: the search has ended)");
  if (!r.finished.empty()) {
    section("finished (score = \xCE\xA3 log p / length^L)");
    for (const Hypothesis& h : r.finished)
      text_wrapped_coloured(kGold,
                            fixed("%.3f  ", h.score) + tail_text(engine, beam_tokens(t, step, h.beam_id), n_prompt));
  }
  const double saved = r.kv_bytes_independent > 0
                           ? 100.0 * (1.0 - static_cast<double>(r.kv_bytes_shared) / r.kv_bytes_independent)
                           : 0.0;
  text_wrapped_wordsf("K/V held %s, one cache per beam would hold %s: %.0f%% saved by sharing; %llu block%s copied",
                      format_bytes(r.kv_bytes_shared).c_str(), format_bytes(r.kv_bytes_independent).c_str(), saved,
                      static_cast<unsigned long long>(r.cow_copies), r.cow_copies == 1 ? "" : "s");
  hover_help(
      "Bytes the paged cache holds for the expanded beams (shared prompt and prefixes once) vs one cache per "
      "beam in the same layout. A shared block is copied only when a beam first writes into it.");
}

// Speculative decoding: the shown iteration's drafted tokens and the verdicts.
void panel_spec_iteration(const SpecTimeline& t, UiState& ui, int step) {
  const SpecIteration& it = *t[static_cast<size_t>(step)];
  int stage = static_cast<int>(ui.spec_stage);
  // (each on the next line where the sidebar has no room left for it)
  ImGui::RadioButton("play", &stage, -1);
  same_line_if_fits(checkbox_width("draft"));
  ImGui::RadioButton("draft", &stage, 0);
  same_line_if_fits(checkbox_width("verify"));
  ImGui::RadioButton("verify", &stage, 1);
  same_line_if_fits(checkbox_width("resolve"));
  ImGui::RadioButton("resolve", &stage, 2);
  ui.spec_stage = static_cast<SpecStage>(stage);
  hover_help(
      "Hold the shown iteration at one stage: the draft's ghost tokens, the target's one verify forward "
      "lighting all their K/V columns, or the verdict (accepted solidify, rejected fall, their K/V rolls back).");
  text_wrapped_wordsf("iteration %d: drafted %d, accepted %d", it.index, it.k, it.n_accepted);
  std::vector<TableRow> rows;
  for (size_t i = 0; i < it.drafted.size(); ++i) {
    const DraftVerdict& v = it.drafted[i];
    TableRow row;
    row.cells = {i < it.drafted_pieces.size() ? visible_piece(it.drafted_pieces[i]) : "?", fixed("%.3f", v.q),
                 fixed("%.3f", v.p),
                 // Self-describing: in lines (a narrow sidebar) the column's header is not shown.
                 v.r < 0 ? std::string("not tested")
                         : fixed("r %.2f ", v.r) + (v.accepted ? "< p/q: accept" : "\xE2\x89\xA5 p/q: reject")};
    row.first = v4(kDraftColour);
    row.last = v.r < 0 ? ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled) : v.accepted ? kGood : kBad;
    rows.push_back(row);
  }
  table_or_lines({"spec_drafts", {"drafted", "q draft", "p model", "uniform draw r"}, {}, true}, rows);
  if (it.draft_context_full)
    text_wrapped_words("the draft's context is shorter than the text: nothing drafted, the model decodes alone");
  text_wrapped_wordsf("%s %s (p = %.3f)", it.bonus ? "bonus token from p:" : "replacement from norm(max(0, p - q)):",
                      visible_piece(it.next_piece).c_str(), it.next_prob);
}

void panel_spec_counters(const SpecTimeline& t, int step) {
  const SpecIteration& it = *t[static_cast<size_t>(step)];
  section("so far");
  if (it.drafted_total > 0)
    text_wrapped_wordsf("acceptance \xCE\xB1 = %d / %d = %.2f", it.accepted_total, it.drafted_total,
                        static_cast<double>(it.accepted_total) / it.drafted_total);
  else
    text_wrapped_words("acceptance \xCE\xB1 = n/a (nothing drafted yet)");
  text_wrapped_wordsf("%d tokens in %d model forwards", it.generated, it.target_forwards);
  text_wrapped_coloured(kGood, "model forwards saved: " + std::to_string(it.generated - it.target_forwards));
  hover_help(
      "Plain decoding runs the model once per generated token; each speculative iteration runs it once "
      "(verifying every drafted token together) and the draft K times.");
  text_wrapped_wordsf("draft forwards: %d", it.draft_forwards);
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
                        "rolled back: " + std::to_string(it.target_rolled_back) + " model, " +
                            std::to_string(it.draft_rolled_back) + " draft positions");
}

namespace {

std::string of(int i, int n) {
  return std::to_string(i) + " of " + std::to_string(n);
}

// Beam search's counters: what the shown step's records say ran. Short
// names and values: the sidebar is narrow.
void beam_counters(const BeamTimeline& timeline, int step, const Palette& pal) {
  const BeamTotals t = beam_totals(timeline, step);
  const ImVec4 cyan = v4(pal.cache_high), green = kGood;
  counter_row("step", of(t.step, static_cast<int>(timeline.size()) - 1));
  counter_row("running beams", std::to_string(t.running));
  counter_row("finished", std::to_string(t.finished));
  counter_row("forwards so far", std::to_string(t.forwards));
  counter_row("positions, step", std::to_string(t.positions_step));
  counter_row("positions so far", std::to_string(t.positions));
  counter_row("FLOPs, step", format_flops(t.flops_step));
  counter_row("FLOPs so far", format_flops(t.flops));
  counter_row("K/V shared", format_bytes(t.kv_shared), &cyan);
  counter_row("a cache per beam", format_bytes(t.kv_separate));
  counter_row("saved", fixed("%.0f %%", 100.0 * t.saved_fraction()), t.saved_fraction() > 0 ? &green : nullptr);
  counter_row("blocks copied",
              std::to_string(t.cow_copies) + (t.block > 0 ? " (B = " + std::to_string(t.block) + ")" : ""));
  counter_row("step time", fixed("%.2f ms", t.ms_step));
  counter_row("engine time", fixed("%.1f ms", t.ms));
}

// Speculative decoding's counters: the model's and the draft's forwards, caches and times.
void spec_counters(const SpecTimeline& timeline, int step, const Palette& pal) {
  const SpecTotals t = spec_totals(timeline, step);
  const ImVec4 cyan = v4(pal.cache_high), green = kGood, draft = v4(kDraftColour);
  counter_row("iteration", of(t.iteration, static_cast<int>(timeline.size()) - 1));
  counter_row("tokens", std::to_string(t.generated));
  counter_row("model forwards", std::to_string(t.target_forwards));
  counter_row("plain decoding", std::to_string(t.generated) + " forwards");
  counter_row("saved", std::to_string(t.forwards_saved) + " forwards", &green);
  counter_row("draft forwards", std::to_string(t.draft_forwards), &draft);
  counter_row("accepted", std::to_string(t.accepted) + " of " + std::to_string(t.drafted));
  counter_row("\xCE\xB1", rate_text(t.alpha(), 2));
  counter_row("tokens/forward", fixed("%.2f", t.tokens_per_target_forward()));
  counter_row("rolled back",
              std::to_string(t.rolled_back_target) + " + " + std::to_string(t.rolled_back_draft) + " draft");
  counter_row("model K/V", format_bytes(t.target_kv), &cyan);
  counter_row("draft K/V", format_bytes(t.draft_kv), &draft);
  counter_row("draft forward", t.draft_timed ? fixed("%.2f ms", t.draft_forward_ms()) : "-");
  counter_row("verify forward", t.target_timed ? fixed("%.2f ms", t.target_forward_ms()) : "-");
}

}  // namespace

Commands panel_decode_cache(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  const bool beam = is_beam(engine.strategy);
  text_wrapped_coloured(v4(pal.cache_high), beam ? "KV CACHE, one for all beams" : "KV CACHE in both models");
  text_wrapped_wordsf("%s", beam ? "The beams share the prompt's K/V and every common prefix (paged: a shared block "
                                   "is copied on its first write). Each step is ONE forward over every beam's new "
                                   "position."
                                 : "Each iteration the draft runs K small forwards on its cache, the model ONE "
                                   "forward over the K drafted positions (+1) on its own; rejected positions are "
                                   "rolled back in both caches. Plain decoding: one model forward per token.");
  const int step = shown_step_or_note(engine, ui);
  if (step >= 0 && begin_counters("decode_counters")) {
    std::visit(overloaded{[](std::monostate) {}, [&](const BeamTimeline& t) { beam_counters(t, step, pal); },
                          [&](const SpecTimeline& t) { spec_counters(t, step, pal); }},
               engine.tree.timeline());
    ImGui::EndTable();
  }
  return {};
}

namespace {

// A table that scrolls within the tab, its header row frozen.
bool begin_lesson_table(const char* id, std::initializer_list<const char*> headers) {
  const ImGuiTableFlags tf = ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                             ImGuiTableFlags_BordersInnerV;
  return begin_headed_table(id, headers, tf,
                            ImVec2(0, std::max(ImGui::GetTextLineHeight() * 4, ImGui::GetContentRegionAvail().y)));
}

// Starts a lesson table's row; the shown step's row is highlighted.
void lesson_row(bool shown) {
  ImGui::TableNextRow();
  if (shown) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, ImGui::GetColorU32(ImVec4(0.2f, 0.45f, 0.6f, 0.45f)));
}

void beam_lesson(const BeamTimeline& timeline, int step) {
  const BeamTotals t = beam_totals(timeline, step);
  text_wrapped_wordsf(
      "Beam search keeps the N most probable sequences. Each step runs ONE forward over the new position of every "
      "running beam (a batch), ranks all (beam, token) continuations by \xCE\xA3 log p, keeps the 2N best and "
      "continues the N best that did not end. The beams live in one paged KV cache: the prompt's K/V are computed "
      "once and every common prefix is held once.");
  text_wrapped_wordsf(
      "Up to step %d: %d forwards computed %lld positions (the %d-token prompt once); the cache "
      "holds %s where one cache per beam would hold %s: %.0f %% saved, %llu blocks copied on write.",
      t.step, t.forwards, static_cast<long long>(t.positions), t.prompt_tokens, format_bytes(t.kv_shared).c_str(),
      format_bytes(t.kv_separate).c_str(), 100.0 * t.saved_fraction(), static_cast<unsigned long long>(t.cow_copies));
  if (!begin_lesson_table("beam_lesson",
                          {"step", "beams run", "positions", "K/V shared", "one per beam", "saved", "copied"}))
    return;
  for (int i = 0; i < static_cast<int>(timeline.size()); ++i) {
    const BeamStepRecord& r = *timeline[static_cast<size_t>(i)];
    const BeamTotals row = beam_totals(timeline, i);
    lesson_row(i == step);
    ImGui::TableNextColumn();
    ImGui::Text(i == 0 ? "0 (prompt)" : "%d", i);
    ImGui::TableNextColumn();
    ImGui::Text("%d", static_cast<int>(r.expanded.size()));
    ImGui::TableNextColumn();
    ImGui::Text("%d", r.positions);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(row.kv_shared).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(row.kv_separate).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.0f %%", 100.0 * row.saved_fraction());
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(r.cow_copies));
  }
  ImGui::EndTable();
}

void spec_lesson(const SpecTimeline& timeline, int step) {
  const SpecTotals t = spec_totals(timeline, step);
  text_wrapped_wordsf(
      "Speculative decoding: a small draft model proposes K tokens, one cheap forward each; the model scores all "
      "of them in ONE forward; token i is kept when a uniform draw r < p/q, the first rejected one is replaced "
      "by a draw from norm(max(0, p - q)), and a bonus token comes from p when all K pass. The text follows the "
      "model's own distribution exactly; only the number of model forwards changes.");
  const double a = t.alpha_tested();
  text_wrapped_wordsf(
      "Up to iteration %d: %d tokens in %d model forwards (%.2f per forward; plain decoding: 1). "
      "%d of %d tested drafts accepted: \xCE\xB1 = %s. With K = %d, Leviathan et al. expect "
      "(1 - \xCE\xB1^(K+1)) / (1 - \xCE\xB1) = %s tokens per model forward.",
      t.iteration, t.generated, t.target_forwards, t.tokens_per_target_forward(), t.accepted, t.tested,
      rate_text(a, 2).c_str(), t.k, rate_text(expected_tokens_per_iteration(a, t.k), 2).c_str());
  if (t.draft_timed > 0 && t.target_timed > 0)
    text_wrapped_wordsf(
        "Measured here: a draft forward %.2f ms, a model verify forward %.2f ms (c = %.2f); their "
        "formula predicts %sx the speed of plain decoding (c measured on the verify forward, "
        "which computes K + 1 positions).",
        t.draft_forward_ms(), t.target_forward_ms(), t.cost_ratio(),
        rate_text(predicted_speedup(a, t.k, t.cost_ratio()), 2).c_str());
  if (!begin_lesson_table("spec_lesson", {"iteration", "drafted", "accepted", "then", "model forwards", "tokens"}))
    return;
  for (int i = 0; i < static_cast<int>(timeline.size()); ++i) {
    const SpecIteration& it = *timeline[static_cast<size_t>(i)];
    lesson_row(i == step);
    ImGui::TableNextColumn();
    ImGui::Text("%d", i);
    ImGui::TableNextColumn();
    ImGui::Text("%d", it.k);
    ImGui::TableNextColumn();
    ImGui::TextColored(it.n_accepted == it.k ? kGood : ImGui::GetStyleColorVec4(ImGuiCol_Text), "%d", it.n_accepted);
    ImGui::TableNextColumn();
    ImGui::Text("%s %s", it.bonus ? "bonus" : "replaced:", visible_piece(it.next_piece).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%d", it.target_forwards);
    ImGui::TableNextColumn();
    ImGui::Text("%d", it.generated);
  }
  ImGui::EndTable();
}

}  // namespace

Commands panel_decode_lesson(const EngineState& engine, UiState& ui) {
  const int step = shown_step_or_note(engine, ui);
  if (step < 0) return {};
  std::visit(overloaded{[](std::monostate) {}, [&](const BeamTimeline& t) { beam_lesson(t, step); },
                        [&](const SpecTimeline& t) { spec_lesson(t, step); }},
             engine.tree.timeline());
  return {};
}

// The Next-token panel's content under beam search or speculative decoding.
Commands panel_decode_step(const EngineState& engine, UiState& ui) {
  const int step = shown_step_or_note(engine, ui);
  if (step < 0) return {};
  std::visit(overloaded{[](std::monostate) {},
                        [&](const BeamTimeline& t) {
                          panel_beam_candidates(t, step);
                          panel_beam_state(engine, t, step);
                        },
                        [&](const SpecTimeline& t) {
                          panel_spec_iteration(t, ui, step);
                          panel_spec_counters(t, step);
                        }},
             engine.tree.timeline());
  return {};
}

}  // namespace kvscope
