// What a step costs: prefill vs decode measured from the records that ran,
// and the KV cache's memory at real scale (published configs, any context).
#include "app/gui/panels/lesson_panels.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "app/gui/panels/table_or_lines.h"
#include "app/lessons/eviction.h"
#include "app/lessons/phases.h"
#include "model/core/units.h"
#include "model/engine/engine.h"

namespace kvscope {

namespace {

// (no tokens/s: one token per forward, so it is 1000 / ms per forward)
const char* const kPhaseHeads[] = {"phase",       "forwards", "positions", "ms / forward",
                                   "positions/s", "GFLOP/s",  "MB read",   "GB/s"};
constexpr int kPhaseColumns = static_cast<int>(sizeof(kPhaseHeads) / sizeof(kPhaseHeads[0]));
// What each column of the phases table means (its header's tooltip).
const char* const kPhaseHeadHelp[] = {
    "Hover a phase for what its forwards do.",
    "Forward passes run in this phase (one per chosen token).",
    "Positions whose K/V the phase computed (the prefill: the whole prompt at once).",
    "Mean wall time per forward (forward + sampling): one token per forward, so for decode the time per "
    "generated token; for the prefill, the time to the first token.",
    "Positions computed per second of wall time: the prefill computes the whole prompt in one forward, so its "
    "positions/s is far above decode's one position per forward.",
    "Counted FLOPs of the phase's forwards divided by their wall time.",
    "Bytes one forward had to read from memory, on average: every weight once (at the width the engine keeps "
    "it) plus, with the cache, every cached K/V row. Prefill reads them once for the whole prompt; decode reads "
    "them all again for each single token.",
    "Those bytes divided by the wall time. With weights too big for the CPU caches (GPT-2 124M: 500 MB in f32) "
    "decode runs near the memory's read bandwidth - that is its limit - while prefill stays far below it (its "
    "limit is arithmetic). A small model that fits in the caches reads them faster than memory could."};
static_assert(sizeof(kPhaseHeadHelp) / sizeof(kPhaseHeadHelp[0]) == kPhaseColumns, "a tooltip per column");

struct PhaseRow {
  const char* name;
  const PhaseStats* st;
  const char* explain;
  glm::vec3 colour;
};

// A phase's cells, one per column of kPhaseHeads.
std::vector<std::string> phase_cells(const PhaseRow& r) {
  const PhaseStats& st = *r.st;
  return {r.name,
          std::to_string(st.records),
          std::to_string(st.positions),
          fixed("%.2f", st.mean_ms()),
          fixed("%.0f", st.positions_per_s()),
          fixed("%.2f", st.gflops_per_s()),
          fixed("%.1f", st.mean_read_bytes() / 1e6),
          fixed("%.1f", st.gb_per_s())};
}

// The phases in one table_or_lines: as lines (a narrow column at text scale
// 2.5) each phase's numbers are named by their headers, where a sideways
// scroll once showed the phases' names alone.
void phases_table_or_lines(const std::vector<PhaseRow>& rows) {
  TableSpec spec;
  spec.id = "phases";
  spec.headers.assign(std::begin(kPhaseHeads), std::end(kPhaseHeads));
  spec.header_help.assign(std::begin(kPhaseHeadHelp), std::end(kPhaseHeadHelp));
  spec.fate = false;
  std::vector<TableRow> table;
  for (const PhaseRow& r : rows)
    table.push_back({phase_cells(r), v4(r.colour), ImGui::GetStyleColorVec4(ImGuiCol_Text), r.explain});
  table_or_lines(spec, table);
}

}  // namespace

// --- prefill vs decode ----------------------------------------------------------

Commands panel_phases(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  Commands cmds;
  const int s = shown_step_or_note(engine, ui);
  if (s < 0) return cmds;
  const PhaseReport rep = measure_phases(engine.records(), static_cast<size_t>(s) + 1);
  if (rep.has_prefill) {
    char ttft[64];
    std::snprintf(ttft, sizeof ttft, "time to first token: %.2f ms", rep.ttft_ms);
    text_wrapped_coloured(v4(pal.prefill), ttft);  // a narrow column (text scale 2.5) wraps it
    hover_help("The prefill forward over the whole prompt plus choosing the first token.");
    const std::string prompt = "(prompt: " + std::to_string(rep.prompt_tokens) + " tokens)";
    same_line_if_fits(ImGui::CalcTextSize(prompt.c_str()).x);
    ImGui::TextDisabled("%s", prompt.c_str());
  }
  const PhaseRow rows[] = {
      {"prefill", &rep.prefill, kPrefillExplain, pal.prefill},
      {"decode (KV cache)", &rep.decode, kDecodeExplain, pal.cache_high},
      {"refill", &rep.refill, kRefillExplain, pal.refill},
      {"no cache", &rep.no_cache, kNoCacheExplain, pal.recomputed},
  };
  std::vector<PhaseRow> shown;
  for (const PhaseRow& r : rows)
    if (r.st->records > 0 || r.st == &rep.decode) shown.push_back(r);
  phases_table_or_lines(shown);
  // The contrast in words, from the numbers above.
  const std::string summary = phases_summary(rep);
  if (!summary.empty()) {
    text_wrapped_wordsf("%s", summary.c_str());
  } else {
    ImGui::TextDisabled("Decode numbers appear after the first KV CACHE step.");
  }
  return cmds;
}

// --- KV memory at real scale ----------------------------------------------------

namespace {
using KvConfigs = PanelMemo::KvConfigs;
// The published configurations, read into `c` the first time the calculator is drawn.
const KvConfigs& kv_configs(KvConfigs& c) {
  if (!c.loaded) {
    c.loaded = true;
    try {
      c.specs = load_kv_configs(default_kv_configs_path());
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  }
  return c;
}

// The context slider, the dtype and the article's example (32 layers x
// 4096 wide, fp16, 100K tokens: 512 KiB per token, ~50 GB).
void kv_calc_controls(const KvConfigs& cfg, const std::vector<KVDtype>& dtypes, UiState& ui) {
  // Wide enough that the grab leaves the number's digits clear (a narrow column at text scale 2.5).
  const float avail = ImGui::GetContentRegionAvail().x;
  const float label_w = ImGui::CalcTextSize("tokens").x + ImGui::GetStyle().ItemInnerSpacing.x;
  ImGui::SetNextItemWidth(std::min(avail - label_w, std::max(avail * 0.3f, 2 * ImGui::CalcTextSize("0000000").x)));
  ImGui::SliderInt("tokens", &ui.kv_context, 1, 1 << 20, "%d", ImGuiSliderFlags_Logarithmic);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    same_line_if_fits(checkbox_width(to_string(dtypes[i])));  // a radio button is a checkbox's width
    ImGui::RadioButton(to_string(dtypes[i]), &ui.kv_dtype, static_cast<int>(i));
  }
  same_line_if_fits(ImGui::CalcTextSize("article example").x + 2 * ImGui::GetStyle().FramePadding.x);
  int article = -1;
  for (size_t i = 0; i < cfg.specs.size(); ++i)
    if (cfg.specs[i].layers == 32 && cfg.specs[i].kv_heads * cfg.specs[i].head_dim == 4096 && !cfg.specs[i].gqa())
      article = static_cast<int>(i);
  ImGui::BeginDisabled(article < 0);
  if (ImGui::Button("article example")) {
    ui.kv_selected = article;
    ui.kv_context = 100000;
    ui.kv_dtype = 1;
  }
  ImGui::EndDisabled();
  hover_help("32 layers x 4096 x 2 (K and V) x 2 bytes = 512 KiB per token; x 100,000 tokens = ~50 GB.");
}

// The selected configuration in words.
void kv_calc_summary(const KvModelSpec& m, uint64_t tokens, KVDtype dt, const Palette& pal) {
  const FitCheck f = check_fit(m, tokens, dt, dt);
  ImGui::PushStyleColor(ImGuiCol_Text, v4(pal.cache_high));
  text_wrapped_wordsf("%s, %s: 2 x %d x %d x %d x %g B = %s/token; x %llu tokens = %s (%s); with weights: %s",
                      m.name.c_str(), to_string(dt), m.layers, m.kv_heads, m.head_dim, bytes_per_value(dt),
                      format_bytes(static_cast<double>(f.bytes_per_token)).c_str(),
                      static_cast<unsigned long long>(f.cached_positions),
                      format_bytes(static_cast<double>(f.cache_bytes)).c_str(),
                      format_bytes_decimal(static_cast<double>(f.cache_bytes)).c_str(),
                      format_bytes(static_cast<double>(f.total_bytes)).c_str());
  ImGui::PopStyleColor();
}

void kv_calc_row_tooltip(const KvModelSpec& m, const FitCheck& f, KVDtype dt) {
  begin_wrapped_tooltip();
  ImGui::Text("%s: %d layers, %d query heads, %d KV heads (%s), head size %d, width %d, context %d", m.name.c_str(),
              m.layers, m.query_heads, m.kv_heads, m.attention_kind(), m.head_dim, m.hidden, m.context);
  if (m.sliding_window > 0) ImGui::Text("sliding window: the cache holds at most %d positions", m.sliding_window);
  ImGui::Text("2 x %d x %d x %d x %g B = %s per token", m.layers, m.kv_heads, m.head_dim, bytes_per_value(dt),
              format_bytes(static_cast<double>(f.bytes_per_token)).c_str());
  ImGui::Text("%llu positions cached -> %s (%s)", static_cast<unsigned long long>(f.cached_positions),
              format_bytes(static_cast<double>(f.cache_bytes)).c_str(),
              format_bytes_decimal(static_cast<double>(f.cache_bytes)).c_str());
  if (!m.note.empty()) ImGui::TextUnformatted(m.note.c_str());
  if (!m.source.empty()) ImGui::TextDisabled("source: %s", m.source.c_str());
  end_wrapped_tooltip();
}

void fit_cell(bool total, bool cache_only) {
  if (total)
    ImGui::TextColored(ImVec4(0.45f, 1.0f, 0.55f, 1), "yes");
  else if (cache_only)
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.4f, 1), "KV only");
  else
    ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.35f, 1), "no");
}

