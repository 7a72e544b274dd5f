// GPT-2 byte-level BPE, written to reproduce OpenAI's encoder.py exactly:
// bytes_to_unicode(), the pre-tokenizer regex (matched by hand below, with
// utf8proc for the Unicode categories) and rank-ordered merges.
#include "model/tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <queue>

#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/json_quote.h"
#include "model/tokenizer/tokenizer_detail.h"
#include "model/tokenizer/tokenizer_rules.h"

namespace kvscope {
namespace {

// ---- bytes <-> unicode (GPT-2's bytes_to_unicode) ---------------------------
// Printable Latin-1 bytes map to themselves; the other 68 bytes map to
// U+0100.. in byte order, so every token is a printable string in vocab.json.
struct ByteTable {
  std::array<char32_t, 256> to_cp{};  // byte -> code point
  std::array<int, 324> to_byte{};     // code point (< 0x144) -> byte, -1 if none

  ByteTable() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_cp[b]] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

void append_utf8(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

// Unicode form of a vocab entry -> raw bytes. Characters outside the byte
// table (not produced by GPT-2's vocab, but possible in hand-edited files) are
// kept as their own UTF-8 so such entries still decode to something readable.
}  // namespace

std::string detail::byte_level_entry_to_bytes(const std::string& entry) {
  const ByteTable& table = byte_table();
  std::string out;
  out.reserve(entry.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(entry.data());
  std::size_t i = 0;
  while (i < entry.size()) {
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(entry.size() - i), &cp);
    if (n <= 0) {  // nlohmann validates UTF-8, so this is only defensive
      out.push_back(entry[i]);
      ++i;
      continue;
    }
    if (cp >= 0 && cp < static_cast<utf8proc_int32_t>(table.to_byte.size()) && table.to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(table.to_byte[cp]));
    } else {
      out.append(entry, i, static_cast<std::size_t>(n));
    }
    i += static_cast<std::size_t>(n);
  }
  return out;
}

namespace {

std::string hex_byte(unsigned char b) {
  static const char* digits = "0123456789abcdef";
  return std::string{'\\', 'x', digits[b >> 4], digits[b & 15]};
}

std::string read_file(const std::string& path) {
  return detail::read_tokenizer_file(path);
}

}  // namespace

std::string detail::read_tokenizer_file(const std::string& path) {
  return read_regular_file(path, "a tokenizer file: vocab.json, merges.txt or tokenizer.json");
}

std::string detail::byte_level_entry(unsigned char b) {
  std::string entry;
  append_utf8(entry, byte_table().to_cp[b]);
  return entry;
}

namespace {

// ---- pre-tokenizer -------------------------------------------------------------
// GPT-2's pattern, as matched by Python's `regex` module:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
enum class CharClass : unsigned char { kLetter, kNumber, kSpace, kOther };

CharClass classify(char32_t cp) {
  if (detail::is_white_space(cp)) return CharClass::kSpace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

struct AsciiClasses {
  std::array<CharClass, 128> cls{};
  AsciiClasses() {
    for (int c = 0; c < 128; ++c) cls[c] = classify(static_cast<char32_t>(c));
  }
};

// One character of the input: a valid UTF-8 sequence, or a single invalid byte
// (cp = -1, class kOther).
struct Char {
  std::size_t begin;  // byte offset
  char32_t cp;
  CharClass cls;
};

std::vector<Char> decode_chars(const std::string& text) {
  static const AsciiClasses ascii;
  std::vector<Char> chars;
  chars.reserve(text.size() + 1);
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    if (p[i] < 0x80) {
      chars.push_back({i, p[i], ascii.cls[p[i]]});
      ++i;
      continue;
    }
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0 || cp < 0) {
      chars.push_back({i, static_cast<char32_t>(-1), CharClass::kOther});
      ++i;
    } else {
      chars.push_back({i, static_cast<char32_t>(cp), classify(static_cast<char32_t>(cp))});
      i += static_cast<std::size_t>(n);
    }
  }
  chars.push_back({text.size(), 0, CharClass::kOther});  // sentinel: end offset
  return chars;
}

// Calls emit(begin_byte, end_byte) for each pre-token, in order; the pieces
// partition the input exactly.
template <typename Emit>
void split_pretokens(const std::string& text, Emit&& emit) {
  const std::vector<Char> chars = decode_chars(text);
  const std::size_t n = chars.size() - 1;  // without the sentinel
  auto is = [&](std::size_t k, CharClass c) { return k < n && chars[k].cls == c; };
  auto cp_at = [&](std::size_t k) { return k < n ? chars[k].cp : static_cast<char32_t>(-1); };

  std::size_t i = 0;
  while (i < n) {
    std::size_t end = i;  // end of the match, in chars
    const char32_t c = chars[i].cp;
    // 's|'t|'re|'ve|'m|'ll|'d (lower case only, as in GPT-2)
    if (c == U'\'') {
      const char32_t c1 = cp_at(i + 1), c2 = cp_at(i + 2);
      if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd') {
        end = i + 2;
      } else if ((c1 == U'r' && c2 == U'e') || (c1 == U'v' && c2 == U'e') || (c1 == U'l' && c2 == U'l')) {
        end = i + 3;
      }
    }
    if (end == i) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
      const std::size_t start = (c == U' ' && i + 1 < n && chars[i + 1].cls != CharClass::kSpace) ? i + 1 : i;
      const CharClass run = chars[start].cls;
      if (run != CharClass::kSpace) {
        end = start;
        while (is(end, run)) ++end;
      } else {
        // \s+(?!\S): the whitespace run, less its last char when a non-space
        // follows (that char then starts the next pre-token, e.g. " word");
        // \s+: a single whitespace char followed by a non-space.
        std::size_t j = i;
        while (is(j, CharClass::kSpace)) ++j;
        end = (j == n || j - i == 1) ? j : j - 1;
      }
    }
    emit(chars[i].begin, chars[end].begin);
    i = end;
  }
}

