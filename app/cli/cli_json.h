// JSON helpers shared by the CLI's subcommands.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvscope {

// The exact bytes of a piece or text, as integers 0..255. Display strings
// escape invalid UTF-8 as the text \xNN, which a literal "\xff" in the text
// also produces; scripts read these arrays to recover the bytes.
inline nlohmann::json bytes_json(const std::string& bytes) {
  nlohmann::json a = nlohmann::json::array();
  for (char c : bytes) a.push_back(static_cast<unsigned char>(c));
  return a;
}

}  // namespace kvscope
