#include "scene_format.h"

#include <cstdio>

namespace kvscope {

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
