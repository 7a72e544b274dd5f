// Range checks for every numeric command-line flag, in one place: each flag's
// --help states its range, a value outside it (or not a number: "nan", "inf",
// "1e39" for a float, "-1" for a seed) is a usage error (exit 2) that prints
// the bound readably.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "model/decoding/setting_ranges.h"

namespace kvscope {

// A whole number in [lo, hi] (no fraction, no exponent). `shown` replaces
// "lo..hi" in --help and messages where the real bound is known only later
// (the model's context).
CLI::Validator int_in(int64_t lo, int64_t hi, const std::string& shown = "");
// Any unsigned 64-bit integer, exactly: 0..18446744073709551615.
CLI::Validator any_u64();
// A finite decimal number in [lo, hi], or (lo, hi] when `lo_open`.
CLI::Validator real_in(double lo, double hi, bool lo_open = false);
// The range of a setting shared with the window (model/decoding/setting_ranges.h).
inline CLI::Validator in_range(const IntSetting& s) {
  return int_in(s.lo, s.hi);
}
inline CLI::Validator in_range(const RealSetting& s) {
  return real_in(s.lo, s.hi, s.lo_open);
}
// A non-empty string (a stop string, a prompt).
CLI::Validator non_empty(const std::string& what);
// A file name another program receives as an argument: must not start with '-'.
CLI::Validator not_an_option();

// The readable form of a bound: 1000, 0.001, 1e-06.
std::string format_bound(double x);

}  // namespace kvscope
