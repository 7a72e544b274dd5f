// Test helpers for the beam-search and speculative-decoding references
// (tools/decode_ref.py, built on numpy_ref.py's float64 forward).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "numpy_ref_util.h"

namespace kvscope::testutil {

inline std::string decode_ref_script() {
  return std::string(KVSCOPE_SOURCE_DIR) + "/tools/decode_ref.py";
}

// Runs `python3 decode_ref.py <args>`; throws with its output when it fails.
inline void run_decode_ref(const std::string& args, const std::string& log_path) {
  const std::string cmd = std::string(python()) + " " + shell_quote(decode_ref_script()) + " " + args + " > " +
                          shell_quote(log_path) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::string log;
    try {
      log = read_file(log_path);
    } catch (...) {
    }
    throw std::runtime_error("tools/decode_ref.py failed: " + cmd + "\n" + log);
  }
}

// `decode_ref.py beam-suite`, built once per content of the two scripts into
// the build tree (a file lock against parallel test processes, published by
// an atomic rename), as suite_dir() does for numpy_ref.py's suite.
inline const std::string& beam_suite_dir() {
  static const std::string dir = [] {
    const std::string scripts = read_file(decode_ref_script()) + read_file(numpy_ref_script());
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(scripts));
    const fs::path root = fs::path(KVSCOPE_BUILD_DIR) / "test-data";
    fs::create_directories(root);
    const fs::path final_dir = root / (std::string("decode_ref-") + hash);
    if (fs::exists(final_dir / "beam_suite.json")) return final_dir.string();
    const int fd = open((root / "decode_ref.lock").string().c_str(), O_CREAT | O_RDWR, 0644);
    if (fd >= 0) flock(fd, LOCK_EX);
    if (!fs::exists(final_dir / "beam_suite.json")) {
      const fs::path tmp = root / (std::string("decode_ref-") + hash + ".tmp-" + std::to_string(getpid()));
      const std::string log = (root / ("decode_ref-log-" + std::to_string(getpid()) + ".txt")).string();
      std::error_code ec;
      fs::remove_all(tmp, ec);
      fs::create_directories(tmp);
      try {
        run_decode_ref("beam-suite --out " + shell_quote(tmp.string()), log);
      } catch (...) {
        if (fd >= 0) close(fd);
        throw;
      }
      fs::rename(tmp, final_dir, ec);
      if (ec) fs::remove_all(tmp, ec);
      fs::remove(log, ec);
    }
    if (fd >= 0) close(fd);
    return final_dir.string();
  }();
  return dir;
}

}  // namespace kvscope::testutil
