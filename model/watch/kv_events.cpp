#include "model/watch/kv_events.h"

#include <nlohmann/json.hpp>

#include "model/core/error.h"

namespace kvscope {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& expected, const json& got) {
  throw Error("KV event payload: " + path + ": expected " + expected + ", got " +
              (got.is_binary() ? std::string("bytes") : std::string(got.type_name())));
}

BlockHash read_hash(const json& j, const std::string& path) {
  BlockHash h;
  if (j.is_number_unsigned() || j.is_number_integer()) {
    // A signed hash (Python's hash() in older versions) keeps its 64 bits.
    const uint64_t v = j.is_number_unsigned() ? j.get<uint64_t>() : static_cast<uint64_t>(j.get<int64_t>());
    h.is_int = true;
    for (int i = 7; i >= 0; --i) h.bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return h;
  }
  if (j.is_binary()) {
    const auto& b = j.get_binary();
    h.bytes.assign(b.begin(), b.end());
    return h;
  }
  bad(path, "an integer or bytes (a block hash)", j);
}

std::vector<BlockHash> read_hashes(const json& j, const std::string& path) {
  if (!j.is_array()) bad(path, "an array of block hashes", j);
  std::vector<BlockHash> v;
  for (size_t i = 0; i < j.size(); ++i) v.push_back(read_hash(j[i], path + "[" + std::to_string(i) + "]"));
  return v;
}

int64_t read_int(const json& j, const std::string& path) {
  if (!j.is_number_integer()) bad(path, "an integer", j);
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad(path, "an int64", j);
  return j.get<int64_t>();
}

std::vector<int64_t> read_ints(const json& j, const std::string& path) {
  if (!j.is_array()) bad(path, "an array of integers", j);
  std::vector<int64_t> v;
  for (size_t i = 0; i < j.size(); ++i) v.push_back(read_int(j[i], path + "[" + std::to_string(i) + "]"));
  return v;
}

// block_size: an integer, or (the oldest encoding) one token count per block.
int read_block_size(const json& j, const std::string& path) {
  int64_t n = 0;
  if (j.is_array()) {
    if (!j.empty()) n = read_int(j[0], path + "[0]");
  } else {
    n = read_int(j, path);
  }
  if (n < 0 || n > (1 << 24)) bad(path, "a block size in 0..16777216", j);
  return static_cast<int>(n);
}

std::optional<BlockHash> read_parent(const json& j, const std::string& path) {
  if (j.is_null()) return std::nullopt;
  return read_hash(j, path);
}

std::string read_medium(const json& j, const std::string& path) {
  if (j.is_null()) return "GPU";
  if (!j.is_string()) bad(path, "a string (the medium: GPU, CPU, ...) or nil", j);
  return j.get<std::string>();
}

KvEventKind kind_of(const json& tag, const std::string& path) {
  if (!tag.is_string()) bad(path, "an event type name (BlockStored, BlockRemoved, AllBlocksCleared)", tag);
  const std::string t = tag.get<std::string>();
  if (t == "BlockStored") return KvEventKind::kStored;
  if (t == "BlockRemoved") return KvEventKind::kRemoved;
  if (t == "AllBlocksCleared") return KvEventKind::kCleared;
  throw Error("KV event payload: " + path + ": unknown event type \"" + t +
              "\" (expected BlockStored, BlockRemoved or AllBlocksCleared)");
}

// ["BlockStored", hashes, parent, token_ids, block_size, lora_id?, medium?, ...]
// ["BlockRemoved", hashes, medium?, ...], ["AllBlocksCleared"]. Errors name
// the element by its field ("events[0].block_hashes[1]", position in the array).
KvEvent read_event_array(const json& j, const std::string& path) {
  if (j.empty()) bad(path, "an event (a type name first)", j);
  KvEvent e;
  e.kind = kind_of(j[0], path + ".type");
  auto at = [&](const char* name) { return path + "." + name; };
  if (e.kind == KvEventKind::kCleared) return e;
  if (j.size() < 2) throw Error("KV event payload: " + at("block_hashes") + ": missing");
  e.hashes = read_hashes(j[1], at("block_hashes"));
  if (e.kind == KvEventKind::kRemoved) {
    if (j.size() > 2) e.medium = read_medium(j[2], at("medium"));
    return e;
  }
  if (j.size() < 5)
    throw Error("KV event payload: " + path + ": BlockStored has " + std::to_string(j.size()) +
                " fields, expected at least 5 (type, block_hashes, parent_block_hash, token_ids, block_size)");
  e.parent = read_parent(j[2], at("parent_block_hash"));
  e.token_ids = read_ints(j[3], at("token_ids"));
  e.block_size = read_block_size(j[4], at("block_size"));
  if (j.size() > 6) e.medium = read_medium(j[6], at("medium"));
  return e;
}

