#include "render/scene/scene_format.h"

#include <algorithm>
#include <cstdio>

namespace kvscope {

std::string percent_text(double p, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, 100.0 * p);
  const std::string shown = buf;
  // Judged on the text itself, so printf's rounding (half to even) cannot slip past.
  const std::string hundred = decimals > 0 ? "100." + std::string(static_cast<size_t>(decimals), '0') : "100";
  const std::string zero = decimals > 0 ? "0." + std::string(static_cast<size_t>(decimals), '0') : "0";
  const std::string step = decimals > 0 ? "0." + std::string(static_cast<size_t>(decimals - 1), '0') + "1" : "1";
  const std::string top = decimals > 0 ? "99." + std::string(static_cast<size_t>(decimals), '9') : "99";
  if (p < 1.0 && shown == hundred) return ">" + top + "%";
  if (p > 0.0 && shown == zero) return "<" + step + "%";
  return shown + "%";
}

std::string format_hex_bytes(const std::string& raw) {
  std::string out;
  char buf[4];
  for (unsigned char c : raw) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

std::vector<std::string> split_after(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (size_t i = s.find(sep); i != std::string::npos; i = s.find(sep, at)) {
    parts.push_back(s.substr(at, i + sep.size() - at));
    at = i + sep.size();
  }
  parts.push_back(s.substr(at));
  return parts;
}

namespace {

std::string trim_spaces(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

using Width = std::function<float(const std::string&)>;

// As many parts on each line as fit in `room` (at least one).
std::vector<std::string> greedy_lines(const std::vector<std::string>& parts, const Width& width, float room) {
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& part : parts) {
    if (!line.empty() && width(trim_spaces(line + part)) > room) {
      lines.push_back(trim_spaces(line));
      line.clear();
    }
    line += part;
  }
  if (!line.empty()) lines.push_back(trim_spaces(line));
  return lines;
}

float widest(const std::vector<std::string>& lines, const Width& width) {
  float w = 0;
  for (const std::string& l : lines) w = std::max(w, width(l));
  return w;
}

}  // namespace

std::vector<std::string> balanced_lines(const std::vector<std::string>& parts, const Width& width, float room) {
  std::vector<std::string> best = greedy_lines(parts, width, room);
  if (best.size() < 2) return best;
  // Greedy filling never takes more lines in a wider room, so the narrowest
  // room that keeps the line count is found by bisection (to half a pixel).
  float lo = 0.0f, hi = widest(best, width);
  while (hi - lo > 0.5f) {
    const float mid = 0.5f * (lo + hi);
    std::vector<std::string> lines = greedy_lines(parts, width, mid);
    const float w = widest(lines, width);
    if (lines.size() <= best.size() && w <= mid) {
      best = std::move(lines);
      hi = w;
    } else {
      lo = mid;
    }
  }
  return best;
}

}  // namespace kvscope
