#include "app/platform/video_pipe.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <sys/wait.h>
#include <unistd.h>

#include "model/core/error.h"

namespace kvscope {

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find(':', start), p.size());
    const std::string dir = p.substr(start, end - start);
    const std::filesystem::path f = std::filesystem::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(f, ec) && access(f.c_str(), X_OK) == 0) return f.string();
    start = end + 1;
  }
  return "";
}

VideoPipe::VideoPipe(const std::string& ffmpeg, const std::string& out, int w, int h, int fps)
    : out_(out), tmp_(temp_path(out)), w_(w), h_(h) {
  const std::string cmd = shell_quote(ffmpeg) +
                          " -nostdin -hide_banner -loglevel error -y -f rawvideo -pix_fmt rgba -s " +
                          std::to_string(w) + "x" + std::to_string(h) + " -r " + std::to_string(fps) +
                          " -i - -c:v libx264 -pix_fmt yuv420p -movflags +faststart -f mp4 " + shell_quote(tmp_);
  std::signal(SIGPIPE, SIG_IGN);  // a dying ffmpeg makes fwrite fail instead of killing us
  pipe_ = popen(cmd.c_str(), "w");
  if (!pipe_) throw Error("--video: cannot start ffmpeg (" + ffmpeg + ")");
}

VideoPipe::~VideoPipe() {
  if (pipe_) pclose(pipe_);
  std::remove(tmp_.c_str());  // nothing after a successful rename
}

void VideoPipe::write(const std::vector<uint8_t>& rgba) {
  if (rgba.size() != static_cast<size_t>(w_) * h_ * 4 || std::fwrite(rgba.data(), 1, rgba.size(), pipe_) != rgba.size())
    throw Error("--video: ffmpeg stopped reading frames (see its message above)");
  ++frames_;
}

void VideoPipe::finish() {
  if (std::fflush(pipe_) != 0) throw Error("--video: ffmpeg stopped reading frames (see its message above)");
  const int status = pclose(pipe_);
  pipe_ = nullptr;
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = status != -1 && WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                            : status != -1 && WIFSIGNALED(status)
                                ? "killed by signal " + std::to_string(WTERMSIG(status))
                                : "no exit status";
    throw Error("--video " + out_ + ": ffmpeg failed (" + how + "; its message is above); nothing was written");
  }
  if (std::rename(tmp_.c_str(), out_.c_str()) != 0)
    throw Error("--video " + out_ + ": cannot put the video in place (" + std::string(std::strerror(errno)) + ")");
}

std::string VideoPipe::temp_path(const std::string& out) {
  const std::filesystem::path p(out);
  const std::string name = "." + p.filename().string() + ".tmp-" + std::to_string(getpid()) + ".mp4";
  return p.has_parent_path() ? (p.parent_path() / name).string() : name;
}

}  // namespace kvscope
