#include "panel_teach.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine.h"
#include "scene_format.h"
#include "teach_phases.h"

namespace kvscope {

namespace {

std::string one_line(const std::string& s, size_t max_chars) {
  std::string out;
  for (char ch : s) out += (ch == '\n' || ch == '\r' || ch == '\t') ? ' ' : ch;
  if (out.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    out = out.substr(0, cut) + "\xE2\x80\xA6";
  }
  return out;
}

void help_marker(const char* text) {
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

}  // namespace

// --- timeline -----------------------------------------------------------------

Commands panel_timeline(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const int n = snap.timeline_size();
  const int s = shown_step(snap, ui);
  const float bw = ImGui::GetFrameHeight() * 1.6f;
  ImGui::BeginDisabled(n == 0 || s <= 0);
  if (ImGui::Button("\xE2\x97\x80##back", ImVec2(bw, 0))) cmds.push_back(cmd::Scrub{-1});
  ImGui::EndDisabled();
  ImGui::SameLine();
  const float info_w = ImGui::CalcTextSize("step 0000 / 0000  LIVE  ").x;
  ImGui::SetNextItemWidth(std::max(80.0f, ImGui::GetContentRegionAvail().x - bw - info_w - 16));
  int step = std::max(0, s);
  ImGui::BeginDisabled(n <= 1);
  if (ImGui::SliderInt("##timeline", &step, 0, std::max(0, n - 1), n == 0 ? "no steps yet" : "step %d")) {
    cmds.push_back(cmd::ScrubTo{step});
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Scrub through the generation: scene, beams, cache, counters and bars show that step.\n"
        "\xE2\x86\x90 / \xE2\x86\x92 one step, Shift+arrow 10 steps; \xE2\x86\x92 at the newest step "
        "computes the next one.");
  ImGui::SameLine();
  ImGui::BeginDisabled(n == 0);
  if (ImGui::Button("\xE2\x96\xB6##fwd", ImVec2(bw, 0))) {
    cmds.push_back(cmd::Scrub{1});
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  const bool live = ui.view_step < 0 || s == n - 1;
  if (n > 0)
    ImGui::TextColored(live ? ImVec4(0.45f, 1.0f, 0.55f, 1) : ImVec4(1.0f, 0.8f, 0.4f, 1), "%d / %d %s", s, n - 1,
                       live ? "LIVE" : "PAST");
  // The history's memory: what it holds, the budget, what was dropped.
  const TrimReport& t = snap.tree.trimmed();
  if (t.any()) {
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.4f, 1),
                       "history %s of %s: attention of %d oldest steps dropped, logits of %d, K/V of %d",
                       format_bytes(snap.tree.bytes()).c_str(), format_bytes(snap.tree.budget()).c_str(),
                       t.attention_dropped, t.logits_dropped, t.kv_dropped);
  } else {
    ImGui::TextDisabled("history %s of the %s budget, every step in full detail (%zu branch%s)",
                        format_bytes(snap.tree.bytes()).c_str(), format_bytes(snap.tree.budget()).c_str(),
                        snap.tree.size(), snap.tree.size() == 1 ? "" : "es");
  }
  return cmds;
}

// --- branches -------------------------------------------------------------------

Commands panel_branches(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  (void)ui;
  if (snap.tree.size() == 0) {
    ImGui::TextDisabled("(no generation yet)");
    return cmds;
  }
  ImGui::TextWrapped(
      "Click a candidate in the Next-token panel to force it at the shown step: generation forks there. "
      "Click a branch to return to it.");
  const uint64_t saved = snap.tree.flops_saved_total();
  ImGui::TextColored(v4(palette::kCacheHigh), "FLOPs saved by reusing the KV cache at forks: %s",
                     format_flops(saved).c_str());
  const Branch& cur = snap.tree.current_branch();
  if (cur.parent >= 0) {
    const ForkCost& f = cur.fork;
    if (f.cache_reused)
      ImGui::TextWrapped("this branch: cache cut back to %d positions and kept; its first step cost %s instead of %s",
                         f.reused_positions, format_flops(f.flops_reuse).c_str(),
                         format_flops(f.flops_recompute).c_str());
    else
      ImGui::TextWrapped("this branch: every position recomputed (%s): %s", f.fork_pos > 0 ? "no reusable cache" : "",
                         format_flops(f.flops_recompute).c_str());
    ImGui::Text("shares %d positions with its parent", snap.tree.shared_positions(cur.id, cur.parent));
  }
  ImGui::Separator();
  if (ImGui::BeginTable(
          "branches", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_ScrollY,
          ImVec2(0, std::max(ImGui::GetTextLineHeightWithSpacing() * 3, ImGui::GetContentRegionAvail().y)))) {
    ImGui::TableSetupColumn("branch (generated text)", ImGuiTableColumnFlags_WidthStretch, 5.0f);
    ImGui::TableSetupColumn("probability", ImGuiTableColumnFlags_WidthStretch, 1.2f);
    ImGui::TableSetupColumn("tokens", ImGuiTableColumnFlags_WidthStretch, 0.8f);
    ImGui::TableHeadersRow();
    for (const TreeRow& row : snap.tree.rows()) {
      const Branch& b = snap.tree.branch(row.id);
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      std::string label(static_cast<size_t>(row.depth) * 2, ' ');
      label += row.depth > 0 ? "\xE2\x94\x94 " : "";
      label += b.parent < 0 ? "root: " : "@" + std::to_string(b.fork_step) + ": ";
      label += "\"" + one_line(b.text, 60) + "\"";
      label += "##b" + std::to_string(b.id);
      const bool current = b.id == snap.tree.current();
      if (ImGui::Selectable(label.c_str(), current, ImGuiSelectableFlags_SpanAllColumns) && !current) {
        cmds.push_back(cmd::SelectBranch{b.id});
      }
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
        ImGui::TextUnformatted(b.text.c_str());
        ImGui::PopTextWrapPos();
        if (b.parent >= 0)
          ImGui::Text("forked at step %d; fork saved %s", b.fork_step, format_flops(b.fork.flops_saved).c_str());
        ImGui::EndTooltip();
      }
      ImGui::TableSetColumnIndex(1);
      ImGui::Text("%.3g", b.prob());
      ImGui::TableSetColumnIndex(2);
      ImGui::Text("%d", b.n_generated());
    }
    ImGui::EndTable();
  }
  return cmds;
}

