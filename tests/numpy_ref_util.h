// Test helpers shared by the reference, counter, sampler and bad-input tests:
// running tools/numpy_ref.py (the independent float64 NumPy reference) and
// scratch directories. Header-only; every test file that includes it gets its
// own copy of these inline functions.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/arch/config.h"

namespace kvscope::testutil {

namespace fs = std::filesystem;
using nlohmann::json;

// GPT-2-124M's architecture, for the worked FLOP and cost examples:
// 12 layers, 12 heads, 768 wide, 1024 positions, 50257 tokens.
inline Config gpt2_124m_config() {
  Config c;
  c.n_layer = 12;
  c.n_head = 12;
  c.n_embd = 768;
  c.n_positions = 1024;
  c.vocab_size = 50257;
  return c;
}

// Debian's interpreter: the default python3 (pyenv) cannot see python3-numpy.
inline const char* python() {
  return "/usr/bin/python3";
}
inline std::string numpy_ref_script() {
  return std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_ref.py";
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << bytes;
}

inline json read_json(const std::string& path) {
  return json::parse(read_file(path));
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `python3 numpy_ref.py <args>`; throws with the script's output when it fails,
// so a broken reference is a loud test failure, never a silent skip.
inline void run_numpy_ref(const std::string& args, const std::string& log_path,
                          const std::string& script = numpy_ref_script()) {
  const std::string cmd =
      std::string(python()) + " " + shell_quote(script) + " " + args + " > " + shell_quote(log_path) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string log;
    try {
      log = read_file(log_path);
    } catch (...) {
    }
    throw std::runtime_error(script + " failed (exit " + std::to_string(rc) + "): " + cmd + "\n" + log);
  }
}

// The kvscope binary of this build, or $KVSCOPE_EXE: the ThreadSanitizer
// stage builds only the threads it checks, and its tests that compare with
// the CLI's output take the release build's binary (make test-tsan).
inline std::string kvscope_exe() {
  if (const char* exe = std::getenv("KVSCOPE_EXE"); exe && *exe) return exe;
  return std::string(KVSCOPE_BUILD_DIR) + "/kvscope";
}

// Runs `kvscope <args>` (a shell command line); returns its exit code and its
// stdout + stderr in `out` (through the file `out_path`).
inline int run_kvscope(const std::string& args, std::string& out, const std::string& out_path) {
  const int rc =
      std::system((shell_quote(kvscope_exe()) + " " + args + " > " + shell_quote(out_path) + " 2>&1").c_str());
  out = read_file(out_path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A fresh directory under the build tree, removed on destruction (unless
// KVSCOPE_KEEP_TEST_TMP is set, for debugging).
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    const fs::path root = fs::path(KVSCOPE_BUILD_DIR) / "test-tmp";
    fs::create_directories(root);
    std::string tmpl = (root / (tag + "-XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = buf.data();
  }
  ~TempDir() {
    if (!getenv("KVSCOPE_KEEP_TEST_TMP")) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The same, through the file out.txt of `tmp`.
inline int run_kvscope(const std::string& args, std::string& out, const TempDir& tmp) {
  return run_kvscope(args, out, tmp / "out.txt");
}

// A command line the CLI must refuse, and what its message must name.
struct Refused {
  std::string args;
  std::vector<std::string> named;
};

// Each of `bad` exits with `code` and names what it must.
inline void expect_refused(const std::vector<Refused>& bad, const TempDir& tmp, int code = 2) {
  for (const Refused& b : bad) {
    std::string out;
    EXPECT_EQ(run_kvscope(b.args, out, tmp), code) << b.args << "\n" << out;
    for (const std::string& n : b.named) EXPECT_NE(out.find(n), std::string::npos) << b.args << "\n" << out;
  }
}

// The checkpoints + float64 references of `numpy_ref.py suite`, built at test
// time into the build tree. Every gtest runs in its own process under ctest,
// so the result is cached per content of numpy_ref.py, generated by one
// process at a time (a file lock) and published with an atomic rename
// (parallel test processes never see a half-written suite).
// `script suite --out DIR` (tag: its name), cached as described above.
inline std::string generated_suite(const std::string& script_path, const std::string& tag) {
  // The Llama reference imports numpy_ref.py's helpers: both are hashed.
  const std::string script =
      read_file(script_path) + (script_path == numpy_ref_script() ? "" : read_file(numpy_ref_script()));
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(script));
  const fs::path root = fs::path(KVSCOPE_BUILD_DIR) / "test-data";
  fs::create_directories(root);
  const fs::path final_dir = root / (tag + "-" + hash);
  if (fs::exists(final_dir / "suite.json")) return final_dir.string();
  // One process generates while parallel ones wait on the lock (released
  // by the kernel if the holder dies), then find the published folder.
  struct FileLock {
    int fd;
    explicit FileLock(const std::string& p) : fd(open(p.c_str(), O_CREAT | O_RDWR, 0644)) {
      if (fd >= 0) flock(fd, LOCK_EX);
    }
    ~FileLock() {
      if (fd >= 0) close(fd);  // closing releases the lock, also when generation throws
    }
  } lock((root / (tag + ".lock")).string());
  if (!fs::exists(final_dir / "suite.json")) {
    const fs::path tmp = root / (tag + "-" + hash + ".tmp-" + std::to_string(getpid()));
    const std::string log = (root / (tag + "-log-" + std::to_string(getpid()) + ".txt")).string();
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp);
    run_numpy_ref("suite --out " + shell_quote(tmp.string()), log, script_path);
    fs::rename(tmp, final_dir, ec);
    if (ec) fs::remove_all(tmp, ec);  // another process published it first
    fs::remove(log, ec);
    // Suites of earlier versions of the script are stale: drop them.
    for (const auto& e : fs::directory_iterator(root, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind(tag + "-", 0) == 0 && n.size() == tag.size() + 17 && e.path() != final_dir)
        fs::remove_all(e.path(), ec);
    }
  }
  if (!fs::exists(final_dir / "suite.json"))
    throw std::runtime_error(tag + " suite missing after generation: " + final_dir.string());
  return final_dir.string();
}

inline const std::string& suite_dir() {
  static const std::string dir = generated_suite(numpy_ref_script(), "numpy_ref");
  return dir;
}

// The Llama-family checkpoints of tools/numpy_ref_llama.py.
inline const std::string& llama_suite_dir() {
  static const std::string dir =
      generated_suite(std::string(KVSCOPE_SOURCE_DIR) + "/tools/numpy_ref_llama.py", "numpy_ref_llama");
  return dir;
}

inline std::string suite_checkpoint(const std::string& name) {
  return suite_dir() + "/" + name;
}

// Copies the files of checkpoint `name` into `dest` (to corrupt or edit them).
inline void copy_checkpoint(const std::string& name, const std::string& dest) {
  fs::create_directories(dest);
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    fs::copy_file(suite_checkpoint(name) + "/" + f, dest + "/" + f, fs::copy_options::overwrite_existing);
}

}  // namespace kvscope::testutil
