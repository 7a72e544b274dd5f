#include "app/lessons/eviction.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "model/core/units.h"

namespace kvscope {

namespace {

bool holds(const StepCache& r, int layer, int pos) {
  if (static_cast<size_t>(layer) >= r.kv_held_by_layer.size()) return true;  // not recorded: assume held
  const std::vector<int>& h = r.kv_held_by_layer[static_cast<size_t>(layer)];
  return std::binary_search(h.begin(), h.end(), pos);
}

// A word a reader would call one: 3+ ASCII letters after an optional leading space.
bool is_word(const std::string& piece) {
  const size_t b = piece.empty() || piece[0] != ' ' ? 0 : 1;
  if (piece.size() < b + 3) return false;
  return std::all_of(piece.begin() + static_cast<std::ptrdiff_t>(b), piece.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
}

// The step whose forward first left `pos` out of `layer` (drops are for good).
int dropped_at(const std::vector<RecordPtr>& records, size_t until, int layer, int pos) {
  for (size_t j = 0; j <= until; ++j)
    if (pos < records[j]->seq_len && !holds(*records[j], layer, pos)) return records[j]->index;
  return -1;
}

// The query at record i's new position: the layers that hold no earlier
// occurrence of its word (as the previous step left them).
void find_miss(const std::vector<RecordPtr>& records, size_t i, const std::vector<int>& ids,
               const std::vector<std::string>& pieces, std::vector<EvictionMiss>& out) {
  const StepRecord& r = *records[i];
  const StepRecord& prev = *records[i - 1];
  const int q = r.first;
  if (r.n_new != 1 || q <= 0 || static_cast<size_t>(q) >= ids.size() || !is_word(pieces[static_cast<size_t>(q)]))
    return;
  std::vector<int> earlier;
  for (int p = 0; p < q; ++p)
    if (ids[static_cast<size_t>(p)] == ids[static_cast<size_t>(q)]) earlier.push_back(p);
  if (earlier.empty()) return;
  EvictionMiss m;
  m.pos = earlier.back();
  m.again = q;
  m.piece = pieces[static_cast<size_t>(q)];
  for (int l = 0; l < r.n_layer; ++l) {
    const bool any = std::any_of(earlier.begin(), earlier.end(), [&](int p) { return holds(prev, l, p); });
    if (any) continue;
    m.layers.push_back(l);
    m.steps.push_back(dropped_at(records, i - 1, l, m.pos));
  }
  if (!m.layers.empty()) out.push_back(std::move(m));
}

}  // namespace

EvictionLesson eviction_lesson(const std::vector<RecordPtr>& records, size_t count) {
  EvictionLesson e;
  count = std::min(count, records.size());
  if (count == 0 || !records[count - 1]) return e;
  const StepRecord& r = *records[count - 1];
  if (!r.kv_layout.evicting() || r.mode != CacheMode::kKV || r.kv_held_by_layer.empty()) return e;
  e.active = true;
  e.rule = r.kv_layout.evict;
  e.budget = r.kv_layout.budget;
  e.n_layer = r.n_layer;
  e.seq_len = r.seq_len;
  for (const std::vector<int>& h : r.kv_held_by_layer) e.held_per_layer.push_back(static_cast<int>(h.size()));
  for (int p = 0; p < r.seq_len; ++p) {
    int n = 0;
    for (int l = 0; l < r.n_layer; ++l) n += holds(r, l, p) ? 1 : 0;
    e.held_by_all += n == r.n_layer ? 1 : 0;
    e.held_by_some += n > 0 ? 1 : 0;
  }
  e.bytes_held = r.kv_bytes;
  e.bytes_all = static_cast<uint64_t>(r.seq_len) * r.kv_layout.bytes_per_position();
  // The tokens at each position, as the records chose them.
  std::vector<int> ids;
  std::vector<std::string> pieces;
  for (size_t i = 0; i < count; ++i) {
    const StepRecord& s = *records[i];
    if (s.prefill) {
      ids = s.prompt_tokens;
      pieces = s.prompt_pieces;
      pieces.resize(ids.size());
    }
    ids.resize(static_cast<size_t>(s.seq_len));
    pieces.resize(static_cast<size_t>(s.seq_len));
    ids.push_back(s.token);
    pieces.push_back(s.piece);
    e.rows_dropped += s.evicted;
  }
  for (size_t i = 1; i < count; ++i) find_miss(records, i, ids, pieces, e.misses);
  std::reverse(e.misses.begin(), e.misses.end());
  return e;
}

std::string eviction_keeps_text(const EvictionLesson& e) {
  if (!e.active) return "";
  const std::string n = std::to_string(e.budget);
  std::string s = e.rule == KVEvict::kSnapKV
                      ? "SnapKV: after the prefill each K/V head kept the " + n +
                            " prompt positions its query heads' last prompt queries weighted most (pooled over "
                            "neighbours, the window kept whole); decoding drops nothing more."
                  : e.rule == KVEvict::kTova
                      ? "TOVA: after every forward each layer keeps the " + n +
                            " positions its newest query weighted most (the weights averaged over the heads) and "
                            "drops the rest."
                      : "H2O: after every forward each layer keeps its " + std::to_string(e.budget / 2) +
                            " newest positions and the " + std::to_string(e.budget - e.budget / 2) +
                            " others with the most attention accumulated over every query so far.";
  s += " Now, of " + std::to_string(e.seq_len) + " positions, " + std::to_string(e.held_by_all) +
       " are held by every layer and " + std::to_string(e.held_by_some) + " by at least one: the layers disagree.";
  return s;
}

std::string eviction_cost_text(const EvictionLesson& e) {
  if (!e.active) return "";
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.2f",
                e.bytes_all ? static_cast<double>(e.bytes_held) / static_cast<double>(e.bytes_all) : 0.0);
  return "It holds " + format_bytes(e.bytes_held) + " instead of " + format_bytes(e.bytes_all) + " for all " +
         std::to_string(e.seq_len) + " positions (" + ratio + "\xC3\x97), and has dropped " +
         std::to_string(e.rows_dropped) +
         " K/V rows so far, for good. The scores cost little: the attention weights are computed anyway" +
         (e.rule == KVEvict::kH2O ? "; H2O also keeps a running sum per held position." : ".");
}

std::string eviction_fails_text(const EvictionLesson& e) {
  if (!e.active) return "";
  if (e.misses.empty())
    return "Where it fails: a word needed again after a layer dropped it. None on screen yet: try a longer run, or a "
           "prompt that names someone twice.";
  const EvictionMiss& m = e.misses.front();
  std::string layers, steps;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    layers += (i ? ", " : "") + std::to_string(m.layers[i]);
    steps += (i ? ", " : "") + std::to_string(m.steps[i]);
  }
  return "Where it fails: \"" + m.piece + "\" at position " + std::to_string(m.again) + " is a word seen before, at " +
         std::to_string(m.pos) + ", but layer" + (m.layers.size() > 1 ? "s " : " ") + layers +
         " had dropped it (at step" + (m.steps.size() > 1 ? "s " : " ") + steps + "), so " +
         (m.layers.size() > 1 ? "their" : "its") + " query could not look back at it, as a copy of a name needs. " +
         std::to_string(e.misses.size()) + (e.misses.size() == 1 ? " such return" : " such returns") + " so far.";
}

}  // namespace kvscope
