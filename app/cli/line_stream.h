// Lines from a stream that may still be written while it is read (standard
// input, a pipe, a FIFO): `serve --requests -` serves each request as its
// line arrives instead of waiting for the writer to finish.
#pragma once

#include <string>
#include <vector>

namespace kvscope {

// True when `path` names a stream rather than a file read whole: "-"
// (standard input), a FIFO or a character device.
bool is_line_stream(const std::string& path);

class LineStream {
 public:
  // "-" is standard input; anything else is opened for reading (a FIFO
  // waits here for its writer). Throws kvscope::Error naming `path`.
  explicit LineStream(const std::string& path);
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  // The whole lines (without their newlines) that have arrived, waiting up
  // to `timeout_ms` for the first bytes (-1: until some come or the stream
  // ends; 0: only what is there now). At the end, a last unterminated line
  // is returned too. Throws kvscope::UsageError for a line over kMaxLine bytes.
  std::vector<std::string> read(int timeout_ms);
  bool ended() const { return ended_; }
  const std::string& name() const { return name_; }

  static constexpr size_t kMaxLine = 16u << 20;

 private:
  std::string name_;  // "stdin" or the path, for messages
  int fd_ = -1;
  bool owned_ = false, ended_ = false;
  std::string pending_;  // bytes after the last newline
};

}  // namespace kvscope