// --- prefill vs decode ----------------------------------------------------------

Commands panel_phases(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const int s = shown_step(snap, ui);
  if (s < 0) {
    ImGui::TextDisabled("(no step yet)");
    return cmds;
  }
  const PhaseReport rep = measure_phases(snap.records, static_cast<size_t>(s) + 1);
  if (rep.has_prefill) {
    ImGui::TextColored(v4(palette::kPrefill), "time to first token: %.2f ms", rep.ttft_ms);
    help_marker("The prefill forward over the whole prompt plus choosing the first token.");
    ImGui::SameLine();
    ImGui::TextDisabled("(prompt: %d tokens)", rep.prompt_tokens);
  }
  struct Row {
    const char* name;
    const PhaseStats* st;
    const char* explain;
    glm::vec3 colour;
  };
  const Row rows[] = {
      {"prefill", &rep.prefill, kPrefillExplain, palette::kPrefill},
      {"decode (KV cache)", &rep.decode, kDecodeExplain, palette::kCacheHigh},
      {"refill", &rep.refill, kRefillExplain, palette::kRefill},
      {"no cache", &rep.no_cache, kNoCacheExplain, palette::kRecomputed},
  };
  if (ImGui::BeginTable("phases", 8, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    const char* heads[] = {"phase", "forwards", "positions", "ms / token", "tokens/s", "GFLOP/s", "MB read", "GB/s"};
    const char* head_help[] = {
        "Hover a phase for what its forwards do.",
        "Forward passes run in this phase (one per chosen token).",
        "Positions whose K/V the phase computed (the prefill: the whole prompt at once).",
        "Mean wall time per forward (forward + sampling): for decode, the time per generated token.",
        "Chosen tokens per second of wall time.",
        "Counted FLOPs of the phase's forwards divided by their wall time.",
        "Bytes one forward had to read from memory, on average: every weight once (at the width the engine keeps "
        "it) plus, with the cache, every cached K/V row. Prefill reads them once for the whole prompt; decode reads "
        "them all again for each single token.",
        "Those bytes divided by the wall time. With weights too big for the CPU caches (GPT-2 124M: 500 MB in f32) "
        "decode runs near the memory's read bandwidth - that is its limit - while prefill stays far below it (its "
        "limit is arithmetic). A small model that fits in the caches reads them faster than memory could."};
    for (const char* h : heads) ImGui::TableSetupColumn(h);
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int i = 0; i < 8; ++i) {
      ImGui::TableSetColumnIndex(i);
      ImGui::TableHeader(heads[i]);
      help_marker(head_help[i]);
    }
    for (const Row& r : rows) {
      if (r.st->records == 0 && r.st != &rep.decode) continue;
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextColored(v4(r.colour), "%s", r.name);
      help_marker(r.explain);
      ImGui::TableSetColumnIndex(1);
      ImGui::Text("%d", r.st->records);
      ImGui::TableSetColumnIndex(2);
      ImGui::Text("%lld", static_cast<long long>(r.st->positions));
      ImGui::TableSetColumnIndex(3);
      ImGui::Text("%.2f", r.st->mean_ms());
      ImGui::TableSetColumnIndex(4);
      ImGui::Text("%.1f", r.st->tokens_per_s());
      ImGui::TableSetColumnIndex(5);
      ImGui::Text("%.2f", r.st->gflops_per_s());
      ImGui::TableSetColumnIndex(6);
      ImGui::Text("%.1f", r.st->mean_read_bytes() / 1e6);
      ImGui::TableSetColumnIndex(7);
      ImGui::Text("%.1f", r.st->gb_per_s());
    }
    ImGui::EndTable();
  }
  // The contrast in words, from the numbers above.
  const std::string summary = phases_summary(rep);
  if (!summary.empty()) {
    ImGui::TextWrapped("%s", summary.c_str());
  } else {
    ImGui::TextDisabled("Decode numbers appear after the first KV CACHE step.");
  }
  return cmds;
}

