// libFuzzer target: a whole GGUF file (header, metadata of every value type,
// tensor infos, alignment, offsets) -> GgufFile::from_bytes, then every
// tensor decoded (fuzz_checks_gguf.h).
#include "fuzz_checks_gguf.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_gguf(input_string(data, size)));
}
