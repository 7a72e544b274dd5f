// The KV layout's one JSON form, read and written here for every file and
// command that holds one (settings.json's "kv_layout", the page's kv_layout
// command): the choices of a KVLayout (kv_layout.h), named as the --kv-* flags
// without "--kv-" and with '_' for '-',
//   {"dtype": "f32", "window": 0, "sinks": 0, "block": 0, "evict": "none",
//    "budget": 0, "snap_window": 0, "snap_pool": 0, "snap_pooling": "max"}
// (SnapKV's 0 = its default). The model's shape is not part of it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/kv/kv_layout.h"

namespace kvscope {

nlohmann::json kv_layout_to_json(const KVLayout& kv);

// Reads `obj` (absent fields: the dense f32 layout's) into `out`, as saved:
// only what cannot be read (not an object, a field of the wrong type or past
// an int, a name kvscope does not know) fails, with `problem` naming
// `what` ("kv_layout"), the field and what was expected; `out` is then dense
// f32. Ranges and the model's limits are the caller's (fit_choices).
bool kv_layout_from_json(const nlohmann::json& obj, const std::string& what, KVLayout& out, std::string& problem);

// The field names, in the order above.
inline constexpr const char* kKVLayoutFields[] = {"dtype",  "window",      "sinks",     "block",       "evict",
                                                  "budget", "snap_window", "snap_pool", "snap_pooling"};

}  // namespace kvscope
