// libFuzzer target: config.json text -> parse_config; an accepted config
// must satisfy every documented range (fuzz_checks.h).
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_config(input_string(data, size)));
}