// One table row; `row_id` is the row's index in the published configs (< 0: the loaded model).
void kv_calc_row(const KvModelSpec& m, int row_id, size_t i, uint64_t tokens, KVDtype dt, UiState& ui) {
  const FitCheck f = check_fit(m, tokens, dt, dt);
  ImGui::TableNextRow();
  const bool sel = row_id == ui.kv_selected && row_id >= 0;
  ImGui::TableSetColumnIndex(0);
  if (ImGui::Selectable((m.name + "##kv" + std::to_string(i)).c_str(), sel, ImGuiSelectableFlags_SpanAllColumns))
    ui.kv_selected = row_id;
  if (sel && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
  if (ImGui::IsItemHovered()) kv_calc_row_tooltip(m, f, dt);
  ImGui::TableSetColumnIndex(1);
  ImGui::Text("%d", m.layers);
  ImGui::TableSetColumnIndex(2);
  ImGui::Text("%dx%d %s%s", m.kv_heads, m.head_dim, m.attention_kind(), m.sliding_window ? " SWA" : "");
  ImGui::TableSetColumnIndex(3);
  ImGui::TextUnformatted(format_bytes(static_cast<double>(f.bytes_per_token)).c_str());
  ImGui::TableSetColumnIndex(4);
  const ImVec4 warn = f.beyond_context ? ImVec4(1.0f, 0.75f, 0.4f, 1) : ImVec4(1, 1, 1, 1);
  ImGui::TextColored(warn, "%s%s", format_bytes(static_cast<double>(f.cache_bytes)).c_str(),
                     f.beyond_context ? " *" : "");
  if (f.beyond_context && ImGui::IsItemHovered())
    ImGui::SetTooltip("* beyond the %d tokens this model was trained for", m.context);
  ImGui::TableSetColumnIndex(5);
  ImGui::TextUnformatted(format_bytes(static_cast<double>(f.weights_bytes)).c_str());
  ImGui::TableSetColumnIndex(6);
  fit_cell(f.total_fits_24, f.cache_fits_24);
  ImGui::TableSetColumnIndex(7);
  fit_cell(f.total_fits_80, f.cache_fits_80);
}

}  // namespace

