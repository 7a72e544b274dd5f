#include "model/arch/hf_cache.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A commit hash as refs/main holds it: hex digits only (it names a folder under snapshots/).
bool is_commit(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char ch : s) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

}  // namespace

bool looks_like_hub_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return false;
  const std::string org = s.substr(0, slash), name = s.substr(slash + 1);
  for (const std::string& part : {org, name}) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return s[0] != '~';
}

std::vector<std::string> hub_cache_dirs() {
  if (std::string d = env("HF_HUB_CACHE"); !d.empty()) return {d};
  if (std::string d = env("HF_HOME"); !d.empty()) return {(fs::path(d) / "hub").string()};
  std::string home = env("XDG_CACHE_HOME");
  if (!home.empty()) return {(fs::path(home) / "huggingface" / "hub").string()};
  home = env("HOME");
  if (home.empty()) return {};
  return {(fs::path(home) / ".cache" / "huggingface" / "hub").string()};
}

std::string resolve_model_dir(const std::string& dir) {
  std::error_code ec;
  if (!looks_like_hub_id(dir) || fs::exists(fs::symlink_status(dir, ec))) return dir;
  const std::string org = dir.substr(0, dir.find('/')), name = dir.substr(dir.find('/') + 1);
  std::string searched;
  for (const std::string& hub : hub_cache_dirs()) {
    const fs::path repo = fs::path(hub) / ("models--" + org + "--" + name);
    searched += (searched.empty() ? "" : ", ") + repo.string();
    if (!fs::is_directory(repo, ec)) continue;
    std::string commit;
    if (read_regular_file_if_exists((repo / "refs" / "main").string(), "a commit hash", commit)) commit = trim(commit);
    if (is_commit(commit) && fs::is_directory(repo / "snapshots" / commit, ec)) {
      return (repo / "snapshots" / commit).string();
    }
    std::vector<fs::path> snaps;
    for (const auto& e : fs::directory_iterator(repo / "snapshots", ec)) {
      if (e.is_directory(ec)) snaps.push_back(e.path());
    }
    if (snaps.size() == 1) return snaps[0].string();
    throw Error(repo.string() + ": " + std::to_string(snaps.size()) +
                " snapshots and no usable refs/main (expected refs/main naming one of snapshots/*); pass the "
                "snapshot folder itself with --model");
  }
  throw Error(dir + ": no such folder, and not in the local Hugging Face cache (searched " +
              (searched.empty() ? std::string("nothing: neither HF_HUB_CACHE, HF_HOME nor HOME is set") : searched) +
              "; download it first, e.g. `huggingface-cli download " + dir + "`, or pass the model folder's path)");
}

}  // namespace kvscope
