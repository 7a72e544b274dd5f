// The chat-template fuzz target's check (fuzz_chat_template.cpp,
// tests/test_fuzz_regressions.cpp): any bytes as a chat template, parsed and
// rendered with a small conversation. It renders, or fails with
// kvscope::Error (the template's own error, or a refusal): never a crash,
// another exception, unbounded recursion or output.
#pragma once

#include <string>

#include "fuzz_checks.h"
#include "model/chat/chat_template.h"

namespace kvscope::fuzz {

inline std::string check_chat_template(const std::string& text) {
  std::tm now{};
  now.tm_year = 126;
  now.tm_mday = 1;
  try {
    const ChatTemplate t = chat_template_from_text(text, "fuzz.jinja", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi {{ x }}"}, {"assistant", "Yo"}};
    const std::string out = render_chat(t, messages, true, now);
    if (out.size() > (64u << 20) + (1u << 20)) return "output beyond the 64 MiB bound: " + std::to_string(out.size());
  } catch (const Error&) {
    return "";  // refused or failed, with a message: both fine
  }
  return "";
}

}  // namespace kvscope::fuzz