namespace {

// Eviction by score, when the shown step runs it: what the rule keeps, what it
// costs, where it fails, with this run's numbers (app/lessons/eviction.h).
void eviction_lesson_section(const EngineState& engine, const Palette& pal) {
  const EvictionLesson e = eviction_lesson(engine.records(), engine.seq_count);
  if (!e.active) return;
  if (!ImGui::CollapsingHeader(header_label("Eviction by score: this run", "Eviction").c_str(),
                               ImGuiTreeNodeFlags_DefaultOpen))
    return;
  text_wrapped_wordsf("%s", eviction_keeps_text(e).c_str());
  text_wrapped_wordsf("%s", eviction_cost_text(e).c_str());
  ImGui::PushStyleColor(ImGuiCol_Text, v4(e.misses.empty() ? pal.cache_high : pal.evicted));
  text_wrapped_wordsf("%s", eviction_fails_text(e).c_str());
  ImGui::PopStyleColor();
  text_wrapped_coloured(
      ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled),
      e.rule == KVEvict::kTova
          ? "In the 3D view: a block's colour and the bar under it are its score, pink = the layer's "
            "highest (TOVA: the attention rays of that layer, mean of its heads, are the same weights); "
            "hover a hole for when and why it was dropped."
          : "In the 3D view: a block's colour and the bar under it are its accumulated score, pink = "
            "the layer's highest; hover a hole for when and why it was dropped.");
  ImGui::Separator();
}

}  // namespace

