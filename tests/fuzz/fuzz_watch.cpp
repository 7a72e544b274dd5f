// libFuzzer target: any bytes as what a watched server sends (a KV events
// payload, Prometheus text, /slots JSON): fuzz_checks_watch.h.
#include "fuzz_checks_watch.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_watch(input_string(data, size)));
}
