#include "model/decoding/needle.h"

#include <algorithm>
#include <cmath>

#include "model/core/error.h"

namespace kvscope {
namespace {

void append(std::vector<int>& out, const std::vector<int>& ids) {
  out.insert(out.end(), ids.begin(), ids.end());
}

// The share of holders (layers, or (layer, K/V head) pairs where heads hold
// their own positions) whose positions include every one of [first, end).
double held_share(const KVCache& cache, SeqId s, int first, int end) {
  const KVLayout& l = cache.layout();
  const int heads = l.per_head() ? l.n_kv_head : 1;
  int holders = 0, holding = 0;
  for (int layer = 0; layer < l.n_layer; ++layer) {
    for (int h = 0; h < heads; ++h) {
      const std::vector<int> held = l.per_head() ? cache.positions(s, layer, h) : cache.positions(s, layer);
      bool all = true;
      for (int p = first; p < end && all; ++p) all = std::binary_search(held.begin(), held.end(), p);
      ++holders;
      holding += all;
    }
  }
  return holders ? static_cast<double>(holding) / holders : 0.0;
}

}  // namespace

NeedleProbe make_needle_probe(const Tokenizer& tok, const NeedleText& t, double depth, int max_prompt) {
  if (!(depth >= 0 && depth <= 1)) throw Error("needle depth " + std::to_string(depth) + " (expected 0..1)");
  const std::vector<int> needle = tok.encode(t.needle), question = tok.encode(t.question);
  NeedleProbe p;
  // The answer is the needle's tokens that spell it: its last occurrence in
  // the needle's text, which must start and end on token boundaries.
  const size_t at = t.answer.empty() ? std::string::npos : t.needle.rfind(t.answer);
  size_t bytes = 0, first = std::string::npos;
  for (size_t i = 0; i < needle.size() && at != std::string::npos; ++i) {
    if (bytes == at) first = i;
    bytes += tok.token_bytes(needle[i]).size();
    if (first != std::string::npos && bytes == at + t.answer.size()) {
      p.answer.assign(needle.begin() + static_cast<std::ptrdiff_t>(first),
                      needle.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      break;
    }
  }
  if (p.answer.empty())
    throw Error("the answer \"" + t.answer + "\" is not whole tokens of the needle \"" + t.needle +
                "\" (expected text the needle ends a run of its tokens with)");
  int room = max_prompt - static_cast<int>(needle.size() + question.size());
  if (room < 0)
    throw Error("the needle and the question take " + std::to_string(needle.size() + question.size()) +
                " tokens, more than the " + std::to_string(max_prompt) + " a prompt may hold");
  std::vector<std::vector<int>> hay;  // the sentences that fit
  for (const std::string& s : t.haystack) {
    std::vector<int> ids = tok.encode(s);
    if (static_cast<int>(ids.size()) > room) break;
    room -= static_cast<int>(ids.size());
    hay.push_back(std::move(ids));
  }
  size_t hay_tokens = 0;
  for (const auto& s : hay) hay_tokens += s.size();
  // The sentence boundary whose share of the haystack's tokens is nearest depth.
  size_t cut = 0, before = 0, acc = 0;
  double best = 2;
  for (size_t i = 0; i <= hay.size(); ++i) {
    const double share = hay_tokens ? static_cast<double>(acc) / static_cast<double>(hay_tokens) : 0.0;
    if (std::abs(share - depth) < best) best = std::abs(share - depth), cut = i, before = acc;
    if (i < hay.size()) acc += hay[i].size();
  }
  for (size_t i = 0; i < cut; ++i) append(p.prompt, hay[i]);
  p.needle_first = static_cast<int>(p.prompt.size());
  append(p.prompt, needle);
  p.needle_end = static_cast<int>(p.prompt.size());
  p.answer_first = static_cast<int>(first);
  for (size_t i = cut; i < hay.size(); ++i) append(p.prompt, hay[i]);
  append(p.prompt, question);
  p.depth = hay_tokens ? static_cast<double>(before) / static_cast<double>(hay_tokens) : 0.0;
  return p;
}

NeedleOutcome run_needle(Engine& engine, KVCache& cache, const NeedleProbe& p) {
  cache.clear();
  const SeqId s = cache.add_sequence();
  ForwardTaps taps;
  taps.attention = false;
  taps.kv = false;
  std::vector<BatchEntry> batch;
  const int n = static_cast<int>(p.prompt.size());
  for (int i = 0; i < n; ++i) batch.push_back(BatchEntry{s, i, p.prompt[static_cast<size_t>(i)], i + 1 == n, false});
  std::vector<float> logits = engine.forward(batch, cache, taps).logits;
  NeedleOutcome o;
  o.kv_bytes = cache.bytes();
  const int a0 = p.needle_first + p.answer_first;
  const int na = static_cast<int>(p.answer.size());
  for (int q = a0; q < a0 + na; ++q) o.answer_held += held_share(cache, s, q, q + 1) / na;
  for (int q = p.needle_first; q < p.needle_end; ++q)
    o.needle_held += held_share(cache, s, q, q + 1) / (p.needle_end - p.needle_first);
  for (size_t i = 0; i < p.answer.size(); ++i) {
    // Softmax in double: the answer's probability and the most likely token.
    const float top = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float v : logits) z += std::exp(static_cast<double>(v) - top);
    const int want = p.answer[i];
    o.answer_prob.push_back(std::exp(static_cast<double>(logits[static_cast<size_t>(want)]) - top) / z);
    o.predicted.push_back(static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (i + 1 < p.answer.size())
      logits = engine.forward({BatchEntry{s, n + static_cast<int>(i), want, true, false}}, cache, taps).logits;
  }
  o.correct = o.predicted == p.answer;
  cache.clear();
  return o;
}

}  // namespace kvscope
