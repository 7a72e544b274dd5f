// libFuzzer target: arbitrary bytes -> encode/decode/display_piece with fixed
// vocabularies: decode(encode(x)) == x, ids match encoder.py's BPE, every
// display piece is valid UTF-8 (fuzz_checks.h).
#include "fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)kvscope::fuzz::text_fixtures();  // load the vocabularies once, outside the timed loop
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_tokenizer_text(input_string(data, size)));
}
