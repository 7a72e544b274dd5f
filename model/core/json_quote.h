// JSON values as error messages quote them, and nesting limits for formats
// that have no use for deep values.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace kvscope {

// A value as a message shows it: compact JSON with non-ASCII escaped (so a cut
// cannot split a character), containers below a few levels shown as [...] or
// {...}, the whole cut to about max_chars, and whole-valued doubles written as
// the shortest text that reads back (1e+23, not 9.999999999999999e+22). Never
// recurses deeper than those few levels: json::dump() recurses once per level
// and overflows the stack on a value nested 100 000 deep.
std::string json_quote(const nlohmann::json& v, std::size_t max_chars = 60);

// Parses text, refusing containers nested deeper than max_depth with
// Error(where + ": nested deeper than ..."); more, when given, sees every
// event as nlohmann's parser callback would. Throws json::exception for text
// that is not JSON, like json::parse.
nlohmann::json parse_json_bounded(const std::string& text, int max_depth, const std::string& where,
                                  const nlohmann::json::parser_callback_t& more = nullptr);

// The depth each of kvscope's JSON formats allows: its deepest real value is
// 3 levels down (a saved view's camera.target[i]); the margin keeps messages
// about wrong shapes (an array where a number belongs) specific.
constexpr int kJsonMaxDepth = 16;

}  // namespace kvscope
