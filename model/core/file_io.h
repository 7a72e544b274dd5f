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
#include <cstdint>
#include <functional>
#include <memory>
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

// A regular file open for reading (the checks of require_regular_file, made
// again on the open descriptor), shared by its copies and closed with the last.
// Reads go at an offset, 16 MiB a call straight into the destination: a
// buffered stream reads 4 KiB at a time, and in the page every read is a call
// from the loading thread to the page's own thread (a 725 MB model took
// 180 000 of them).
class ReadOnlyFile {
 public:
  // Throws kvscope::Error naming `path`; `expected` completes "(expected ...)".
  static ReadOnlyFile open(const std::string& path, const std::string& expected);
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // `n` bytes from byte `offset` into `dst`; `what` names them in messages
  // (e.g. tensor "wte"). `on_chunk` gets each chunk's bytes (progress); once
  // `cancel` is true, the next chunk throws "loading cancelled". Throws naming
  // the path, also when the file ends early. Safe from several threads.
  void read(uint64_t offset, uint64_t n, void* dst, const std::atomic<bool>* cancel = nullptr,
            const std::function<void(uint64_t)>& on_chunk = {}, const std::string& what = "") const;

 private:
  struct Descriptor;
  ReadOnlyFile() = default;
  std::shared_ptr<Descriptor> fd_;
  std::string path_;
  uint64_t size_ = 0;
};

// Replaces `path` with `bytes` atomically (temp file + rename in the same
// folder). The folder must exist: it is never created here. A symbolic link
// is written through (its target gets the bytes, the link stays); a path that
// is, or leads to, anything but a regular file (a folder, FIFO, device) is
// refused, never replaced. Throws kvscope::Error naming `path`; the old file
// survives any failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace kvscope
