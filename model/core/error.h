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

// A command-line value that cannot work (exit 2 in the CLI), found after
// parsing: e.g. an image size above what the OpenGL driver draws.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

}  // namespace kvscope
