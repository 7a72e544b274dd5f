// Scene-only text helpers (pure, tested). Bytes, FLOPs and SI counts are in
// units.h, shared with the CLI and the panels.
#pragma once

#include <string>

namespace kvscope {

// Hex dump of raw bytes: "e2 80 99".
std::string format_hex_bytes(const std::string& raw);

}  // namespace kvscope
