// Running tools/jinja_ref.py (Debian's python3-jinja2 in transformers' chat
// environment) on a batch of templates, and kvscope's renderer on the same.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "model/chat/chat_template.h"
#include "numpy_ref_util.h"

namespace kvscope::testutil {

// The fixed clock both sides read through strftime_now: 2026-01-02 03:04:05.
inline std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 2;
  t.tm_hour = 3;
  t.tm_min = 4;
  t.tm_sec = 5;
  t.tm_wday = 5;  // a Friday
  t.tm_yday = 1;
  return t;
}

// cases: [{"template": str, "vars": {...}}] -> [{"text": str} | {"error": str}].
inline nlohmann::ordered_json jinja_reference(const nlohmann::ordered_json& cases, const TempDir& tmp) {
  write_file(tmp / "cases.json", nlohmann::ordered_json{{"cases", cases}}.dump());
  const std::string script = std::string(KVSCOPE_SOURCE_DIR) + "/tools/jinja_ref.py";
  const std::string cmd = std::string(python()) + " " + shell_quote(script) + " < " + shell_quote(tmp / "cases.json") +
                          " > " + shell_quote(tmp / "out.json") + " 2> " + shell_quote(tmp / "err.txt");
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("jinja_ref.py failed: " + read_file(tmp / "err.txt"));
  return nlohmann::ordered_json::parse(read_file(tmp / "out.json"));
}

// kvscope's rendering of one case: {"text": ...} or {"error": ...}.
inline nlohmann::ordered_json kvscope_render(const nlohmann::ordered_json& c) {
  try {
    std::vector<std::pair<std::string, std::string>> special;
    const ChatTemplate t = chat_template_from_text(c["template"].get<std::string>(), "case", special);
    return {{"text", render_chat_vars(t, c.value("vars", nlohmann::ordered_json::object()), fixed_now())}};
  } catch (const Error& e) {
    return {{"error", e.what()}};
  }
}

}  // namespace kvscope::testutil
