// libFuzzer target: vocab.json and merges.txt (one input, split at the first
// NUL byte) -> Tokenizer::from_strings; an accepted pair must encode bytes,
// round-trip sample texts and match encoder.py's BPE (fuzz_checks.h).
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_tokenizer_files(input_string(data, size)));
}
