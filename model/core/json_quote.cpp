#include "model/core/json_quote.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/core/error.h"

namespace kvscope {
namespace {

using nlohmann::json;

constexpr int kQuoteDepth = 4;

std::string scalar_text(const json& v) {
  if (v.is_number_float()) {
    // nlohmann's shortest-form printer is not always shortest; the first of
    // 15..17 significant digits that reads back is.
    const double x = v.get<double>();
    if (std::isfinite(x))
      for (int digits = 15; digits <= 17; ++digits) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (std::strtod(buf, nullptr) != x) continue;
        const std::string t = buf;  // "2" is a whole number; nlohmann writes a double as "2.0"
        return t.find_first_not_of("-0123456789") == std::string::npos ? t + ".0" : t;
      }
  }
  return v.dump(-1, ' ', true, json::error_handler_t::replace);
}

// Appends v to out, stopping once out is past limit (the caller cuts).
void put(const json& v, int depth, std::string& out, std::size_t limit) {
  if (!v.is_structured()) {
    out += scalar_text(v);
    return;
  }
  const bool obj = v.is_object();
  if (v.empty() || depth >= kQuoteDepth) {
    out += obj ? (v.empty() ? "{}" : "{...}") : (v.empty() ? "[]" : "[...]");
    return;
  }
  out += obj ? '{' : '[';
  for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
    if (it != v.begin()) out += ',';
    if (obj) out += json(it.key()).dump(-1, ' ', true, json::error_handler_t::replace) + ':';
    put(*it, depth + 1, out, limit);
  }
  out += obj ? '}' : ']';
}

}  // namespace

std::string json_quote(const json& v, std::size_t max_chars) {
  std::string out;
  put(v, 0, out, max_chars);
  if (out.size() > max_chars) out = out.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return out;
}

json parse_json_bounded(const std::string& text, int max_depth, const std::string& where,
                        const json::parser_callback_t& more) {
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
      throw Error(where + ": nested deeper than " + std::to_string(max_depth) +
                  " levels (expected objects and arrays at most " + std::to_string(max_depth) + " deep)");
    return more ? more(depth, event, parsed) : true;
  };
  return json::parse(text, cb);
}

}  // namespace kvscope