const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

const json& required(const json& j, const char* name, const std::string& path) {
  const json* f = field(j, name);
  if (!f) throw Error("KV event payload: " + path + "." + name + ": missing");
  return *f;
}

// {"type": "BlockStored", "block_hashes": ..., "parent_block_hash": ..., ...}
KvEvent read_event_map(const json& j, const std::string& path) {
  KvEvent e;
  e.kind = kind_of(required(j, "type", path), path + ".type");
  if (e.kind == KvEventKind::kCleared) return e;
  e.hashes = read_hashes(required(j, "block_hashes", path), path + ".block_hashes");
  if (const json* m = field(j, "medium")) e.medium = read_medium(*m, path + ".medium");
  if (const json* g = field(j, "group_idx"); g && !g->is_null()) e.group = read_int(*g, path + ".group_idx");
  if (e.kind == KvEventKind::kRemoved) return e;
  if (const json* p = field(j, "parent_block_hash")) e.parent = read_parent(*p, path + ".parent_block_hash");
  if (const json* t = field(j, "token_ids")) e.token_ids = read_ints(*t, path + ".token_ids");
  if (const json* b = field(j, "block_size")) e.block_size = read_block_size(*b, path + ".block_size");
  return e;
}

// nlohmann's msgpack reader recurses once per nesting level: a payload of a
// million nested arrays would overflow the stack. This SAX handler builds
// the document as the DOM parser does and stops the read beyond kMaxDepth
// levels (a batch nests 5: batch, events, event, extra_keys, a key tuple).
constexpr int kMaxDepth = 32;

class BoundedSax {
 public:
  explicit BoundedSax(json& out) : dom_(out, false) {}
  bool too_deep() const { return too_deep_; }
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return deeper() && dom_.start_object(n); }
  bool end_object() { return --depth_, dom_.end_object(); }
  bool start_array(std::size_t n) { return deeper() && dom_.start_array(n); }
  bool end_array() { return --depth_, dom_.end_array(); }
  template <class E>
  bool parse_error(std::size_t pos, const std::string& tok, const E& e) {
    return dom_.parse_error(pos, tok, e);
  }

 private:
  bool deeper() {
    if (++depth_ <= kMaxDepth) return true;
    too_deep_ = true;
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int depth_ = 0;
  bool too_deep_ = false;
};

json parse_msgpack(const std::string& payload) {
  json j;
  BoundedSax sax(j);
  try {
    const bool ok = json::sax_parse(payload, &sax, json::input_format_t::msgpack);
    if (sax.too_deep())
      throw Error("KV event payload: nested deeper than " + std::to_string(kMaxDepth) + " levels (a batch nests 5)");
    if (!ok) throw Error("KV event payload is not msgpack");
  } catch (const json::exception& ex) {
    throw Error(std::string("KV event payload is not msgpack (") + ex.what() + ")");
  }
  return j;
}

}  // namespace

std::string to_string(const BlockHash& h) {
  if (h.is_int && h.bytes.size() == 8) {
    uint64_t v = 0;
    for (char c : h.bytes) v = (v << 8) | static_cast<unsigned char>(c);
    return std::to_string(v);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (char c : h.bytes) {
    s += hex[(static_cast<unsigned char>(c) >> 4) & 0xf];
    s += hex[static_cast<unsigned char>(c) & 0xf];
  }
  return s;
}

KvEventBatch decode_kv_batch(const std::string& payload) {
  const json j = parse_msgpack(payload);
  KvEventBatch b;
  const json* ts = nullptr;
  const json* events = nullptr;
  const json* rank = nullptr;
  if (j.is_array()) {
    if (j.size() < 2) bad("batch", "[ts, events, data_parallel_rank?]", j);
    ts = &j[0];
    events = &j[1];
    if (j.size() > 2) rank = &j[2];
  } else if (j.is_object()) {
    b.batch_is_map = true;
    ts = &required(j, "ts", "batch");
    events = &required(j, "events", "batch");
    rank = field(j, "data_parallel_rank");
  } else {
    bad("batch", "an array or a map (an event batch)", j);
  }
  if (!ts->is_number()) bad("batch.ts", "a number (seconds)", *ts);
  b.ts = ts->get<double>();
  if (rank && !rank->is_null()) b.dp_rank = read_int(*rank, "batch.data_parallel_rank");
  if (!events->is_array()) bad("batch.events", "an array of events", *events);
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    const std::string path = "events[" + std::to_string(i) + "]";
    if (e.is_array()) {
      b.events.push_back(read_event_array(e, path));
    } else if (e.is_object()) {
      b.events.push_back(read_event_map(e, path));
      if (i == 0) b.events_are_maps = true;
    } else {
      bad(path, "an event (an array or a map)", e);
    }
  }
  return b;
}

}  // namespace kvscope
