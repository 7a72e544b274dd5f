// `kvscope tokenize` and `kvscope inspect`: what a model folder holds, its
// tokenizer's ids for a text and its architecture, sizes and FLOPs per step.
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_gguf.h"
#include "app/cli/cli_json.h"
#include "app/cli/cli_out.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/arch/model.h"
#include "model/core/units.h"
#include "model/engine/engine.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;

json inspect_json(const Model& m) {
  const Config& c = m.config;
  const int T = c.n_positions;
  const uint64_t kv1 = forward_flops(c, 1, 1), kvT = forward_flops(c, 1, T);
  const uint64_t nc1 = forward_flops(c, 1, 1), ncT = forward_flops(c, T, T);
  return {{"name", m.name},
          {"dir", m.dir},
          {"n_layer", c.n_layer},
          {"model_type", c.model_type},
          {"n_head", c.n_head},
          {"n_kv_head", c.kv_heads()},
          {"n_embd", c.n_embd},
          {"head_dim", c.head_dim()},
          {"n_positions", c.n_positions},
          {"max_position_embeddings", c.max_position_embeddings},
          {"vocab_size", c.vocab_size},
          {"n_params", m.n_params},
          {"dtype", m.stored_dtype},
          {"weight_bytes", m.weight_bytes()},
          {"stored_bytes", m.file_bytes},
          {"kv_bytes_per_token", kv_bytes_per_position(c)},
          {"kv_bytes_full_context", kv_bytes_per_position(c) * static_cast<uint64_t>(T)},
          {"decode_flops", {{"kv_cache", {{"T1", kv1}, {"Tmax", kvT}}}, {"no_cache", {{"T1", nc1}, {"Tmax", ncT}}}}},
          {"load_seconds", m.load_seconds}};
}

// The model card. "stored" is the parameters' bytes in the file (2 a value
// for F16 and BF16, 4 for F32); "resident" is Model::weight_bytes(): the
// weights as the engine holds them, matrices in their stored dtype (and the
// f32 copies the WebAssembly build keeps of a small 16-bit model's) and the
// vectors in f32, so it is what loading costs.
void print_inspect(const Model& m) {
  const Config& c = m.config;
  const int T = c.n_positions;
  const uint64_t kv1 = forward_flops(c, 1, 1), kvT = forward_flops(c, 1, T);
  const uint64_t nc1 = forward_flops(c, 1, 1), ncT = forward_flops(c, T, T);
  out_printf("model          %s (%s)\n", m.name.c_str(), m.dir.c_str());
  out_printf("architecture   %s: %d layers, %d heads x %d (%d K/V heads), width %d, vocab %d\n", c.display_name.c_str(),
             c.n_layer, c.n_head, c.head_dim(), c.kv_heads(), c.n_embd, c.vocab_size);
  out_printf("parameters     %" PRIu64 " (%s stored %s, %s resident)\n", m.n_params,
             format_bytes(static_cast<double>(m.file_bytes)).c_str(), m.stored_dtype.c_str(),
             format_bytes(static_cast<double>(m.weight_bytes())).c_str());
  if (c.n_positions < c.max_position_embeddings) {
    out_printf("context        %d positions (the model allows %d; --ctx N reserves for N)\n", c.n_positions,
               c.max_position_embeddings);
  } else {
    out_printf("context        %d positions\n", c.n_positions);
  }
  out_printf("KV cache       %s per token (2 x %d layers x %d x 4 B), %s at full context\n",
             format_bytes(static_cast<double>(kv_bytes_per_position(c))).c_str(), c.n_layer,
             c.kv_heads() * c.head_dim(), format_bytes(static_cast<double>(kv_bytes_per_position(c)) * T).c_str());
  out_printf("decode FLOPs   %-10s %18s %18s\n", "", "T = 1", ("T = " + std::to_string(T)).c_str());
  out_printf("               %-10s %18s %18s\n", "KV CACHE", format_flops(static_cast<double>(kv1)).c_str(),
             format_flops(static_cast<double>(kvT)).c_str());
  out_printf("               %-10s %18s %18s\n", "NO CACHE", format_flops(static_cast<double>(nc1)).c_str(),
             format_flops(static_cast<double>(ncT)).c_str());
  out_printf("load time      %.3f s\n", m.load_seconds);
}

}  // namespace

