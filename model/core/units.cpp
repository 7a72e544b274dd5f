#include "model/core/units.h"

#include <cmath>
#include <cstdio>

namespace kvscope {
namespace {

// Divides `v` by `base` while the rounded result would still show 4 digits, then
// prints 3 significant digits with units[u]; `sep` goes between number and unit.
std::string scaled(double v, double base, const char* const* units, int n_units, const char* sep) {
  int u = 0;
  // base - 0.5: 999.7 kB reads "1.00 MB", never "1000 kB".
  while (std::fabs(v) >= base - 0.5 && u + 1 < n_units) {
    v /= base;
    ++u;
  }
  const double a = std::fabs(v);
  const int decimals = u == 0 ? 0 : a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s%s", decimals, v, sep, units[u]);
  return buf;
}

}  // namespace

std::string format_si(double v) {
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  std::string s = scaled(v, 1000.0, kPrefix, 7, " ");
  if (s.back() == ' ') s.pop_back();  // no prefix: "999", not "999 "
  return s;
}

std::string format_flops(double flops) {
  static const char* const kUnit[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  return scaled(flops, 1000.0, kUnit, 7, " ");
}

std::string format_bytes(double bytes) {
  static const char* const kUnit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return scaled(bytes, 1024.0, kUnit, 6, " ");
}

std::string format_bytes_decimal(double bytes) {
  static const char* const kUnit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  return scaled(bytes, 1000.0, kUnit, 6, " ");
}

}  // namespace kvscope
