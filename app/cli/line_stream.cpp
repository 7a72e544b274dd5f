#include "app/cli/line_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/core/error.h"

namespace kvscope {

bool is_line_stream(const std::string& path) {
  if (path == "-") return true;
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
}

LineStream::LineStream(const std::string& path) : name_(path == "-" ? "stdin" : path) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
    return;
  }
  do fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  owned_ = true;
}

LineStream::~LineStream() {
  if (owned_) close(fd_);
}

std::vector<std::string> LineStream::read(int timeout_ms) {
  std::vector<std::string> lines;
  char buf[1 << 16];
  // Waits only for the first read; then takes whatever else is already there.
  for (int wait = timeout_ms; !ended_; wait = 0) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, wait);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw Error("cannot read " + name_ + ": " + std::strerror(errno));
    if (ready == 0) break;
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw Error("cannot read " + name_ + ": " + std::strerror(errno));
    if (n == 0) ended_ = true;
    pending_.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      lines.push_back(pending_.substr(0, nl));
      pending_.erase(0, nl + 1);
    }
    if (pending_.size() > kMaxLine)
      throw UsageError(name_ + ": a line of more than " + std::to_string(kMaxLine >> 20) +
                       " MiB (expected one JSON object a line)");
    if (ended_ && !pending_.empty()) lines.push_back(std::move(pending_)), pending_.clear();
    if (lines.size() >= 4096) break;  // serve these first
  }
  return lines;
}

}  // namespace kvscope
