// Scene-only text helpers (pure, tested). Bytes, FLOPs and SI counts are in
// units.h, shared with the CLI and the panels.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kvscope {

// A probability as a percent with `decimals` decimals ("63%", "62.7%"),
// except where rounding would overstate it: ">99%" / ">99.9%" below 1 (a
// 99.96 % token is not a certainty), "<1%" / "<0.1%" above 0.
std::string percent_text(double p, int decimals);

// Hex dump of raw bytes: "e2 80 99".
std::string format_hex_bytes(const std::string& raw);

// Splits `s` at `sep`, which stays at the end of each part but the last
// ("a · b" at " · ": "a · ", "b").
std::vector<std::string> split_after(const std::string& s, const std::string& sep);

// `parts` (each ending in its separator) joined into lines no wider than
// `room` by `width` (a line is measured without its leading and trailing
// spaces, and returned so), as few lines as filling each one greedily
// gives, but balanced: the lines break where the widest of them is
// narrowest, so a wrapped sentence never leaves one word alone on its last
// line when it could be split more evenly. A part wider than `room` gets a
// line of its own.
std::vector<std::string> balanced_lines(const std::vector<std::string>& parts,
                                        const std::function<float(const std::string&)>& width, float room);

}  // namespace kvscope
