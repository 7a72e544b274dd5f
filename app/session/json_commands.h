// The window's commands as JSON objects, {"cmd": NAME, FIELD: value, ...}:
// what the page's window.kvscope.command() takes (docs/web.md lists them).
// Every field is checked where it is read, against the setting's one range
// (model/decoding/setting_ranges.h, the text scale's, the loaded model's
// layers and heads): a bad one is a UsageError naming the command, the
// field, what was expected and what was given. Nothing is clamped silently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/session/commands.h"

namespace kvscope {

class Session;

// The commands `c` asks for. Settings that take effect from the next
// generation (kv_layout, max_new, tab) are written into s.ui here, after
// every field passed; nothing changes when one does not.
Commands commands_from_json(const nlohmann::json& c, Session& s);

// The page's kvscope.cli([...]) arguments: an array of strings. Throws
// UsageError naming the element that is not a string or holds a NUL (argv
// ends a word there). Which subcommand they name is the CLI parser's call
// (the page's hooks refuse the window and render, which it cannot run).
std::vector<std::string> cli_args_from_json(const nlohmann::json& args);

// A JSON text the page sent, parsed; a parse error becomes a UsageError that
// says what is wrong in words (`what`: "command" or "kvscope.cli").
nlohmann::json parse_page_json(const char* text, const std::string& what);

}  // namespace kvscope
