#include "app/cli/cli_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvscope {
namespace {

bool all_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

std::string in_quotes(const std::string& s) {
  return "\"" + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "\"";
}

}  // namespace

std::string format_bound(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

CLI::Validator int_in(int64_t lo, int64_t hi, const std::string& shown) {
  const std::string range = shown.empty() ? std::to_string(lo) + ".." + std::to_string(hi) : shown;
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const size_t from = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
        if (!all_digits(s, from)) return in_quotes(s) + " is not a whole number (expected " + range + ")";
        errno = 0;
        const long long x = std::strtoll(s.c_str(), nullptr, 10);
        if (errno == ERANGE || x < lo || x > hi) return s + " is outside " + range;
        return "";
      },
      range);
}

CLI::Validator any_u64() {
  const std::string range = "0..18446744073709551615";
  return CLI::Validator(
      [range](std::string& s) -> std::string {
        if (!all_digits(s, 0)) return in_quotes(s) + " is not a whole number in " + range;
        errno = 0;
        (void)std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE) return s + " is outside " + range;
        return "";
      },
      range);
}

CLI::Validator real_in(double lo, double hi, bool lo_open) {
  const std::string range = (lo_open ? "(" : "[") + format_bound(lo) + ", " + format_bound(hi) + "]";
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& s) -> std::string {
        char* end = nullptr;
        const double x =
            s.empty() || std::isspace(static_cast<unsigned char>(s[0])) ? NAN : std::strtod(s.c_str(), &end);
        if (!end || *end != '\0' || !std::isfinite(x))
          return in_quotes(s) + " is not a finite number (expected " + range + ")";
        if (x > hi) return s + " is above the range " + range;
        const RealSetting r{"", lo, hi, lo_open};
        if (r.contains(x)) return "";
        // Above an open bound as a double, on it as a float (--top-p 1e-300).
        const std::string rounds =
            r.rounds_to_bound(x) ? " once held as a float (it rounds to " + format_bound(lo) + ")" : "";
        return s + " is below the range " + range + rounds;
      },
      range);
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string { return s.empty() ? "empty value (expected " + what + ")" : ""; }, "");
}

CLI::Validator not_an_option() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (!s.empty() && s[0] == '-')
          return in_quotes(s) + " starts with '-' (ffmpeg would read it as an option; write ./" + s + ")";
        return "";
      },
      "");
}

}  // namespace kvscope
