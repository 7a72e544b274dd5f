#include "model/decoding/kv_eval.h"

#include <algorithm>
#include <cmath>

#include "model/decoding/sampler.h"

namespace kvscope {

namespace {

// Logits of every position of `tokens`, (n, vocab), and the cache's bytes after.
std::vector<float> all_logits(Engine& engine, KVCache& cache, const std::vector<int>& tokens, uint64_t* bytes) {
  cache.clear();
  const SeqId s = cache.add_sequence();
  std::vector<BatchEntry> batch;
  batch.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.push_back(BatchEntry{s, static_cast<int>(i), tokens[i], true, false});
  ForwardTaps taps;
  taps.attention = false;
  taps.kv = false;
  std::vector<float> logits;
  if (cache.layout().evicting()) {
    // Eviction by score acts after each forward: one position per forward,
    // as generation runs, so every prediction is made from what survived.
    // SnapKV compresses a prompt once, after its prefill: the text's first
    // half is the prompt (one forward, its predictions the dense ones), the
    // rest decodes one position per forward.
    size_t first = 0;
    if (cache.layout().per_head()) {
      first = std::max<size_t>(1, batch.size() / 2);
      logits = engine
                   .forward(std::vector<BatchEntry>(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(first)),
                            cache, taps)
                   .logits;
    }
    for (const BatchEntry& e :
         std::vector<BatchEntry>(batch.begin() + static_cast<std::ptrdiff_t>(first), batch.end())) {
      const std::vector<float> row = engine.forward({e}, cache, taps).logits;
      logits.insert(logits.end(), row.begin(), row.end());
    }
  } else {
    logits = engine.forward(batch, cache, taps).logits;
  }
  if (bytes) *bytes = cache.bytes();
  cache.clear();
  return logits;
}

}  // namespace

LayoutScores score_layout(Engine& engine, KVCache& cache, KVCache* dense, const std::vector<int>& tokens) {
  LayoutScores s;
  if (tokens.size() < 2) return s;
  const std::vector<float> lv_all = all_logits(engine, cache, tokens, &s.kv_bytes);
  const size_t n = tokens.size() - 1, V = lv_all.size() / tokens.size();
  std::vector<float> ld_all;
  if (dense) ld_all = all_logits(engine, *dense, tokens, nullptr);
  std::vector<double> lv, ld;
  for (size_t i = 0; i < n; ++i) {
    const float* row = &lv_all[i * V];
    lv = log_softmax(row, V);
    const size_t next = static_cast<size_t>(tokens[i + 1]);
    s.nll.push_back(-lv[next]);
    if (!dense) continue;
    const float* drow = &ld_all[i * V];
    ld = log_softmax(drow, V);
    double kl = 0, dl = 0;
    size_t top_v = 0, top_d = 0;
    for (size_t v = 0; v < V; ++v) {
      kl += std::exp(ld[v]) * (ld[v] - lv[v]);
      dl = std::max(dl, static_cast<double>(std::fabs(row[v] - drow[v])));
      if (row[v] > row[top_v]) top_v = v;
      if (drow[v] > drow[top_d]) top_d = v;
    }
    s.nll_dense.push_back(-ld[next]);
    s.kl.push_back(kl);
    s.max_dlogit.push_back(dl);
    s.top1_agree.push_back(top_v == top_d ? 1 : 0);
  }
  return s;
}

}  // namespace kvscope
