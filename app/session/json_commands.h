// The window's commands as JSON objects, {"cmd": NAME, FIELD: value, ...}:
// what the page's window.kvscope.command() takes (docs/web.md lists them).
// Every field is checked where it is read, against the setting's one range
// (model/decoding/setting_ranges.h, the text scale's, the loaded model's
// layers and heads): a bad one is a UsageError naming the command, the
// field, what was expected and what was given. Nothing is clamped silently.
#pragma once

#include <nlohmann/json.hpp>

#include "app/session/commands.h"

namespace kvscope {

class Session;

// The commands `c` asks for. Settings that take effect from the next
// generation (kv_layout, max_new, tab) are written into s.ui here, after
// every field passed; nothing changes when one does not.
Commands commands_from_json(const nlohmann::json& c, Session& s);

}  // namespace kvscope