std::uint64_t pair_key(int a, int b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

// ---- loading ------------------------------------------------------------------------

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string base = dir.empty() ? std::string(".") : dir;
  std::error_code ec;
  if (std::filesystem::exists(base + "/tokenizer.json", ec)) {
    return from_tokenizer_json(read_file(base + "/tokenizer.json"), base + "/tokenizer.json");
  }
  const std::string vocab = read_file(base + "/vocab.json");
  const std::string merges = read_file(base + "/merges.txt");
  return from_strings(vocab, merges, base);
}

namespace {

// vocab.json: {"<unicode form>": id, ...}. Every id must be an integer in
// [0, kMaxId] and the largest close to the entry count, since ids index a
// dense table. Returns the parsed object; `max_id` is its largest id.
nlohmann::json parse_vocab_json(const std::string& vocab_json, const std::string& vocab_name, long long& max_id) {
  constexpr long long kMaxId = (1 << 24) - 1;  // sanity bound: ids index a dense table
  constexpr long long kMaxGaps = 1024;         // unused ids tolerated below the largest
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error(vocab_name + ": malformed JSON (" + e.what() + "); expected an object {\"token\": id, ...}");
  }
  if (!vocab.is_object() || vocab.empty()) {
    throw Error(vocab_name + ": expected a non-empty JSON object {\"token\": id, ...}, got " +
                std::string(vocab.type_name()));
  }
  max_id = -1;
  for (const auto& [entry, value] : vocab.items()) {
    if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() > kMaxId) {
      throw Error(vocab_name + ": entry \"" + escape_invalid_utf8(entry) + "\" has id " + json_quote(value) +
                  "; expected an integer in [0, " + std::to_string(kMaxId) + "]");
    }
    max_id = std::max(max_id, value.get<long long>());
  }
  // GPT-2 vocabularies number their entries 0..n-1; a few gaps are harmless,
  // but a lone huge id would make the dense id table enormous.
  const long long max_allowed = static_cast<long long>(vocab.size()) + kMaxGaps - 1;
  if (max_id > max_allowed) {
    throw Error(vocab_name + ": largest id is " + std::to_string(max_id) + " for " + std::to_string(vocab.size()) +
                " entries; expected ids numbered from 0 without large gaps (at most " + std::to_string(max_allowed) +
                ")");
  }
  return vocab;
}

