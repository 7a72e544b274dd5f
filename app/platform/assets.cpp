#include "app/platform/assets.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace kvscope {

namespace fs = std::filesystem;

std::string assets_dir() {
  if (const char* env = std::getenv("KVSCOPE_ASSETS"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    for (const fs::path& candidate : {dir / "assets", dir / ".." / "share" / "kvscope" / "assets"})
      if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return "assets";
}

std::string asset_path(const std::string& relative) {
  return (fs::path(assets_dir()) / relative).string();
}

std::vector<std::string> shipped_models() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(asset_path("models"), ec), end; !ec && it != end; it.increment(ec))
    if (fs::is_regular_file(it->path() / "config.json", ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string shipped_model_name(const std::string& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(dir, ec);
  if (ec) return "";
  const fs::path models = fs::weakly_canonical(asset_path("models"), ec);
  if (ec || p.parent_path() != models || !fs::is_regular_file(p / "config.json", ec)) return "";
  return p.filename().string();
}

}  // namespace kvscope
