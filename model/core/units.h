// The one formatter per unit: bytes, FLOPs and SI counts as people read them.
// The CLI, the window's panels, the scene's labels and error messages all call
// these, so the same quantity reads the same everywhere. Pure, tested.
#pragma once

#include <string>

namespace kvscope {

// 1234 -> "1.23 k", 4.5e9 -> "4.50 G", 999 -> "999" (SI prefixes, 3 significant digits).
std::string format_si(double value);
// FLOPs with SI prefixes: 123 -> "123 FLOP", 4.5e9 -> "4.50 GFLOP".
std::string format_flops(double flops);
// Bytes in binary units, 3 significant digits: 100 -> "100 B", 36864 -> "36.0 KiB", 524288 -> "512 KiB".
std::string format_bytes(double bytes);
// Bytes in decimal units, 3 significant digits: 524288 -> "524 kB", 5.24e10 -> "52.4 GB".
std::string format_bytes_decimal(double bytes);

}  // namespace kvscope