// The tokenizer's three id tables from a checked vocab.json; ids must be unique.
void index_vocab(const nlohmann::json& vocab, long long max_id, const std::string& vocab_name,
                 std::vector<std::string>& id_to_bytes, std::unordered_map<std::string, int>& entry_to_id,
                 std::unordered_map<std::string, int>& bytes_to_id) {
  id_to_bytes.assign(static_cast<std::size_t>(max_id + 1), std::string());
  std::vector<bool> used(static_cast<std::size_t>(max_id + 1), false);
  entry_to_id.reserve(vocab.size());
  bytes_to_id.reserve(vocab.size());
  for (const auto& [entry, value] : vocab.items()) {
    const int id = value.get<int>();
    if (used[id]) {
      throw Error(vocab_name + ": id " + std::to_string(id) + " is used by two entries (one is \"" +
                  escape_invalid_utf8(entry) + "\"); expected unique ids");
    }
    used[id] = true;
    std::string bytes = detail::byte_level_entry_to_bytes(entry);
    entry_to_id.emplace(entry, id);
    bytes_to_id.emplace(bytes, id);
    id_to_bytes[id] = std::move(bytes);
  }
}

// The id of every single-byte token, which a byte-level vocab must have.
std::array<int, 256> single_byte_ids(const std::unordered_map<std::string, int>& entry_to_id,
                                     const std::string& vocab_name) {
  std::array<int, 256> ids{};
  const ByteTable& table = byte_table();
  for (int b = 0; b < 256; ++b) {
    std::string entry;
    append_utf8(entry, table.to_cp[b]);
    auto it = entry_to_id.find(entry);
    if (it == entry_to_id.end()) {
      throw Error(vocab_name + ": no token for byte " + hex_byte(static_cast<unsigned char>(b)) + " (entry \"" + entry +
                  "\"); a byte-level BPE vocab needs all 256 single-byte tokens");
    }
    ids[b] = it->second;
  }
  return ids;
}

// The space- or tab-separated fields of one merges.txt line.
std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> parts;
  std::size_t k = 0;
  while (k < line.size()) {
    while (k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
    std::size_t start = k;
    while (k < line.size() && line[k] != ' ' && line[k] != '\t') ++k;
    if (k > start) parts.push_back(line.substr(start, k - start));
  }
  return parts;
}

