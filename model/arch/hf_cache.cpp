#include "model/arch/hf_cache.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

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

std::string names_of(const std::vector<fs::path>& snaps) {
  std::string out;
  for (const fs::path& p : snaps) out += (out.empty() ? "" : ", ") + p.filename().string();
  return out.empty() ? "none" : out;
}

// The snapshot refs/main names, or the only one there is. A refs/main naming
// a snapshot that is not there is refused rather than another one loaded:
// that one is some other commit of the model.
fs::path pick_snapshot(const fs::path& repo) {
  std::error_code ec;
  std::vector<fs::path> snaps;
  for (const auto& e : fs::directory_iterator(repo / "snapshots", ec))
    if (e.is_directory(ec)) snaps.push_back(e.path());
  const fs::path ref = repo / "refs" / "main";
  std::string commit;
  if (read_regular_file_if_exists(ref.string(), "a commit hash", commit)) commit = trim(commit);
  if (is_commit(commit)) {
    const fs::path snap = repo / "snapshots" / commit;
    if (fs::is_directory(snap, ec)) return snap;
    const std::string why = ec.value() == ELOOP                            ? "is a symbolic link that loops"
                            : fs::is_symlink(fs::symlink_status(snap, ec)) ? "is a dangling symbolic link"
                                                                           : "does not exist";
    throw Error(ref.string() + " names commit " + commit + ", but snapshots/" + commit + " " + why +
                " (snapshots there: " + names_of(snaps) +
                "); download the model again, or pass a snapshot folder itself with --model");
  }
  if (snaps.size() == 1) return snaps[0];
  throw Error(repo.string() + ": " + std::to_string(snaps.size()) +
              " snapshots and no usable refs/main (expected refs/main naming one of snapshots/*); pass the "
              "snapshot folder itself with --model");
}

// A snapshot's files are links into blobs/; a link whose blob is missing is
// an interrupted download, not a file kvscope cannot open.
void check_snapshot_links(const fs::path& snap, const std::string& id) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(snap, ec)) {
    std::error_code lec;
    if (!e.is_symlink(lec) || fs::exists(e.path(), lec)) continue;
    throw Error(e.path().string() + ": an incomplete download, a dangling link to " +
                fs::read_symlink(e.path(), lec).string() + " (download it again: `huggingface-cli download " + id +
                "`)");
  }
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

std::string resolve_model_dir(const std::string& given) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(given, ec))) return given;
  std::string dir = given;  // "org/name/", as a shell completes a folder, is the id org/name
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!looks_like_hub_id(dir)) return given;
  const std::string org = dir.substr(0, dir.find('/')), name = dir.substr(dir.find('/') + 1);
  std::string searched;
  for (const std::string& hub : hub_cache_dirs()) {
    const fs::path repo = fs::path(hub) / ("models--" + org + "--" + name);
    searched += (searched.empty() ? "" : ", ") + repo.string();
    if (!fs::is_directory(repo, ec)) continue;
    const fs::path snap = pick_snapshot(repo);
    check_snapshot_links(snap, dir);
    return snap.string();
  }
  throw Error(dir + ": no such folder, and not in the local Hugging Face cache (searched " +
              (searched.empty() ? std::string("nothing: neither HF_HUB_CACHE, HF_HOME nor HOME is set") : searched) +
              "; download it first, e.g. `huggingface-cli download " + dir + "`, or pass the model folder's path)");
}

}  // namespace kvscope