// --- KV memory at real scale ----------------------------------------------------

namespace {
struct KvConfigs {
  bool loaded = false;
  std::vector<KvModelSpec> specs;
  std::string error;
};
const KvConfigs& kv_configs() {
  static KvConfigs c;
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
}  // namespace

Commands panel_kv_calculator(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const KvConfigs& cfg = kv_configs();
  const std::vector<KvDtype>& dtypes = all_kv_dtypes();
  ui.kv_dtype = std::clamp(ui.kv_dtype, 0, static_cast<int>(dtypes.size()) - 1);
  const KvDtype dt = dtypes[static_cast<size_t>(ui.kv_dtype)];
  // The loaded model first (its real f32 cache), then the published configs.
  if (snap.model) {
    const Config& c = snap.model->config;
    ImGui::Text("%s: %s/token = 2 (K, V) x %d layers x %d heads x %d dims x 4 B (fp32)", snap.model->name.c_str(),
                format_bytes_binary(static_cast<double>(kv_bytes_per_position(c))).c_str(), c.n_layer, c.n_head,
                c.head_dim());
  }
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.3f);
  ImGui::SliderInt("tokens", &ui.kv_context, 1, 1 << 20, "%d", ImGuiSliderFlags_Logarithmic);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    ImGui::SameLine();
    ImGui::RadioButton(to_string(dtypes[i]), &ui.kv_dtype, static_cast<int>(i));
  }
  ImGui::SameLine();
  // The article's example: 32 layers x 4096 wide, fp16, 100K tokens.
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
  help_marker("32 layers x 4096 x 2 (K and V) x 2 bytes = 512 KiB per token; x 100,000 tokens = ~50 GB.");
  if (!cfg.error.empty()) {
    ImGui::TextColored(v4(palette::kRecomputed), "%s", cfg.error.c_str());
    return cmds;
  }
  std::vector<KvModelSpec> specs;
  if (snap.model)
    specs.push_back(spec_from_config(snap.model->config, snap.model->name + " (loaded)",
                                     static_cast<uint64_t>(snap.model->n_params)));
  const int offset = static_cast<int>(specs.size());
  specs.insert(specs.end(), cfg.specs.begin(), cfg.specs.end());
  const uint64_t tokens = static_cast<uint64_t>(std::max(1, ui.kv_context));
  // The selected configuration in words (the article's example: 512 KiB/token, ~50 GB at 100K).
  {
    const int sel = ui.kv_selected >= 0 && ui.kv_selected < static_cast<int>(cfg.specs.size()) ? ui.kv_selected + offset
                    : offset > 0                                                               ? 0
                                                                                               : -1;
    if (sel >= 0) {
      const KvModelSpec& m = specs[static_cast<size_t>(sel)];
      const FitCheck f = check_fit(m, tokens, dt, dt);
      ImGui::PushStyleColor(ImGuiCol_Text, v4(palette::kCacheHigh));
      ImGui::TextWrapped("%s, %s: 2 x %d x %d x %d x %g B = %s/token; x %llu tokens = %s (%s); with weights: %s",
                         m.name.c_str(), to_string(dt), m.layers, m.kv_heads, m.head_dim, dtype_bytes(dt),
                         format_bytes_binary(static_cast<double>(f.bytes_per_token)).c_str(),
                         static_cast<unsigned long long>(f.cached_positions),
                         format_bytes_binary(static_cast<double>(f.cache_bytes)).c_str(),
                         format_bytes_decimal(static_cast<double>(f.cache_bytes)).c_str(),
                         format_bytes_binary(static_cast<double>(f.total_bytes)).c_str());
      ImGui::PopStyleColor();
    }
  }
  if (ImGui::BeginTable(
          "kv", 8,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_ScrollY |
              ImGuiTableFlags_BordersInnerV,
          ImVec2(0, std::max(ImGui::GetTextLineHeightWithSpacing() * 4,
                             ImGui::GetContentRegionAvail().y - ImGui::GetTextLineHeightWithSpacing())))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    const char* heads[] = {"model", "L", "KV heads", "/token", "cache", "weights", "24 GB", "80 GB"};
    const float wt[] = {4.0f, 0.6f, 1.9f, 1.3f, 1.3f, 1.3f, 1.2f, 1.2f};
    for (int i = 0; i < 8; ++i) ImGui::TableSetupColumn(heads[i], ImGuiTableColumnFlags_WidthStretch, wt[i]);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < specs.size(); ++i) {
      const KvModelSpec& m = specs[i];
      const FitCheck f = check_fit(m, tokens, dt, dt);
      ImGui::TableNextRow();
      const int row_id = static_cast<int>(i) - offset;
      const bool sel = row_id == ui.kv_selected && row_id >= 0;
      ImGui::TableSetColumnIndex(0);
      if (ImGui::Selectable((m.name + "##kv" + std::to_string(i)).c_str(), sel, ImGuiSelectableFlags_SpanAllColumns))
        ui.kv_selected = row_id;
      if (sel && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::Text("%s: %d layers, %d query heads, %d KV heads (%s), head size %d, width %d, context %d",
                    m.name.c_str(), m.layers, m.query_heads, m.kv_heads, m.attention_kind(), m.head_dim, m.hidden,
                    m.context);
        if (m.sliding_window > 0) ImGui::Text("sliding window: the cache holds at most %d positions", m.sliding_window);
        ImGui::Text("2 x %d x %d x %d x %g B = %s per token", m.layers, m.kv_heads, m.head_dim, dtype_bytes(dt),
                    format_bytes_binary(static_cast<double>(f.bytes_per_token)).c_str());
        ImGui::Text("%llu positions cached -> %s (%s)", static_cast<unsigned long long>(f.cached_positions),
                    format_bytes_binary(static_cast<double>(f.cache_bytes)).c_str(),
                    format_bytes_decimal(static_cast<double>(f.cache_bytes)).c_str());
        if (!m.note.empty()) ImGui::TextUnformatted(m.note.c_str());
        if (!m.source.empty()) ImGui::TextDisabled("source: %s", m.source.c_str());
        ImGui::EndTooltip();
      }
      ImGui::TableSetColumnIndex(1);
      ImGui::Text("%d", m.layers);
      ImGui::TableSetColumnIndex(2);
      ImGui::Text("%dx%d %s%s", m.kv_heads, m.head_dim, m.attention_kind(), m.sliding_window ? " SWA" : "");
      ImGui::TableSetColumnIndex(3);
      ImGui::TextUnformatted(format_bytes_binary(static_cast<double>(f.bytes_per_token)).c_str());
      ImGui::TableSetColumnIndex(4);
      const ImVec4 warn = f.beyond_context ? ImVec4(1.0f, 0.75f, 0.4f, 1) : ImVec4(1, 1, 1, 1);
      ImGui::TextColored(warn, "%s%s", format_bytes_binary(static_cast<double>(f.cache_bytes)).c_str(),
                         f.beyond_context ? " *" : "");
      if (f.beyond_context && ImGui::IsItemHovered())
        ImGui::SetTooltip("* beyond the %d tokens this model was trained for", m.context);
      ImGui::TableSetColumnIndex(5);
      ImGui::TextUnformatted(format_bytes_binary(static_cast<double>(f.weights_bytes)).c_str());
      auto fit = [](bool total, bool cache_only) {
        if (total)
          ImGui::TextColored(ImVec4(0.45f, 1.0f, 0.55f, 1), "yes");
        else if (cache_only)
          ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.4f, 1), "KV only");
        else
          ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.35f, 1), "no");
      };
      ImGui::TableSetColumnIndex(6);
      fit(f.total_fits_24, f.cache_fits_24);
      ImGui::TableSetColumnIndex(7);
      fit(f.total_fits_80, f.cache_fits_80);
    }
    ImGui::EndTable();
  }
  ImGui::TextDisabled(
      "weights and cache in %s; yes = weights + cache fit the 24 / 80 GiB card. Sources: "
      "assets/kv_configs.json (hover a row).",
      to_string(dt));
  return cmds;
}

