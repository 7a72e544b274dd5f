// Where kvscope's data files (the default model, the KV calculator's table)
// are found at run time: relative to the running executable, so an installed
// or moved kvscope finds its own copy and no build path is baked in.
//   <exe dir>/assets                  a build tree (CMake links it to the source's assets/)
//   <exe dir>/../share/kvscope/assets an installed tree (cmake --install)
// $KVSCOPE_ASSETS overrides both.
#pragma once

#include <string>
#include <vector>

namespace kvscope {

// The assets folder; falls back to "assets" (relative to the working
// directory) when none of the places above has one.
std::string assets_dir();

// assets_dir() + "/" + relative.
std::string asset_path(const std::string& relative);

// The shipped models: names of the folders under assets_dir()/models that
// hold a config.json, sorted.
std::vector<std::string> shipped_models();
// The folder name when `dir` is one of the shipped models (however it is
// spelled: relative, through links), else "". For display: a shipped model
// reads as its name, not as the path of wherever kvscope was built.
std::string shipped_model_name(const std::string& dir);

}  // namespace kvscope
