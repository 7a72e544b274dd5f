// Errors raised by the headless engine. Library code throws; only the app
// decides how to report (stderr + exit code in the CLI, a panel in the GUI).
#pragma once

#include <stdexcept>
#include <string>

namespace kvscope {

// A problem with user-supplied input (model files, prompt, settings).
// The message names the file / field / flag and what was expected.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kvscope
