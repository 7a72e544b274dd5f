// The tokenizer of a model as GGUF metadata: what llama.cpp's converter
// writes for it, and what tokenizer_from_gguf (gguf_tokenizer.cpp) reads
// back into the same tokenizer.
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "model/arch/gguf_export.h"
#include "model/arch/gguf_model.h"
#include "model/arch/gguf_tokenizer.h"
#include "model/arch/gguf_write.h"
#include "model/chat/chat_template.h"
#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// llama.cpp's token types.
enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Tokens by id, "[PADn]" (UNUSED) where no entry has the id, as the converter pads.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  void set(const std::string& path, int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id > (1 << 24))
      throw Error(path + ": token id " + std::to_string(id) + " of \"" + text + "\" out of range");
    for (size_t i = tokens.size(); i <= static_cast<size_t>(id); ++i) {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.push_back(kUnused);
    }
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
  }
  void pad_to(size_t n) {
    for (size_t i = tokens.size(); i < n; ++i) {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.push_back(kUnused);
    }
  }
};

json read_json(const std::string& path) {
  try {
    return json::parse(read_regular_file(path, "a JSON file"));
  } catch (const json::exception& e) {
    throw Error(path + ": not valid JSON (" + e.what() + ")");
  }
}

bool byte_level_regex(const json& p, bool use_regex) {
  return p.is_object() && p.value("type", "") == "ByteLevel" && p.value("use_regex", true) == use_regex;
}
std::string split_regex(const json& p) {
  if (!p.is_object() || p.value("type", "") != "Split" || !p.contains("pattern") || !p["pattern"].is_object())
    return "";
  return p["pattern"].value("Regex", "");
}

// llama.cpp's name of a byte-level tokenizer.json's pre-tokenizer rules.
std::string pre_name(const json& tj, const std::string& path) {
  const json pre = tj.value("pre_tokenizer", json());
  const json steps = pre.is_object() && pre.value("type", "") == "Sequence" ? pre.value("pretokenizers", json::array())
                                                                            : json::array({pre});
  const bool nfc =
      tj.contains("normalizer") && tj["normalizer"].is_object() && tj["normalizer"].value("type", "") == "NFC";
  if (steps.size() == 1 && byte_level_regex(steps[0], true)) return "gpt-2";
  if (steps.size() == 2 && steps[0].is_object() && steps[0].value("type", "") == "Digits" &&
      steps[0].value("individual_digits", false) && byte_level_regex(steps[1], true))
    return "smollm";
  if (steps.size() == 2 && byte_level_regex(steps[1], false)) {
    if (split_regex(steps[0]) == kQwen2SplitRegex && nfc) return "qwen2";
    if (split_regex(steps[0]) == kLlama3SplitRegex) return "llama-bpe";
  }
  throw Error(path + ": \"pre_tokenizer\" " + pre.dump().substr(0, 200) +
              " has no tokenizer.ggml.pre name kvscope knows (expected the rules of gpt-2, smollm, qwen2 or "
              "llama-bpe)");
}

std::vector<std::string> merges_of(const json& model, const std::string& path) {
  std::vector<std::string> out;
  const json list = model.value("merges", json::array());
  for (const json& m : list) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      throw Error(path + ": \"model.merges\": expected \"a b\" strings or [a, b] pairs, found " + m.dump());
    }
  }
  return out;
}

// Whether the post-processor puts a special token before a single text.
bool adds_bos(const json& tj) {
  const json pp = tj.value("post_processor", json());
  if (!pp.is_object() || pp.value("type", "") != "TemplateProcessing") return false;
  const json single = pp.value("single", json::array());
  return single.is_array() && !single.empty() && single[0].is_object() && single[0].contains("SpecialToken");
}

bool is_byte_piece(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]));
}

// SentencePiece-style BPE: GGUF keeps scores, from which the loader derives
// the merges (every split of a piece, by the piece's score). A piece's score
// is minus the rank of the first merge that makes it, so the derived merges
// come in the order of the file's; pieces no merge makes score below all.
std::vector<float> scores_from_merges(const Vocab& v, const std::vector<std::string>& merges) {
  std::map<std::string, size_t> first;
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ');
    if (sp == std::string::npos) continue;
    first.emplace(merges[r].substr(0, sp) + merges[r].substr(sp + 1), r);
  }
  std::vector<float> scores(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const auto it = first.find(v.tokens[i]);
    scores[i] = it != first.end() ? -static_cast<float>(it->second) : -1e9f;
  }
  return scores;
}

