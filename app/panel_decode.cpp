// The decoding strategies in the window: the Decoding panel (sampling, beam
// search, speculative decoding) and what the Next-token panel shows for the
// two strategies: the 2N beam candidates and their fates, or the drafted
// tokens with p, q and the acceptance test. Everything is read from the
// shown step's immutable record (BeamStepRecord, SpecIteration).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "panels.h"
#include "renderer_overlay.h"
#include "scene_format.h"
#include "scene_spec.h"

namespace kvscope {

namespace {

const ImVec4 kGood(0.45f, 1.0f, 0.55f, 1), kBad(1.0f, 0.45f, 0.4f, 1), kGold(1.0f, 0.82f, 0.35f, 1);

void tip(const char* text) {
  if (!ImGui::IsItemHovered()) return;
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
  ImGui::TextUnformatted(text);
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

void section(const char* title) {
  ImGui::Separator();
  ImGui::TextDisabled("%s", title);
}

// "running: beam search, N = 4, L = 1.00" for the settings a generation runs.
std::string describe(const DecodeSettings& d) {
  char buf[160];
  if (d.mode == DecodeMode::kBeam)
    std::snprintf(buf, sizeof buf, "beam search, N = %d, length penalty %.2f", d.beams, d.length_penalty);
  else if (d.mode == DecodeMode::kSpeculative)
    std::snprintf(buf, sizeof buf, "speculative, K = %d", d.k);
  else
    std::snprintf(buf, sizeof buf, "sampling, one token per forward");
  return buf;
}

// The generated text of a token sequence (after the prompt).
std::string tail_text(const Snapshot& snap, const std::vector<int>& tokens, int n_prompt) {
  if (!snap.model || n_prompt >= static_cast<int>(tokens.size())) return "";
  return snap.model->tokenizer.decode(std::vector<int>(tokens.begin() + std::max(0, n_prompt), tokens.end()));
}

}  // namespace

Commands panel_decoding(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  DecodeSettings& d = ui.decoding;
  int mode = static_cast<int>(d.mode);
  ImGui::RadioButton("sampling", &mode, static_cast<int>(DecodeMode::kSample));
  tip("One token per forward, drawn by the sampler (Next token panel).");
  ImGui::SameLine();
  ImGui::RadioButton("beams", &mode, static_cast<int>(DecodeMode::kBeam));
  tip("Beam search: keep the N most probable sequences; every step expands each beam and keeps the 2N best "
      "(beam, token) candidates. The beams share the prompt's K/V (paged cache, copied on write).");
  ImGui::SameLine();
  ImGui::RadioButton("speculative", &mode, static_cast<int>(DecodeMode::kSpeculative));
  tip("A small draft model proposes K tokens; the model checks all of them in ONE forward, keeps the prefix "
      "the acceptance test passes, and replaces the first rejected token. Same output distribution as the "
      "model alone.");
  d.mode = static_cast<DecodeMode>(mode);
  if (d.mode == DecodeMode::kBeam) {
    ImGui::SliderInt("beams N", &d.beams, 1, 8);
    ImGui::SliderFloat("length penalty", &d.length_penalty, -1.0f, 3.0f, "%.2f");
    tip("A finished hypothesis scores sum log p / (generated length)^L: L > 0 favours longer ones.");
  } else if (d.mode == DecodeMode::kSpeculative) {
    ImGui::SliderInt("drafted K", &d.k, 1, 16);
    ImGui::SetNextItemWidth(-1);
    ImGui::InputTextWithHint("##draft", "draft model folder", &d.draft_dir);
    tip("The draft must share the model's tokenizer (the shipped kvscope-draft drafts for kvscope-tiny; "
        "distilgpt2 for gpt2). Temperature, top-k and top-p of the Next token panel apply to both models.");
  }
  const bool changed = d != snap.decoding;
  ImGui::BeginDisabled(!changed || !snap.model);
  if (ImGui::Button(changed ? "Restart with this strategy" : "running", ImVec2(-1, 0)))
    cmds.push_back(cmd::SetDecoding{d});
  ImGui::EndDisabled();
  ImGui::TextDisabled("now: %s", describe(snap.decoding).c_str());
  return cmds;
}

// Beam search: the shown step's 2N candidates, best first, and what became of each.
void panel_beam_candidates(const Snapshot& snap, int step) {
  const BeamStepRecord& r = *snap.beam_records[static_cast<size_t>(step)];
  ImGui::TextWrapped("step %d: %d beam%s expanded, the %d best (beam, token) kept:", step,
                     static_cast<int>(r.expanded.size()), r.expanded.size() == 1 ? "" : "s",
                     static_cast<int>(r.candidates.size()));
  const ImGuiTableFlags tf = ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg;
  if (ImGui::BeginTable("beam_cands", 4, tf)) {
    ImGui::TableSetupColumn("beam + token");
    ImGui::TableSetupColumn("log p");
    ImGui::TableSetupColumn("\xCE\xA3 log p");
    ImGui::TableSetupColumn("kept as");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      const BeamCandidate& c = r.candidates[i];
      const int parent_id = c.parent < static_cast<int>(r.expanded.size()) ? r.expanded[c.parent].id : -1;
      const std::string piece = i < r.candidate_pieces.size() ? visible_piece(r.candidate_pieces[i]) : "?";
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (parent_id > 0)
        ImGui::Text("b%d + %s", parent_id, piece.c_str());
      else
        ImGui::Text("prompt + %s", piece.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", c.token_logprob);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", c.logprob);
      ImGui::TableNextColumn();
      if (c.running)
        ImGui::TextColored(kGood, "b%d", c.beam_id);
      else if (c.finished)
        ImGui::TextColored(kGold, "finished");
      else
        ImGui::TextDisabled(c.stops ? "ends, not top N" : "dropped");
    }
    ImGui::EndTable();
  }
}

void panel_beam_state(const Snapshot& snap, int step) {
  const BeamStepRecord& r = *snap.beam_records[static_cast<size_t>(step)];
  const int n_prompt = static_cast<int>(snap.beam_records.front()->prompt_pieces.size());
  section("running beams (\xCE\xA3 log p)");
  for (const Beam& b : r.running)
    ImGui::TextWrapped("b%d  %.3f  %s", b.id, b.logprob, tail_text(snap, b.tokens, n_prompt).c_str());
  if (r.running.empty()) ImGui::TextDisabled("(none: the search has ended)");
  if (!r.finished.empty()) {
    section("finished (score = \xCE\xA3 log p / length^L)");
    for (const Hypothesis& h : r.finished)
      ImGui::TextColored(kGold, "%.3f  %s", h.score, tail_text(snap, h.tokens, n_prompt).c_str());
  }
  const double saved = r.kv_bytes_independent > 0
                           ? 100.0 * (1.0 - static_cast<double>(r.kv_bytes_shared) / r.kv_bytes_independent)
                           : 0.0;
  ImGui::TextWrapped("K/V held %s, one cache per beam would hold %s: %.0f%% saved by sharing; %llu block%s copied",
                     format_bytes(r.kv_bytes_shared).c_str(), format_bytes(r.kv_bytes_independent).c_str(), saved,
                     static_cast<unsigned long long>(r.cow_copies), r.cow_copies == 1 ? "" : "s");
  tip("Bytes the paged cache holds for the expanded beams (shared prompt and prefixes once) vs one cache per "
      "beam in the same layout. A shared block is copied only when a beam first writes into it.");
}

// Speculative decoding: the shown iteration's drafted tokens and the verdicts.
void panel_spec_iteration(const Snapshot& snap, UiState& ui, int step) {
  const SpecIteration& it = *snap.spec_iterations[static_cast<size_t>(step)];
  int stage = static_cast<int>(ui.spec_stage);
  ImGui::RadioButton("play", &stage, -1);
  ImGui::SameLine();
  ImGui::RadioButton("draft", &stage, 0);
  ImGui::SameLine();
  ImGui::RadioButton("verify", &stage, 1);
  ImGui::SameLine();
  ImGui::RadioButton("resolve", &stage, 2);
  ui.spec_stage = static_cast<SpecStage>(stage);
  tip("Hold the shown iteration at one stage: the draft's ghost tokens, the target's one verify forward "
      "lighting all their K/V columns, or the verdict (accepted solidify, rejected fall, their K/V rolls back).");
  ImGui::Text("iteration %d: drafted %d, accepted %d", it.index, it.k, it.n_accepted);
  if (ImGui::BeginTable("spec_drafts", 4, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
    ImGui::TableSetupColumn("drafted");
    ImGui::TableSetupColumn("q draft");
    ImGui::TableSetupColumn("p model");
    ImGui::TableSetupColumn("r < p/q ?");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < it.drafted.size(); ++i) {
      const DraftVerdict& v = it.drafted[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(v4(kDraftColour), "%s",
                         i < it.drafted_pieces.size() ? visible_piece(it.drafted_pieces[i]).c_str() : "?");
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", v.q);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", v.p);
      ImGui::TableNextColumn();
      if (v.r < 0)
        ImGui::TextDisabled("not tested");
      else
        ImGui::TextColored(v.accepted ? kGood : kBad, "%.2f %s", v.r, v.accepted ? "accept" : "reject");
    }
    ImGui::EndTable();
  }
  ImGui::TextWrapped("%s %s (p = %.3f)", it.bonus ? "bonus token from p:" : "replacement from norm(max(0, p - q)):",
                     visible_piece(it.next_piece).c_str(), it.next_prob);
}

void panel_spec_counters(const Snapshot& snap, int step) {
  const SpecIteration& it = *snap.spec_iterations[static_cast<size_t>(step)];
  const double alpha = it.drafted_total > 0 ? static_cast<double>(it.accepted_total) / it.drafted_total : 0.0;
  section("so far");
  ImGui::Text("acceptance \xCE\xB1 = %d / %d = %.2f", it.accepted_total, it.drafted_total, alpha);
  ImGui::Text("%d tokens in %d model forwards", it.generated, it.target_forwards);
  ImGui::TextColored(kGood, "model forwards saved: %d", it.generated - it.target_forwards);
  tip("Plain decoding runs the model once per generated token; each speculative iteration runs it once "
      "(verifying every drafted token together) and the draft K times.");
  ImGui::Text("draft forwards: %d", it.draft_forwards);
  ImGui::TextDisabled("rolled back: %d model, %d draft positions", it.target_rolled_back, it.draft_rolled_back);
}

// The Next-token panel's content under beam search or speculative decoding.
Commands panel_decode_step(const Snapshot& snap, UiState& ui) {
  const int step = shown_step(snap, ui);
  if (step < 0) {
    ImGui::TextDisabled("(no step yet)");
  } else if (snap.decoding.mode == DecodeMode::kBeam) {
    panel_beam_candidates(snap, step);
    panel_beam_state(snap, step);
  } else if (snap.decoding.mode == DecodeMode::kSpeculative) {
    panel_spec_iteration(snap, ui, step);
    panel_spec_counters(snap, step);
  }
  return {};
}

}  // namespace kvscope
