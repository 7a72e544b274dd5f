// Glue between libFuzzer and the shared checks in fuzz_checks.h: a violated
// property is printed and turned into a crash, so libFuzzer saves the input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_checks.h"

namespace kvscope::fuzz {

inline std::string input_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

inline int fail_on(const std::string& err) {
  if (!err.empty()) {
    std::fprintf(stderr, "\n==kvscope-fuzz== PROPERTY VIOLATED: %s\n", err.c_str());
    std::abort();
  }
  return 0;
}

}  // namespace kvscope::fuzz
