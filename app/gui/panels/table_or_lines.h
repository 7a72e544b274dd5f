// A small table of numbers that never cuts a column: a table where its
// columns fit the sidebar, else each row as lines (what it is, then its
// numbers named by their headers), so a narrow sidebar at a large text scale
// shows every number. Shared by the strategies' candidate lists and the
// prefill-vs-decode lesson.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

namespace kvscope {

// A row: its cells' texts, the first what it is (a token, a phase), the last
// what became of it (when TableSpec::fate), each in its colour.
struct TableRow {
  std::vector<std::string> cells;
  ImVec4 first, last;
  const char* help = nullptr;  // the first cell's tooltip (nullptr: none)
};

struct TableSpec {
  const char* id = "";
  std::vector<const char*> headers;
  std::vector<const char*> header_help;  // each header's tooltip (empty: none)
  // In lines, the last cell follows the first after an arrow (a candidate's
  // fate); else it is one more number named by its header.
  bool fate = true;
};

void table_or_lines(const TableSpec& spec, const std::vector<TableRow>& rows);

}  // namespace kvscope