// merges.txt: optional "#version" line, then one "a b" per line; rank = order.
// `add_merge(a, b, rank)` records a rule and returns -1, or which part is not
// in the vocab (0 a, 1 b, 2 ab), as Tokenizer::add_merge.
template <class AddMerge>
void read_merges(const std::string& merges_txt, const std::string& merges_name, const std::string& vocab_name,
                 const AddMerge& add_merge) {
  std::size_t pos = 0;
  int line_no = 0;
  int rank = 0;
  while (pos < merges_txt.size()) {
    std::size_t eol = merges_txt.find('\n', pos);
    if (eol == std::string::npos) eol = merges_txt.size();
    std::string line = merges_txt.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    const std::vector<std::string> parts = split_fields(line);
    if (parts.empty()) continue;  // blank line (e.g. trailing newline)
    const std::string where = merges_name + ":" + std::to_string(line_no) + ": ";
    if (parts.size() != 2) {
      throw Error(where + "expected two space-separated tokens \"a b\", got " + std::to_string(parts.size()) + ": \"" +
                  escape_invalid_utf8(line) + "\"");
    }
    const int missing = add_merge(parts[0], parts[1], rank++);
    if (missing >= 0) {
      const std::string name = missing < 2 ? parts[static_cast<std::size_t>(missing)] : parts[0] + parts[1];
      throw Error(where + (missing < 2 ? "token \"" : "merged token \"") + escape_invalid_utf8(name) + "\" is not in " +
                  vocab_name + "; expected every merge part and result in the vocab");
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_strings(const std::string& vocab_json, const std::string& merges_txt,
                                  const std::string& origin) {
  const std::string vocab_name = origin + "/vocab.json";
  Tokenizer tok;
  long long max_id = -1;
  const nlohmann::json vocab = parse_vocab_json(vocab_json, vocab_name, max_id);
  index_vocab(vocab, max_id, vocab_name, tok.id_to_bytes_, tok.vocab_entry_to_id_, tok.bytes_to_id_);
  tok.byte_id_ = single_byte_ids(tok.vocab_entry_to_id_, vocab_name);
  read_merges(merges_txt, origin + "/merges.txt", vocab_name,
              [&tok](const std::string& a, const std::string& b, int rank) { return tok.add_merge(a, b, rank); });
  return tok;
}

int Tokenizer::add_merge(const std::string& a, const std::string& b, int rank) {
  int ids[3];
  const std::string* names[3] = {&a, &b, nullptr};
  const std::string ab = a + b;
  names[2] = &ab;
  for (int t = 0; t < 3; ++t) {
    auto it = vocab_entry_to_id_.find(*names[t]);
    if (it == vocab_entry_to_id_.end()) return t;
    ids[t] = it->second;
  }
  // A repeated pair keeps its last rank, as dict(zip(merges, range(...))) does in encoder.py.
  merges_[pair_key(ids[0], ids[1])] = Merge{rank, ids[2]};
  return -1;
}

// ---- encoding ----------------------------------------------------------------------

std::vector<std::string> pretokenize(const std::string& text) {
  std::vector<std::string> out;
  split_pretokens(text, [&](std::size_t b, std::size_t e) { out.push_back(text.substr(b, e - b)); });
  return out;
}

std::size_t first_invalid_utf8(const std::string& text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    utf8proc_int32_t cp = -1;
    const utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0 || cp < 0) return i;
    i += static_cast<std::size_t>(n);
  }
  return std::string::npos;
}

void require_utf8(const std::string& text, const std::string& what) {
  const std::size_t at = first_invalid_utf8(text);
  if (at == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[at])));
  throw UsageError(what + ": byte " + std::to_string(at) + " (" + byte +
                   ") is not valid UTF-8 (expected UTF-8 text, for every model's tokenizer)");
}

std::vector<int> Tokenizer::encode_prompt(const std::string& text) const {
  require_utf8(text, "--prompt");
  std::vector<int> ids = encode(text);
  if (bos_prefix_id_ >= 0) ids.insert(ids.begin(), bos_prefix_id_);
  return ids;
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  if (pipeline_) return encode_pipeline(text);
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  split_pretokens(text, [&](std::size_t b, std::size_t e) { bpe(text.data() + b, e - b, ids); });
  return ids;
}

// encoder.py's loop: repeatedly take the lowest-rank adjacent pair and merge
// every occurrence of it, left to right, until no pair is a merge.
void Tokenizer::bpe(const char* word, std::size_t len, std::vector<int>& out) const {
  constexpr std::size_t kStack = 48;
  int stack[kStack];
  std::vector<int> heap;
  int* sym = stack;
  if (len > kStack) {
    heap.resize(len);
    sym = heap.data();
  }
  for (std::size_t i = 0; i < len; ++i) sym[i] = byte_id_[static_cast<unsigned char>(word[i])];
  bpe_symbols(sym, len, out);
}

namespace {

constexpr int kNoMerge = -1;

// Short words (nearly all): encoder.py's loop as written, O(len^2) but tiny.
// `find(a, b)` is the merge of the pair (a, b) or null; len <= kShortWord.
constexpr std::size_t kShortWord = 48;
template <class FindMerge>
void bpe_short_word(int* sym, std::size_t len, const FindMerge& find, std::vector<int>& out) {
  int rank[kShortWord];  // rank[i]: rank of the pair (sym[i], sym[i+1]); kNoMerge if not a merge
  std::size_t n = len;
  auto rank_of = [&](std::size_t i) {
    const auto* m = find(sym[i], sym[i + 1]);
    return m ? m->rank : kNoMerge;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) rank[i] = rank_of(i);
  while (n > 1) {
    std::size_t best = n;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (rank[i] != kNoMerge && (best == n || rank[i] < rank[best])) best = i;
    }
    if (best == n) break;
    const int a = sym[best], b = sym[best + 1];
    const int merged = find(a, b)->merged_id;
    std::size_t w = 0;  // compact in place
    for (std::size_t i = 0; i < n;) {
      if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
        sym[w++] = merged;
        i += 2;
      } else {
        sym[w++] = sym[i++];
      }
    }
    n = w;
    for (std::size_t i = 0; i + 1 < n; ++i) rank[i] = rank_of(i);
  }
  out.insert(out.end(), sym, sym + n);
}

