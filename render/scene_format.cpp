#include "scene_format.h"

#include <cmath>
#include <cstdio>

namespace kvscope {

std::string format_si(double v) {
  static const char* kPrefix[] = {"", " k", " M", " G", " T", " P", " E"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 999.5 && i < 6) {
    a /= 1000.0;
    v /= 1000.0;
    ++i;
  }
  char buf[48];
  if (i == 0)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else if (a >= 99.95)
    std::snprintf(buf, sizeof(buf), "%.0f%s", v, kPrefix[i]);
  else if (a >= 9.995)
    std::snprintf(buf, sizeof(buf), "%.1f%s", v, kPrefix[i]);
  else
    std::snprintf(buf, sizeof(buf), "%.2f%s", v, kPrefix[i]);
  return buf;
}

std::string format_flops(uint64_t flops) {
  std::string s = format_si(static_cast<double>(flops));
  return s + (s.back() >= '0' && s.back() <= '9' ? " FLOP" : "FLOP");
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= 1023.95 && i < 4) {
    v /= 1024.0;
    ++i;
  }
  char buf[48];
  if (i == 0)
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  else if (v >= 99.95)
    std::snprintf(buf, sizeof(buf), "%.0f %s", v, kUnit[i]);
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnit[i]);
  return buf;
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

}  // namespace kvscope
