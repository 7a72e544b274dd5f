// Standard output for the subcommands' results: every write is flushed at
// once (so a run that is stopped leaves whole lines, and a reader of --json
// sees each record as it happens) and checked, so a failed write (a full
// disk, a pipe whose reader has gone with SIGPIPE ignored) stops the command
// with an Error (exit 1) instead of computing on into the void and exiting 0.
#pragma once

#include <string>

namespace kvscope {

// line + '\n'.
void out_line(const std::string& line);
// Text as it is, for output streamed in pieces (generate's tokens).
void out_text(const std::string& text);
// printf into standard output.
[[gnu::format(printf, 1, 2)]] void out_printf(const char* format, ...);
// Text shown inside a line of output or a message: invalid UTF-8 as \xNN
// (escape_invalid_utf8) and control characters as \n, \r, \t, \xNN (C0,
// DEL) or \u0080..\u009f (C1): a NUL would cut the line, a newline split it,
// an escape sequence drive the terminal.
std::string terminal_safe(const std::string& text);
// Flushes what anything else (CLI11's help, std::cout) wrote and throws
// if a write to standard output failed.
void check_stdout();

}  // namespace kvscope