// Long words (long runs of letters, digits or spaces): the same result via a
// heap, O(len log len). All occurrences of the lowest rank present are popped
// together and merged left to right before any newer pair is considered,
// exactly like the short loop (a merge never creates a pair of its own rank).
template <class FindMerge>
void bpe_long_word(const int* sym, std::size_t len, const FindMerge& find, std::vector<int>& out) {
  struct Node {
    int id;
    int prev, next;  // indices into nodes; -1 at the ends
  };
  struct Cand {
    int rank;
    int left;               // node index of the pair's left symbol
    int left_id, right_id;  // ids when queued; stale if either node changed since
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  const int n = static_cast<int>(len);
  std::vector<Node> nodes(n);
  for (int i = 0; i < n; ++i) nodes[i] = {sym[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int left) {
    if (left < 0 || nodes[left].next < 0) return;
    const int right = nodes[left].next;
    if (const auto* m = find(nodes[left].id, nodes[right].id)) {
      heap.push({m->rank, left, nodes[left].id, nodes[right].id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<Cand> batch;
  while (!heap.empty()) {
    const int r = heap.top().rank;
    batch.clear();
    while (!heap.empty() && heap.top().rank == r) {  // comes out ordered by position
      batch.push_back(heap.top());
      heap.pop();
    }
    for (const Cand& c : batch) {
      Node& left = nodes[c.left];
      // Node ids only ever grow longer, so equal ids mean nothing changed.
      if (left.id != c.left_id || left.next < 0 || nodes[left.next].id != c.right_id) continue;
      const int right = left.next;
      left.id = find(c.left_id, c.right_id)->merged_id;
      left.next = nodes[right].next;
      if (left.next >= 0) nodes[left.next].prev = c.left;
      nodes[right].id = kNoMerge;  // dead
      push(left.prev);
      push(c.left);
    }
  }
  for (int i = 0; i >= 0; i = nodes[i].next) out.push_back(nodes[i].id);
}

}  // namespace

void Tokenizer::bpe_symbols(int* sym, std::size_t len, std::vector<int>& out) const {
  auto find = [this](int a, int b) -> const Merge* {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  if (len <= kShortWord) {
    bpe_short_word(sym, len, find, out);
  } else {
    bpe_long_word(sym, len, find, out);
  }
}

// ---- decoding and display ---------------------------------------------------------

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) {
    if (id >= 0 && id < vocab_size()) out += id_to_bytes_[id];
  }
  return out;
}

std::string Tokenizer::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size()) return std::string();
  return id_to_bytes_[id];
}

std::string Tokenizer::display_piece(int id) const {
  if (id < 0 || id >= vocab_size() || (id_to_bytes_[id].empty())) {
    return "<unknown id " + std::to_string(id) + ">";
  }
  return escape_invalid_utf8(id_to_bytes_[id]);
}

int Tokenizer::token_id(const std::string& vocab_entry) const {
  auto it = vocab_entry_to_id_.find(vocab_entry);
  return it == vocab_entry_to_id_.end() ? -1 : it->second;
}

std::string escape_invalid_utf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (p[i] < 0x80) {
      out.push_back(bytes[i++]);
      continue;
    }
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(bytes.size() - i), &cp);
    if (n <= 0 || cp < 0) {
      out += hex_byte(p[i]);
      ++i;
    } else {
      out.append(bytes, i, static_cast<std::size_t>(n));
      i += static_cast<std::size_t>(n);
    }
  }
  return out;
}

}  // namespace kvscope