void add_tokenize_command(CLI::App& app, TokenizeCommand& c) {
  c.cmd = app.add_subcommand("tokenize", "Show the token ids and pieces of a text");
  c.cmd->add_option("--model", c.model, "Folder with tokenizer.json, or vocab.json and merges.txt; or a GGUF file")
      ->check(non_empty("a model folder"));
  c.cmd->add_option("--text", c.text, "Text to tokenize (UTF-8)")->required();
  c.cmd->add_flag("--json", c.json, "Print {\"ids\", \"pieces\", \"bytes\", \"decoded\"} as JSON");
}

namespace {

// Exact bytes as a quoted C-style string: \" \\ \n \t \r, other control
// bytes (C0, DEL, and C1's two bytes) and bytes outside complete UTF-8 characters as \xNN, complete
// characters as themselves. Unlike a display piece (where the byte 0xC3 and
// the four characters \xc3 look alike), every text reads one way.
std::string quoted_bytes(const std::string& raw) {
  std::string out = "\"";
  for (size_t i = 0; i < raw.size();) {
    const auto b = static_cast<unsigned char>(raw[i]);
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    const bool c1 = b == 0xC2 && i + 1 < raw.size() && static_cast<unsigned char>(raw[i + 1]) < 0xA0;  // U+0080..9F
    if (b >= 0x80 && !c1 && i + len <= raw.size() && first_invalid_utf8(raw.substr(i, len)) == std::string::npos) {
      out.append(raw, i, len);  // a whole character
      i += len;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", b);
    out += b == '"'                  ? "\\\""
           : b == '\\'               ? "\\\\"
           : b == '\n'               ? "\\n"
           : b == '\t'               ? "\\t"
           : b == '\r'               ? "\\r"
           : (b < 0x20 || b >= 0x7f) ? hex
                                     : std::string(1, static_cast<char>(b));
    ++i;
  }
  return out + "\"";
}

}  // namespace

int run_tokenize_command(const TokenizeCommand& c) {
  const std::string model = c.model.empty() ? default_model_dir() : c.model;
  const std::string gguf = gguf_model_path(model);
  const Tokenizer tok = gguf.empty() ? Tokenizer::load(model) : tokenizer_from_gguf(GgufFile::open(gguf));
  require_utf8(c.text, "--text");  // the prompt's rule: what the tokenizer is given is UTF-8 text
  const std::vector<int> ids = tok.encode(c.text);
  std::vector<std::string> pieces;
  json bytes = json::array();
  for (int id : ids) {
    pieces.push_back(tok.display_piece(id));
    bytes.push_back(bytes_json(tok.token_bytes(id)));
  }
  // The ids read back as a whole text, as the tokenizer's decoder does (a
  // SentencePiece-style file strips the space its normalizer put in front).
  const std::string decoded = escape_invalid_utf8(tok.decode_text(ids));
  if (c.json) {
    out_line(json{{"ids", ids}, {"pieces", pieces}, {"bytes", bytes}, {"decoded", decoded}}.dump());
  } else {
    for (int id : ids) out_printf("%6d  %s\n", id, quoted_bytes(tok.token_bytes(id)).c_str());
    out_printf("%zu tokens, decoded: %s\n", ids.size(), quoted_bytes(tok.decode_text(ids)).c_str());
  }
  return 0;
}

void add_inspect_command(CLI::App& app, InspectCommand& c) {
  c.cmd = app.add_subcommand("inspect", "Architecture, parameters, KV bytes per token, FLOPs per step");
  c.cmd->add_option("--model", c.model, "Model folder (GPT-2, Llama, Mistral, Qwen2), or a .gguf file to list")
      ->check(non_empty("a model folder"));
  c.cmd->add_flag("--json", c.json, "Print JSON");
  c.cmd->add_option("--ctx", c.ctx, kCtxHelp)->check(in_range(setting::kCtx));
}

int run_inspect_command(const InspectCommand& c) {
  // A GGUF file is listed as stored: its metadata and every tensor's type and layout.
  if (const std::string gguf = gguf_model_path(c.model); !gguf.empty()) return inspect_gguf(gguf, c.json);
  auto m = load_cli_model(c.model, c.ctx);
  if (c.json) {
    out_line(inspect_json(*m).dump(2));
  } else {
    print_inspect(*m);
  }
  return 0;
}

}  // namespace kvscope
