#include "model/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "model/core/error.h"

namespace kvscope {
namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// "" for a regular file, else what it is instead.
std::string not_regular(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

[[noreturn]] void fail(const std::string& path, const std::string& why, const std::string& expected) {
  throw Error(path + ": " + why + (expected.empty() ? "" : " (expected " + expected + ")"));
}

// Returns false when the file does not exist (errno ENOENT) and `missing_ok`.
bool read_impl(const std::string& path, const std::string& expected, bool missing_ok, std::string& out,
               const std::atomic<bool>* cancel) {
  struct stat st {};
  if (missing_ok && ::stat(path.c_str(), &st) != 0 && errno == ENOENT) return false;
  const ReadOnlyFile f = ReadOnlyFile::open(path, expected);
  if (f.size() > std::string().max_size())  // (a 32-bit build: WebAssembly)
    fail(path, "is " + std::to_string(f.size()) + " bytes, more than this build can hold in memory", expected);
  std::string bytes(static_cast<size_t>(f.size()), '\0');
  f.read(0, f.size(), bytes.data(), cancel);
  out = std::move(bytes);
  return true;
}

// A name no other writer in this or another process uses at the same time.
std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path p(path);
  const std::string base =
      "." + p.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  return p.has_parent_path() ? (p.parent_path() / base).string() : base;
}

void write_all(int fd, std::string_view bytes, const std::string& path, const std::string& tmp) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(path + ": write failed after " + std::to_string(done) + " of " + std::to_string(bytes.size()) +
                  " bytes: " + errno_text(e) + " (the previous file, if any, is unchanged)");
    }
    done += static_cast<size_t>(n);
  }
}

// The file a write replaces: `path` itself, or what its symbolic links lead
// to, so that a link to a settings file stays a link and its target gets the
// bytes. Throws when that is something other than a regular file, which a
// rename would silently replace (a FIFO, a device node) or fail on (a folder).
std::string write_destination(const std::string& path) {
  namespace fs = std::filesystem;
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return at;  // a new file (or a dangling link's target)
    if (!S_ISLNK(st.st_mode)) {
      if (std::string why = not_regular(st.st_mode); !why.empty())
        throw Error(path + ": cannot write: " + (at == path ? "it " : at + " ") + why +
                    ", not a regular file (expected a file name to create or replace)");
      return at;
    }
    std::error_code ec;
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) throw Error(path + ": cannot write: cannot read the link " + at + " (" + ec.message() + ")");
    at = target.is_absolute() ? target.string() : (fs::path(at).parent_path() / target).string();
  }
  throw Error(path + ": cannot write: " + errno_text(ELOOP));
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& expected) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot open: " + errno_text(errno), expected);
  if (std::string why = not_regular(st.st_mode); !why.empty()) fail(path, why + ", not a regular file", expected);
}

std::string read_regular_file(const std::string& path, const std::string& expected, const std::atomic<bool>* cancel) {
  std::string out;
  read_impl(path, expected, false, out, cancel);
  return out;
}

// The open descriptor, closed with the last copy of its file (closing a
// read-only descriptor loses no data: its result is not checked).
struct ReadOnlyFile::Descriptor {
  int fd = -1;
  std::mutex seek;  // (WebAssembly: lseek + read, see read)
  explicit Descriptor(int f) : fd(f) {}
  ~Descriptor() { ::close(fd); }
};

ReadOnlyFile ReadOnlyFile::open(const std::string& path, const std::string& expected) {
  require_regular_file(path, expected);
  // O_NONBLOCK: should the path have become a FIFO since the stat, open does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno), expected);
  ReadOnlyFile f;
  try {
    f.fd_ = std::make_shared<Descriptor>(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno), expected);
  if (std::string why = not_regular(st.st_mode); !why.empty()) fail(path, why + ", not a regular file", expected);
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  return f;
}

namespace {

// One read() of up to `n` bytes at `offset`. Emscripten 3.1.6's pread keeps
// only the low 31 bits of the offset (a model past 2 GiB would read wrong bytes
// silently), while its lseek takes the whole offset: there, past 2 GiB, lseek +
// read under the descriptor's lock (two calls to the page's thread, not one).
ssize_t read_at(int fd, std::mutex& seek, char* out, size_t n, uint64_t offset) {
#ifdef __EMSCRIPTEN__
  if (offset + n > uint64_t{INT32_MAX}) {
    std::lock_guard<std::mutex> lock(seek);
    if (::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) return -1;
    return ::read(fd, out, n);
  }
#endif
  (void)seek;
  return ::pread(fd, out, n, static_cast<off_t>(offset));
}

}  // namespace

void ReadOnlyFile::read(uint64_t offset, uint64_t n, void* dst, const std::atomic<bool>* cancel,
                        const std::function<void(uint64_t)>& on_chunk, const std::string& what) const {
  char* out = static_cast<char*>(dst);
  const std::string about = what.empty() ? "" : what + ": ";
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  for (uint64_t done = 0; done < n;) {
    if (cancel && cancel->load()) throw Error(path_ + ": loading cancelled");
    const uint64_t want = std::min(kChunk, n - done);
    const ssize_t got = read_at(fd_->fd, fd_->seek, out + done, static_cast<size_t>(want), offset + done);
    const int e = errno;
    if (got < 0 && e == EINTR) continue;
    if (got < 0) fail(path_, about + "read error after " + std::to_string(done) + " bytes: " + errno_text(e), "");
    if (got == 0) {
      fail(path_,
           about + "read " + std::to_string(done) + " of " + std::to_string(n) + " bytes from byte " +
               std::to_string(offset) + " (the file ended early)",
           "");
    }
    done += static_cast<uint64_t>(got);
    if (on_chunk) on_chunk(static_cast<uint64_t>(got));
  }
}

bool read_regular_file_if_exists(const std::string& path, const std::string& expected, std::string& out) {
  return read_impl(path, expected, true, out, nullptr);
}

void write_file_atomic(const std::string& path_given, std::string_view bytes) {
  if (path_given.empty()) throw Error("cannot write a file with an empty name");
  const std::string path = write_destination(path_given);
  // Messages name the path given, and where its links led.
  const std::string shown = path == path_given ? path : path_given + " (a link to " + path + ")";
  const std::filesystem::path p(path);
  if (p.has_parent_path()) {
    struct stat st {};
    const std::string dir = p.parent_path().string();
    if (::stat(dir.c_str(), &st) != 0)
      throw Error(shown + ": cannot write: the folder " + dir + " does not exist (" + errno_text(errno) + ")");
    if (!S_ISDIR(st.st_mode)) throw Error(shown + ": cannot write: " + dir + " is not a folder");
  }
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = temp_name(path);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw Error(shown + ": cannot write: " + errno_text(errno) + " (creating a temporary file next to it)");
  write_all(fd, bytes, shown, tmp);
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(shown + ": cannot write: " + errno_text(e) + " (the previous file, if any, is unchanged)");
  }
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(shown + ": cannot write: " + errno_text(e) + " (the previous file, if any, is unchanged)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(shown + ": cannot replace it: " + errno_text(e) + " (the previous file, if any, is unchanged)");
  }
}

}  // namespace kvscope
