// A serving requests file: JSON Lines, one request a line:
//   {"id": "a", "prompt": "text", "max_new": 16, "arrive": 0,
//    "temperature": 0.8, "top_k": 40, "top_p": 0.95, "repetition_penalty": 1.1, "seed": 7, "greedy": true}
// id (a string, or an integer read as its decimal string), prompt and max_new
// are required; arrive defaults to 0; the sampling fields have `generate`'s
// names, ranges and meaning (greedy unless temperature, top_k or top_p is
// given). Blank lines are skipped.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/serving/server.h"

namespace kvscope {

// Throws kvscope::UsageError "FILE:LINE: ..." naming the field and what was
// expected: bad JSON, a missing or ill-typed field, an unknown field, a value
// outside its range, a duplicate id, an empty prompt, a prompt longer than the
// model's context, a request that could never fit `pool_blocks` blocks of
// `block` positions, or no request at all.
// The same checks one line at a time, for a stream (a pipe, standard input)
// whose requests are served as their lines arrive; ids are unique across it.
class RequestLines {
 public:
  RequestLines(std::string file, const Model& model, int pool_blocks, int block);
  // The request on the next line (without its newline), or nullopt for a
  // blank one. Throws kvscope::UsageError "FILE:LINE: ...".
  std::optional<ServeRequest> next(const std::string& line);
  // At the end of the stream: throws UsageError when it held no request.
  void finish() const;

 private:
  std::string file_;
  const Model& model_;
  int pool_blocks_ = 0, block_ = 0;
  int line_no_ = 0;
  std::set<std::string> ids_;
};

std::vector<ServeRequest> parse_requests(const std::string& text, const std::string& file, const Model& model,
                                         int pool_blocks, int block);
// The same, from a file (throws kvscope::Error, a runtime error, naming the
// file when it cannot be read).
std::vector<ServeRequest> read_requests(const std::string& path, const Model& model, int pool_blocks, int block);

}  // namespace kvscope
