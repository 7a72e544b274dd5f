// The GGUF tests' shared helper: tools/numpy_gguf.py's suite (GGUF files,
// their float64 references and suite.json), generated once per version of
// the script (numpy_ref_util.h's generated_suite).
#pragma once

#include <string>

#include "numpy_ref_util.h"

namespace kvscope::testutil {

inline const std::string& gguf_suite_dir() {
  static const std::string dir =
      generated_suite(std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_gguf.py", "numpy_gguf");
  return dir;
}

}  // namespace kvscope::testutil
