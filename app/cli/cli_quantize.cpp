// `kvscope quantize`: any model kvscope opens, written as a GGUF file at one
// tensor type (model/arch/gguf_export.h), then a summary of what was
// written: tensors per type, bytes, bits per weight.
#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "model/arch/gguf_export.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"

namespace kvscope {
namespace {

constexpr const char* kQuantizeTypes = "f16, bf16, q8_0, q4_0, q4_k or q6_k";

GgmlType parse_quantize_type(const std::string& name) {
  std::string up = name;
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  for (GgmlType t :
       {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K})
    if (up == ggml_type_info(t).name) return t;
  throw UsageError("--type: found \"" + name + "\", expected " + kQuantizeTypes);
}

// The folder --out goes in must exist (it is never created).
void check_out_folder(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(out).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw UsageError("--out: folder \"" + parent.string() + "\" does not exist (expected an existing folder)");
  if (fs::is_directory(fs::path(out), ec))
    throw UsageError("--out: \"" + out + "\" is a folder (expected a file name)");
}

struct TypeTotal {
  GgmlType type = GgmlType::kF32;
  int tensors = 0, fallback = 0;
  uint64_t weights = 0, bytes = 0;
};

}  // namespace

void add_quantize_command(CLI::App& app, QuantizeCommand& c) {
  c.cmd = app.add_subcommand("quantize", "Write the model as a GGUF file at one tensor type (docs/gguf.md)");
  c.cmd->add_option("--model", c.model, "Model folder, Hugging Face id or GGUF file (default: the embedded model)")
      ->check(non_empty("a model folder"));
  c.cmd->add_option("--type", c.type, std::string("Tensor type of the matrices: ") + kQuantizeTypes)->required();
  c.cmd->add_option("--out", c.out, "The GGUF file to write (its folder must exist)")
      ->required()
      ->check(non_empty("a file name"));
  c.cmd->add_flag("--json", c.json, "Print one JSON record of what was written");
}

int run_quantize_command(const QuantizeCommand& c) {
  const GgmlType type = parse_quantize_type(c.type);
  check_out_folder(c.out);
  const auto m = load_cli_model(c.model, 0);
  const GgufExport g = export_gguf(*m, type);
  write_file_atomic(c.out, g.bytes);
  std::map<std::string, TypeTotal> per_type;
  TypeTotal all;
  for (const ExportedTensor& t : g.tensors) {
    for (TypeTotal* x : {&per_type[ggml_type_info(t.type).name], &all}) {
      x->type = t.type;
      ++x->tensors;
      x->fallback += t.fallback;
      x->weights += t.n_elements;
      x->bytes += t.n_bytes;
    }
  }
  const double bpw = all.weights ? 8.0 * static_cast<double>(all.bytes) / static_cast<double>(all.weights) : 0.0;
  if (c.json) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [name, x] : per_type)
      types[name] = {{"tensors", x.tensors}, {"weights", x.weights}, {"bytes", x.bytes}, {"fallback", x.fallback}};
    out_line(nlohmann::json{
        {"model", m->name},
        {"out", c.out},
        {"type", ggml_type_info(type).name},
        {"file_bytes", g.bytes.size()},
        {"tensors", all.tensors},
        {"weights", all.weights},
        {"tensor_bytes", all.bytes},
        {"bits_per_weight", bpw},
        {"types",
         types}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));  // a path's odd bytes as U+FFFD
    return 0;
  }
  out_printf("wrote %s: %s at %s, %d tensors, %" PRIu64 " weights in %s (%.3f bits per weight), file %s\n",
             c.out.c_str(), m->name.c_str(), ggml_type_info(type).name, all.tensors, all.weights,
             format_bytes(static_cast<double>(all.bytes)).c_str(), bpw,
             format_bytes(static_cast<double>(g.bytes.size())).c_str());
  for (const auto& [name, x] : per_type) {
    out_printf("  %-5s %3d tensors %12" PRIu64 " weights %12" PRIu64 " bytes  %s%s\n", name.c_str(), x.tensors,
               x.weights, x.bytes, ggml_block_layout(ggml_type_info(x.type)).c_str(),
               x.fallback ? (" (" + std::to_string(x.fallback) +
                             " as the fallback: rows not a multiple of the asked type's block)")
                                .c_str()
                          : "");
  }
  return 0;
}

}  // namespace kvscope