void from_tokenizer_json(const Model& m, const std::string& path, GgufWriter& w) {
  const json tj = read_json(path);
  const json model = tj.value("model", json::object());
  if (model.value("type", "BPE") != "BPE")
    throw Error(path + ": \"model.type\" is \"" + model.value("type", "") + "\" (expected BPE)");
  const bool spm = model.value("byte_fallback", false);
  Vocab v;
  const std::string unk =
      model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  const json vocab = model.value("vocab", json::object());  // kept: items() refers into it
  for (const auto& [text, id] : vocab.items()) {
    const int32_t type = spm && text == unk ? kUnknown : spm && is_byte_piece(text) ? kByte : kNormal;
    v.set(path, id.get<int64_t>(), text, type);
  }
  const json added = tj.value("added_tokens", json::array());
  for (const json& a : added) {
    const std::string text = a.value("content", "");
    const int32_t type = text == unk && spm ? kUnknown : a.value("special", false) ? kControl : kUserDefined;
    v.set(path, a.value("id", int64_t{-1}), text, type);
  }
  v.pad_to(static_cast<size_t>(m.config.vocab_size));
  const std::vector<std::string> merges = merges_of(model, path);
  w.add_string("tokenizer.ggml.model", spm ? "llama" : "gpt2");
  if (!spm) w.add_string("tokenizer.ggml.pre", pre_name(tj, path));
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  if (spm) w.add_f32s("tokenizer.ggml.scores", scores_from_merges(v, merges));
  w.add_i32s("tokenizer.ggml.token_type", v.types);
  if (!spm) w.add_strings("tokenizer.ggml.merges", merges);
  if (spm) {
    const std::string norm = tj.value("normalizer", json()).dump();
    w.add_bool("tokenizer.ggml.add_space_prefix", norm.find("\"Prepend\"") != std::string::npos);
  }
  w.add_bool("tokenizer.ggml.add_bos_token", adds_bos(tj));
}

// GPT-2's vocab.json + merges.txt: <|endoftext|> is its one special token.
void from_vocab_merges(const Model& m, const std::string& dir, GgufWriter& w) {
  const std::string vpath = (fs::path(dir) / "vocab.json").string(), mpath = (fs::path(dir) / "merges.txt").string();
  Vocab v;
  const json vocab = read_json(vpath);  // kept: items() refers into it
  for (const auto& [text, id] : vocab.items())
    v.set(vpath, id.get<int64_t>(), text, text == "<|endoftext|>" ? kControl : kNormal);
  v.pad_to(static_cast<size_t>(m.config.vocab_size));
  std::vector<std::string> merges;
  const std::string text = read_regular_file(mpath, "a merges.txt");
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (++line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (!line.empty()) merges.push_back(line);
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-2");
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  w.add_i32s("tokenizer.ggml.token_type", v.types);
  w.add_strings("tokenizer.ggml.merges", merges);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
}

bool has_chat_template(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "chat_template.jinja", ec) || fs::exists(fs::path(dir) / "chat_template.json", ec))
    return true;
  const fs::path cfg = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(cfg, ec)) return false;
  const json j = read_json(cfg.string());
  return j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null();
}

}  // namespace

void tokenizer_export(const Model& m, GgufWriter& w) {
  if (const std::string gguf = gguf_model_path(m.dir); !gguf.empty()) {
    const GgufFile f = GgufFile::open(gguf);
    for (const auto& [key, value] : f.metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.add(key, value);
    return;
  }
  const std::string tj = (fs::path(m.dir) / "tokenizer.json").string();
  std::error_code ec;
  if (fs::exists(tj, ec)) {
    from_tokenizer_json(m, tj, w);
  } else {
    from_vocab_merges(m, m.dir, w);
  }
  if (m.config.bos_token_id >= 0)
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(m.config.bos_token_id));
  if (m.config.eos_token_id >= 0)
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(m.config.eos_token_id));
  if (has_chat_template(m.dir)) w.add_string("tokenizer.chat_template", load_chat_template(m.dir, std::nullopt).source);
}

}  // namespace kvscope