// --- attention overview ------------------------------------------------------------

namespace {

// The binned causal attention matrix of every (layer, head), cached per shown step.
// Keyed by the record itself (held, so a new record can never reuse its address).
struct HeatCache {
  RecordPtr rec;
  size_t count = 0;
  int bins = 0, S = 0, L = 0, H = 0;
  std::vector<float> cell;     // (layer, head, bin_q, bin_k): the largest weight in the bin
  std::vector<uint8_t> known;  // (bin_q): some row of the bin is held
  std::vector<int> bin_start;  // (bins + 1): first position of each bin
};

const HeatCache& heat_matrix(const std::vector<RecordPtr>& records, int step, int max_bins) {
  static HeatCache c;
  const RecordPtr rec = step >= 0 && step < static_cast<int>(records.size()) ? records[step] : nullptr;
  if (c.rec == rec && c.count == records.size() && c.bins == std::min(max_bins, rec ? rec->seq_len : 0)) return c;
  c = HeatCache();
  c.rec = rec;
  c.count = records.size();
  if (!rec) return c;
  c.S = rec->seq_len;
  c.L = rec->n_layer;
  c.H = rec->n_head;
  c.bins = std::min(max_bins, c.S);
  const int B = c.bins;
  c.bin_start.resize(static_cast<size_t>(B) + 1);
  for (int b = 0; b <= B; ++b) c.bin_start[b] = static_cast<int>(static_cast<int64_t>(b) * c.S / B);
  std::vector<int> bin_of(static_cast<size_t>(c.S));
  for (int b = 0; b < B; ++b)
    for (int p = c.bin_start[b]; p < c.bin_start[b + 1]; ++p) bin_of[p] = b;
  c.cell.assign(static_cast<size_t>(c.L) * c.H * B * B, 0.0f);
  c.known.assign(static_cast<size_t>(B), 0);
  // Rows of this sequence come from the record that computed them: a record
  // of records [0, step] holds query rows [seq_len - n_rows, seq_len).
  for (int i = 0; i <= step; ++i) {
    const StepRecord& r = *records[i];
    if (r.n_rows <= 0 || r.attn.empty() || r.n_layer != c.L || r.n_head != c.H) continue;
    for (int row = 0; row < r.n_rows; ++row) {
      const int q = r.seq_len - r.n_rows + row;
      if (q < 0 || q >= c.S) continue;
      const int bq = bin_of[q];
      c.known[bq] = 1;
      for (int l = 0; l < c.L; ++l)
        for (int h = 0; h < c.H; ++h) {
          float* out = &c.cell[((static_cast<size_t>(l) * c.H + h) * B + bq) * B];
          for (int k = 0; k <= q && k < r.seq_len; ++k) {
            const float w = r.attention(l, h, row, k);
            float& o = out[bin_of[k]];
            if (w > o) o = w;
          }
        }
    }
  }
  return c;
}

}  // namespace

