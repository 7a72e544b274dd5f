// libFuzzer target: a whole .safetensors file (header length, JSON header,
// dtypes, shapes, data offsets) -> SafeTensors::from_bytes, then to_f32 of
// every tensor, checked against an independent decoder (fuzz_checks.h).
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_safetensors(input_string(data, size)));
}
