#include "assets.h"

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

}  // namespace kvscope
