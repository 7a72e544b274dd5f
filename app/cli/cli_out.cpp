#include "app/cli/cli_out.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "model/core/error.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

[[noreturn]] void write_failed(int err) {
  throw Error(std::string("cannot write to standard output (") + std::strerror(err ? err : EIO) + "); stopped");
}

void flush_checked() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) write_failed(errno);
}

}  // namespace

void out_text(const std::string& text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) write_failed(errno);
  flush_checked();
}

void out_line(const std::string& line) {
  out_text(line + '\n');
}

void out_printf(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  errno = 0;
  const int n = std::vfprintf(stdout, format, args);
  va_end(args);
  if (n < 0) write_failed(errno);
  flush_checked();
}

std::string terminal_safe(const std::string& text) {
  const std::string valid = escape_invalid_utf8(text);
  std::string out;
  out.reserve(valid.size());
  char buf[8];
  for (size_t i = 0; i < valid.size(); ++i) {
    const auto c = static_cast<unsigned char>(valid[i]);
    const auto next = i + 1 < valid.size() ? static_cast<unsigned char>(valid[i + 1]) : 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F
      std::snprintf(buf, sizeof buf, "\\u%04x", next);
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void check_stdout() {
  errno = 0;
  std::cout.flush();
  if (!std::cout) write_failed(errno);
  flush_checked();
}

}  // namespace kvscope
