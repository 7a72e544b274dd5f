// Where kvscope's data files (the default model, the KV calculator's table)
// are found at run time: relative to the running executable, so an installed
// or moved kvscope finds its own copy and no build path is baked in.
//   <exe dir>/assets                  a build tree (CMake links it to the source's assets/)
//   <exe dir>/../share/kvscope/assets an installed tree (cmake --install)
// $KVSCOPE_ASSETS overrides both.
#pragma once

#include <string>

namespace kvscope {

// The assets folder; falls back to "assets" (relative to the working
// directory) when none of the places above has one.
std::string assets_dir();

// assets_dir() + "/" + relative.
std::string asset_path(const std::string& relative);

}  // namespace kvscope
