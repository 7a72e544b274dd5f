#include "app/cli/cli_out.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "model/core/error.h"

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

void check_stdout() {
  errno = 0;
  std::cout.flush();
  if (!std::cout) write_failed(errno);
  flush_checked();
}

}  // namespace kvscope
