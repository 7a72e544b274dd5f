// Human-readable numbers for labels, panels and the HUD (pure, tested).
#pragma once

#include <cstdint>
#include <string>

namespace kvscope {

// 1234 -> "1.23 k", 4.5e9 -> "4.50 G" (SI prefixes, 3 significant digits).
std::string format_si(double value);
// FLOPs: "4.50 GFLOP".
std::string format_flops(uint64_t flops);
// Bytes in binary units: 36864 -> "36.0 KiB".
std::string format_bytes(uint64_t bytes);
// Hex dump of raw bytes: "e2 80 99".
std::string format_hex_bytes(const std::string& raw);

}  // namespace kvscope