HeatmapHit draw_heatmap_grid(ImDrawList* dl, ImVec2 p0, ImVec2 size, const std::vector<RecordPtr>& records, int step,
                             int sel_layer, int sel_head, ImVec2 mouse, const ImFont* font, float font_size) {
  HeatmapHit hit;
  if (step < 0 || step >= static_cast<int>(records.size())) return hit;
  const StepRecord& rec = *records[step];
  const int L = rec.n_layer, H = rec.n_head;
  if (L <= 0 || H <= 0) return hit;
  const float label_w = font_size * 2.2f, label_h = font_size * 1.3f;
  const float gap = std::max(2.0f, font_size * 0.25f);
  const float cw = (size.x - label_w) / static_cast<float>(H) - gap;
  const float ch = (size.y - label_h) / static_cast<float>(L) - gap;
  const float cell = std::max(4.0f, std::min(cw, ch));
  // Bins: about one per 3 pixels, and at most ~60k rectangles for the whole grid.
  int max_bins = std::max(2, static_cast<int>(cell / 3.0f));
  max_bins = std::min(max_bins, std::max(4, static_cast<int>(std::sqrt(60000.0 / (L * H)))));
  const HeatCache& hm = heat_matrix(records, step, max_bins);
  if (hm.bins == 0) return hit;
  const int B = hm.bins;
  const float bs = cell / static_cast<float>(B);
  const ImU32 text = IM_COL32(170, 180, 205, 255);
  char buf[16];
  for (int h = 0; h < H; ++h) {
    std::snprintf(buf, sizeof(buf), "H%d", h);
    dl->AddText(font, font_size, ImVec2(p0.x + label_w + h * (cell + gap) + cell * 0.5f - font_size * 0.6f, p0.y),
                h == sel_head ? to_imcolor(palette::kBeam) : text, buf);
  }
  const glm::vec3 lo = palette::kBackground, hi = palette::kBeam;
  for (int l = 0; l < L; ++l) {
    const float y0 = p0.y + label_h + l * (cell + gap);
    std::snprintf(buf, sizeof(buf), "L%d", l);
    dl->AddText(font, font_size, ImVec2(p0.x, y0 + cell * 0.5f - font_size * 0.5f),
                l == sel_layer ? to_imcolor(palette::kBeam) : text, buf);
    for (int h = 0; h < H; ++h) {
      const float x0 = p0.x + label_w + h * (cell + gap);
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + cell, y0 + cell), IM_COL32(14, 16, 26, 255));
      const float* m = &hm.cell[(static_cast<size_t>(l) * H + h) * B * B];
      for (int bq = 0; bq < B; ++bq) {
        if (!hm.known[bq]) continue;
        for (int bk = 0; bk <= bq; ++bk) {
          const float w = m[bq * B + bk];
          if (w <= 0.0f) continue;
          const glm::vec3 c = glm::mix(lo, hi, std::sqrt(std::min(1.0f, w)));
          dl->AddRectFilled(ImVec2(x0 + bk * bs, y0 + bq * bs), ImVec2(x0 + (bk + 1) * bs, y0 + (bq + 1) * bs),
                            to_imcolor(c));
        }
      }
      // The shown step's query row (the newest position).
      const float ry = y0 + (B - 1) * bs;
      dl->AddRect(ImVec2(x0, ry), ImVec2(x0 + cell, ry + bs), IM_COL32(255, 240, 120, 200));
      const bool sel =
          (sel_layer < 0 || sel_layer == l) && (sel_head < 0 || sel_head == h) && !(sel_layer < 0 && sel_head < 0);
      if (sel)
        dl->AddRect(ImVec2(x0 - 2, y0 - 2), ImVec2(x0 + cell + 2, y0 + cell + 2), to_imcolor(palette::kBeam), 0, 0,
                    2.0f);
      if (mouse.x >= x0 && mouse.x < x0 + cell && mouse.y >= y0 && mouse.y < y0 + cell) {
        hit.layer = l;
        hit.head = h;
        const int bq = std::clamp(static_cast<int>((mouse.y - y0) / bs), 0, B - 1);
        const int bk = std::clamp(static_cast<int>((mouse.x - x0) / bs), 0, B - 1);
        hit.known = hm.known[bq] != 0;
        if (bk <= bq) {
          hit.query = hm.bin_start[bq];
          hit.key = hm.bin_start[bk];
          hit.weight = m[bq * B + bk];
        }
        dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x0 + cell + 1, y0 + cell + 1), IM_COL32(255, 255, 255, 255));
      }
    }
  }
  return hit;
}