Commands panel_kv_calculator(const EngineState& engine, UiState& ui) {
  const Palette& pal = palette_for(ui.colour_blind);
  Commands cmds;
  eviction_lesson_section(engine, pal);
  const KvConfigs& cfg = kv_configs(ui.memo.kv_configs);
  const std::vector<KVDtype>& dtypes = all_kv_dtypes();
  ui.kv_dtype = std::clamp(ui.kv_dtype, 0, static_cast<int>(dtypes.size()) - 1);
  const KVDtype dt = dtypes[static_cast<size_t>(ui.kv_dtype)];
  // The loaded model first (its real f32 cache), then the published configs.
  if (engine.model) {
    const Config& c = engine.model->config;
    text_wrapped_wordsf("%s: %s/token = 2 (K, V) x %d layers x %d KV heads x %d dims x 4 B (f32)",
                        engine.model->name.c_str(), format_bytes(static_cast<double>(kv_bytes_per_position(c))).c_str(),
                        c.n_layer, c.kv_heads(), c.head_dim());
  }
  kv_calc_controls(cfg, dtypes, ui);
  if (!cfg.error.empty()) {
    ImGui::TextColored(v4(pal.recomputed), "%s", cfg.error.c_str());
    return cmds;
  }
  std::vector<KvModelSpec> specs;
  if (engine.model)
    specs.push_back(spec_from_config(engine.model->config, engine.model->name + " (loaded)",
                                     static_cast<uint64_t>(engine.model->n_params)));
  const int offset = static_cast<int>(specs.size());
  specs.insert(specs.end(), cfg.specs.begin(), cfg.specs.end());
  const uint64_t tokens = static_cast<uint64_t>(std::max(1, ui.kv_context));
  const bool picked = ui.kv_selected >= 0 && ui.kv_selected < static_cast<int>(cfg.specs.size());
  const int sel = picked ? ui.kv_selected + offset : offset > 0 ? 0 : -1;
  if (sel >= 0) kv_calc_summary(specs[static_cast<size_t>(sel)], tokens, dt, pal);
  const float line = ImGui::GetTextLineHeightWithSpacing();
  // The footnote wraps under the table, which leaves it the rows it needs.
  const std::string note = std::string("weights and cache in ") + to_string(dt) +
                           "; yes = weights + cache fit the 24 / 80 GiB card. Sources: "
                           "assets/kv_configs.json (hover a row).";
  const float note_h = ImGui::CalcTextSize(note.c_str(), nullptr, false, ImGui::GetContentRegionAvail().x).y +
                       ImGui::GetStyle().ItemSpacing.y;
  // Where the eight columns cannot all be read side by side (a narrow column
  // at a large text scale), they keep their width and scroll sideways, the
  // model's name frozen at the left.
  const bool narrow = ImGui::GetContentRegionAvail().x < 36 * ImGui::GetFontSize();
  const ImGuiTableFlags sizing =
      narrow ? ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX : ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("kv", 8,
                        ImGuiTableFlags_RowBg | sizing | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV,
                        ImVec2(0, std::max(line * 4, ImGui::GetContentRegionAvail().y - note_h)))) {
    ImGui::TableSetupScrollFreeze(narrow ? 1 : 0, 1);
    const char* heads[] = {"model", "L", "KV heads", "/token", "cache", "weights", "24 GB", "80 GB"};
    const float wt[] = {4.0f, 0.6f, 1.9f, 1.3f, 1.3f, 1.3f, 1.2f, 1.2f};
    for (int i = 0; i < 8; ++i)
      ImGui::TableSetupColumn(heads[i], narrow ? ImGuiTableColumnFlags_None : ImGuiTableColumnFlags_WidthStretch,
                              narrow ? 0.0f : wt[i]);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < specs.size(); ++i) kv_calc_row(specs[i], static_cast<int>(i) - offset, i, tokens, dt, ui);
    ImGui::EndTable();
  }
  text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled), note);
  return cmds;
}

}  // namespace kvscope
