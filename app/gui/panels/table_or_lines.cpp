#include "app/gui/panels/table_or_lines.h"

#include "app/gui/panels/panels.h"
#include "app/session/fitting.h"

namespace kvscope {

namespace {

void header_row(const TableSpec& spec) {
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (size_t i = 0; i < spec.headers.size(); ++i) {
    ImGui::TableSetColumnIndex(static_cast<int>(i));
    ImGui::TableHeader(spec.headers[i]);
    if (i < spec.header_help.size() && spec.header_help[i]) hover_help(spec.header_help[i]);
  }
}

void as_table(const TableSpec& spec, const std::vector<TableRow>& rows) {
  if (!ImGui::BeginTable(spec.id, static_cast<int>(spec.headers.size()),
                         ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg))
    return;
  for (const char* h : spec.headers) ImGui::TableSetupColumn(h);
  header_row(spec);
  for (const TableRow& r : rows) {
    ImGui::TableNextRow();
    for (size_t c = 0; c < r.cells.size(); ++c) {
      ImGui::TableNextColumn();
      const bool coloured = c == 0 || (spec.fate && c + 1 == r.cells.size());
      ImGui::TextColored(coloured ? (c == 0 ? r.first : r.last) : ImGui::GetStyleColorVec4(ImGuiCol_Text), "%s",
                         r.cells[c].c_str());
      if (c == 0 && r.help) hover_help(r.help);
    }
  }
  ImGui::EndTable();
}

void as_lines(const TableSpec& spec, const std::vector<TableRow>& rows) {
  const float indent = ImGui::GetFontSize() * 0.6f;
  for (const TableRow& r : rows) {
    if (r.cells.empty()) continue;
    ImGui::TextColored(r.first, "%s", r.cells.front().c_str());
    if (r.help) hover_help(r.help);
    if (spec.fate) {
      same_line_if_fits(ImGui::CalcTextSize(("\xE2\x86\x92 " + r.cells.back()).c_str()).x);
      ImGui::TextColored(r.last, "\xE2\x86\x92 %s", r.cells.back().c_str());
    }
    // One a line, held whole by no-break spaces where it fits ("Σ log p -1.24"), else
    // broken between its words, never inside the number.
    std::string numbers;
    const size_t end = spec.fate ? r.cells.size() - 1 : r.cells.size();
    for (size_t c = 1; c < end && c < spec.headers.size(); ++c) {
      std::string line = std::string(spec.headers[c]) + " " + r.cells[c];
      if (ImGui::CalcTextSize(line.c_str()).x < ImGui::GetContentRegionAvail().x - indent - 1)
        for (size_t at = line.find(' '); at != std::string::npos; at = line.find(' ', at))
          line.replace(at, 1, "\xC2\xA0");
      numbers += (numbers.empty() ? "" : "\n") + line;
    }
    ImGui::Indent(indent);
    text_wrapped_coloured(ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled), numbers);
    ImGui::Unindent(indent);
  }
}

}  // namespace

void table_or_lines(const TableSpec& spec, const std::vector<TableRow>& rows) {
  const float pad = 2 * ImGui::GetStyle().CellPadding.x + 2;
  std::vector<std::vector<float>> widths(1);
  for (const char* h : spec.headers) widths[0].push_back(ImGui::CalcTextSize(h).x);
  for (const TableRow& r : rows) {
    widths.emplace_back();
    for (const std::string& c : r.cells) widths.back().push_back(ImGui::CalcTextSize(c.c_str()).x);
  }
  if (columns_fit(widths, pad, ImGui::GetContentRegionAvail().x)) {
    as_table(spec, rows);
  } else {
    as_lines(spec, rows);
  }
}

}  // namespace kvscope
