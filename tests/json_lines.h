// The JSON records of a command's output: each line that starts with '{'
// (the CLI's --json records; its text lines and messages are skipped).
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace kvscope::testutil {

inline std::vector<nlohmann::json> json_records(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace kvscope::testutil