Commands panel_heatmaps(const Snapshot& snap, UiState& ui) {
  Commands cmds;
  const int s = shown_step(snap, ui);
  if (s < 0) {
    ImGui::TextDisabled("(no step yet)");
    return cmds;
  }
  ImGui::TextDisabled(
      "Attention of every layer (rows) and head (columns) up to the shown step: row = query position, "
      "column = key; brightness = sqrt(weight). Click one to show its beams.");
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 size(avail.x, std::max(60.0f, avail.y));
  ImGui::InvisibleButton("##heat", size);
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = hovered ? ImGui::GetIO().MousePos : ImVec2(-1e9f, -1e9f);
  const HeatmapHit hit = draw_heatmap_grid(ImGui::GetWindowDrawList(), p0, size, snap.records, s, ui.layer, ui.head,
                                           mouse, ImGui::GetFont(), ImGui::GetFontSize());
  if (hit.layer >= 0) {
    ImGui::BeginTooltip();
    ImGui::Text("layer %d, head %d (click: show its beams)", hit.layer, hit.head);
    if (hit.query >= 0 && hit.known) {
      auto piece = [&](int p) {
        return p >= 0 && p < static_cast<int>(snap.seq.tokens.size()) ? visible_piece(snap.seq.tokens[p].piece)
                                                                      : std::string("?");
      };
      ImGui::Text("query %d \"%s\" -> key %d \"%s\": weight %.4f", hit.query, piece(hit.query).c_str(), hit.key,
                  piece(hit.key).c_str(), hit.weight);
    } else if (hit.query >= 0) {
      ImGui::TextUnformatted("(this row's attention was dropped by the history's memory budget)");
    }
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked()) {
      cmds.push_back(cmd::SelectHead{hit.layer, hit.head});
    }
  }
  return cmds;
}

