#include "app/cli/cli_gguf.h"

#include <cinttypes>
#include <map>
#include <nlohmann/json.hpp>

#include "app/cli/cli_out.h"
#include "model/arch/gguf.h"
#include "model/core/units.h"

namespace kvscope {
namespace {

using nlohmann::json;

// "[576, 49152]"
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// A key or name as JSON text can hold it: printable ASCII as is, other bytes
// as \xNN (a dump of invalid UTF-8 would throw).
std::string json_safe(const std::string& s) {
  const std::string q = gguf_quote(s, s.size());
  return q.substr(1, q.size() - 2);
}

json listing_json(const GgufFile& f) {
  json meta = json::object();
  for (const auto& [key, v] : f.metadata()) meta[json_safe(key)] = v.summary();
  json tensors = json::array();
  for (const GgufTensor& t : f.tensors()) {
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    tensors.push_back({{"name", json_safe(t.name)},
                       {"dims", t.dims},
                       {"type", info.name},
                       {"block_size", info.block_size},
                       {"block_bytes", info.block_bytes},
                       {"bits_per_weight", info.bits_per_weight()},
                       {"offset", t.offset},
                       {"bytes", t.n_bytes}});
  }
  return {{"file", json_safe(f.origin())},  {"version", 3},     {"size", f.file_size()}, {"alignment", f.alignment()},
          {"data_offset", f.data_offset()}, {"metadata", meta}, {"tensors", tensors}};
}

void print_listing(const GgufFile& f) {
  out_printf("file           %s (GGUF v3, %s, alignment %" PRIu64 ", data from byte %" PRIu64 ")\n", f.origin().c_str(),
             format_bytes(static_cast<double>(f.file_size())).c_str(), f.alignment(), f.data_offset());
  out_printf("metadata       %zu entries\n", f.metadata().size());
  for (const auto& [key, v] : f.metadata()) out_printf("  %-40s %s\n", gguf_quote(key).c_str(), v.summary().c_str());
  uint64_t weights = 0, bytes = 0;
  std::map<std::string, int> per_type;
  for (const GgufTensor& t : f.tensors()) {
    weights += static_cast<uint64_t>(t.n_elements);
    bytes += t.n_bytes;
    ++per_type[ggml_type_info(t.type).name];
  }
  out_printf("tensors        %zu: %" PRIu64 " weights in %s (shapes in ggml order: row length first)\n",
             f.tensors().size(), weights, format_bytes(static_cast<double>(bytes)).c_str());
  out_printf("  %-32s %-20s %-5s %-44s %s\n", "NAME", "SHAPE", "TYPE", "BLOCK LAYOUT", "BYTES");
  for (const GgufTensor& t : f.tensors()) {
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    out_printf("  %-32s %-20s %-5s %-44s %" PRIu64 "\n", gguf_quote(t.name).c_str(), dims_text(t.dims).c_str(),
               info.name, ggml_block_layout(info).c_str(), t.n_bytes);
  }
  for (const auto& [name, n] : per_type) {
    const GgmlTypeInfo* info = nullptr;
    for (const GgmlTypeInfo& t : ggml_readable_types())
      if (name == t.name) info = &t;
    out_printf("type %-9s %d tensors: %s\n", name.c_str(), n, ggml_block_layout(*info).c_str());
  }
}

}  // namespace

int inspect_gguf(const std::string& path, bool as_json) {
  const GgufFile f = GgufFile::open(path);
  if (as_json) {
    out_line(listing_json(f).dump(2));
  } else {
    print_listing(f);
  }
  return 0;
}

}  // namespace kvscope
