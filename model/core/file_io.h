// The one way kvscope opens and writes files.
//
// Reading: only regular files. A directory, FIFO, device or socket is refused
// by stat() before it is opened (and by fstat() after an O_NONBLOCK open, so a
// FIFO swapped in between never blocks), with an error naming the path.
//
// Writing: the bytes go to a temporary file in the destination's folder, every
// write, the fsync and the close are checked, then the temporary file is
// renamed over the destination. On any failure the temporary file is removed,
// the old destination is left as it was, and an Error names the path and the
// reason (e.g. "No space left on device", "File too large").
#pragma once

#include <atomic>
#include <string>
#include <string_view>

namespace kvscope {

// Throws kvscope::Error unless `path` is (a symlink to) a regular file.
// `expected` completes "(expected ...)", e.g. "a GPT-2 config.json".
void require_regular_file(const std::string& path, const std::string& expected);

// The whole file, after the checks above. Throws kvscope::Error naming `path`.
// Read in 16 MiB chunks; when `cancel` becomes true between two chunks it
// throws "loading cancelled", so closing the window never waits for a
// multi-GB read to finish.
std::string read_regular_file(const std::string& path, const std::string& expected,
                              const std::atomic<bool>* cancel = nullptr);

// Like read_regular_file, but a missing file is not an error: returns false
// and leaves `out` alone (settings that were never saved).
bool read_regular_file_if_exists(const std::string& path, const std::string& expected, std::string& out);

// Replaces `path` with `bytes` atomically (temp file + rename in the same
// folder). The folder must exist: it is never created here. A symbolic link
// is written through (its target gets the bytes, the link stays); a path that
// is, or leads to, anything but a regular file (a folder, FIFO, device) is
// refused, never replaced. Throws kvscope::Error naming `path`; the old file
// survives any failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace kvscope