// --- presentation HUD ----------------------------------------------------------------

namespace {

// The step line and the keys of the presentation strip.
std::string hud_line(const HudInfo& hud) {
  const StepRecord* r = hud.record;
  if (!r) return hud.model_name;
  char line[320];
  std::snprintf(line, sizeof(line), "%s   step %d / %d%s   %s   %d positions   %s this step   cache %s",
                hud.model_name.c_str(), hud.step, std::max(0, hud.n_steps - 1), hud.live ? "" : " (past)",
                r->mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE", r->seq_len, format_flops(r->flops).c_str(),
                format_bytes(r->kv_bytes).c_str());
  return line;
}
const char* const kHudKeys =
    "PgDn / \xE2\x86\x92 next   PgUp / \xE2\x86\x90 back   Space play   C cache   P predict   Enter reveal   "
    "F5 panels";

}  // namespace

HudGeometry presentation_hud_geometry(ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  HudGeometry g;
  const float bs = big->FontSize, ss = small->FontSize * 1.15f;
  // The card: as wide as its title needs, at most 30 % of the width and 45 % of the height.
  if (hud.record) {
    char title[160];
    std::snprintf(title, sizeof(title), "next: %s  %.0f%%", visible_piece(hud.record->piece).c_str(),
                  100.0 * hud.record->prob);
    const float natural_w = std::max(big->CalcTextSizeA(bs, 1e9f, 0, title).x, ss * 16.0f) + ss * 1.6f;
    const float natural_h = ss * 1.6f + bs * 1.3f + ss * 1.25f * 5;
    g.card_k = std::min({1.0f, size.x * 0.3f / natural_w, size.y * 0.45f / natural_h});
    g.card_w = natural_w * g.card_k + ss * 0.8f * g.card_k;
  }
  // The strip: two lines that fit the width.
  const float text_w = std::max(small->CalcTextSizeA(ss, 1e9f, 0, hud_line(hud).c_str()).x,
                                small->CalcTextSizeA(ss, 1e9f, 0, kHudKeys).x);
  g.strip_k = std::min(1.0f, (size.x - ss * 1.6f) / std::max(1.0f, text_w));
  g.strip_h = ss * 2.6f * g.strip_k;
  return g;
}

