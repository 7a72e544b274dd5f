// libFuzzer target: the command line. The input split at NUL bytes is argv;
// the default model is the 8-position micro model so accepted commands finish
// fast; GUI/render hooks return 0. Exit code must be 0, 1 or 2, never a crash
// or an escaping exception (fuzz_checks.h).
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_cli(input_string(data, size)));
}
