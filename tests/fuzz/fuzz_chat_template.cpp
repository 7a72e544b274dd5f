// libFuzzer target: any bytes as a chat template, parsed by the Jinja
// interpreter and rendered with a small conversation (fuzz_checks_chat.h).
#include "fuzz_checks_chat.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvscope::fuzz;
  return fail_on(check_chat_template(input_string(data, size)));
}