void draw_presentation_hud(ImDrawList* dl, ImVec2 origin, ImVec2 size, const OverlayFonts& fonts, const HudInfo& hud) {
  const HudGeometry g = presentation_hud_geometry(size, fonts, hud);
  const ImFont* big = fonts.banner ? fonts.banner : ImGui::GetFont();
  const ImFont* small = fonts.small ? fonts.small : ImGui::GetFont();
  const StepRecord* r = hud.record;
  // The card in the right column (the 3D view is drawn left of it): the next token and its candidates.
  if (r) {
    const float k = g.card_k;
    const float bs = big->FontSize * k, ss = small->FontSize * 1.15f * k, pad = ss * 0.8f;
    const float w = g.card_w - pad;
    const size_t n = std::min<size_t>(5, std::min(r->top.size(), hud.top_pieces.size()));
    const float h = pad * 2 + bs * 1.3f + ss * 1.25f * static_cast<float>(n);
    const ImVec2 a(origin.x + size.x - w - pad, origin.y + pad), b(a.x + w, a.y + h);
    dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 215), 8.0f);
    char buf[160];
    if (hud.hidden) {
      dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(palette::kNewToken), "next token: ?");
      dl->AddText(small, ss, ImVec2(a.x + pad, a.y + pad + bs * 1.4f), IM_COL32(200, 205, 220, 255),
                  "guess first - Enter reveals");
    } else {
      std::snprintf(buf, sizeof(buf), "next: %s  %.0f%%", visible_piece(r->piece).c_str(), 100.0 * r->prob);
      dl->AddText(big, bs, ImVec2(a.x + pad, a.y + pad), to_imcolor(palette::kNewToken), buf);
      const float bar_x = a.x + pad + ss * 6.5f, bar_w = std::max(ss, w - pad * 2 - ss * 9.5f);
      for (size_t i = 0; i < n; ++i) {
        const float y = a.y + pad + bs * 1.3f + ss * 1.25f * static_cast<float>(i);
        const bool chosen = r->top[i].token == r->token;
        const ImU32 col = chosen ? to_imcolor(palette::kNewToken) : IM_COL32(205, 210, 225, 255);
        dl->PushClipRect(ImVec2(a.x + pad, y), ImVec2(bar_x - 4, y + ss * 1.2f), true);
        dl->AddText(small, ss, ImVec2(a.x + pad, y), col, hud.top_pieces[i].c_str());
        dl->PopClipRect();
        dl->AddRectFilled(ImVec2(bar_x, y + 2), ImVec2(bar_x + std::max(2.0f, bar_w * r->top[i].prob), y + ss - 1),
                          chosen ? to_imcolor(palette::kNewToken) : to_imcolor(palette::kPromptToken), 2.0f);
        std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * r->top[i].prob);
        dl->AddText(small, ss, ImVec2(bar_x + bar_w + 6, y), col, buf);
      }
    }
  }
  // Bottom strip: step, mode, counters; keys.
  const float ss = small->FontSize * 1.15f * g.strip_k, pad = small->FontSize * 0.9f;
  const ImVec2 a(origin.x, origin.y + size.y - g.strip_h), b(origin.x + size.x, origin.y + size.y);
  dl->AddRectFilled(a, b, IM_COL32(8, 10, 18, 200));
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 0.2f), IM_COL32(225, 230, 240, 255), hud_line(hud).c_str());
  dl->AddText(small, ss, ImVec2(a.x + pad, a.y + ss * 1.35f), IM_COL32(150, 160, 185, 255), kHudKeys);
}

}  // namespace kvscope
