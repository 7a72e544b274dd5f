// libFuzzer target: one JSON text -> the saved-view reader and the settings
// reader; what either accepts must be in the documented ranges, a restored
// sampler must be one the engine accepts, a view must round-trip
// (fuzz_checks_saved.h).
#include "fuzz_checks_saved.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_saved_files(input_string(data, size)));
}
