// Hand-made step records for the scene and render tests: every number in
// them (attention rows, K norms, counters) is known without running the engine.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/decoding/generator.h"

namespace kvscope::scene_fixtures {

constexpr int kLayers = 3, kHeads = 2, kEmbd = 4;

// A record with deterministic pseudo-random attention rows that sum to 1 per
// (layer, head, row) and K rows whose norms are known: K row of position p,
// layer l = (p + 1 + l, 0, 0, 0) so |K| = p + 1 + l.
inline std::shared_ptr<StepRecord> make_record(int index, bool prefill, CacheMode mode, int first, int n_new,
                                               int seq_len, int recomputed, int n_prompt, int token,
                                               bool refill = false) {
  auto r = std::make_shared<StepRecord>();
  r->index = index;
  r->prefill = prefill;
  r->refill = refill;
  r->mode = mode;
  r->first = first;
  r->n_new = n_new;
  r->seq_len = seq_len;
  r->n_prompt = n_prompt;
  r->recomputed = recomputed;
  r->n_layer = kLayers;
  r->n_head = kHeads;
  r->n_embd = kEmbd;
  if (prefill) {
    for (int i = 0; i < seq_len; ++i) {
      r->prompt_tokens.push_back(100 + i);
      r->prompt_pieces.push_back(i == 0 ? "Once" : " w" + std::to_string(i));
    }
  }
  r->token = token;
  r->piece = " t" + std::to_string(token);
  r->raw_piece = r->piece;
  r->prob = 0.25f;
  r->n_rows = prefill ? seq_len : 1;
  r->attn.assign(static_cast<size_t>(kLayers) * kHeads * r->n_rows * seq_len, 0.0f);
  std::mt19937 rng(1234 + index);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int l = 0; l < kLayers; ++l)
    for (int h = 0; h < kHeads; ++h)
      for (int row = 0; row < r->n_rows; ++row) {
        const int q = seq_len - r->n_rows + row;  // query position: attends keys [0, q]
        std::vector<float> w(q + 1);
        float sum = 0;
        for (auto& x : w) sum += (x = u(rng) * u(rng));
        for (int k = 0; k <= q; ++k)
          r->attn[((static_cast<size_t>(l) * kHeads + h) * r->n_rows + row) * seq_len + k] = w[k] / sum;
      }
  r->n_kv = prefill ? seq_len : 1;
  r->k.assign(static_cast<size_t>(kLayers) * r->n_kv * kEmbd, 0.0f);
  r->v.assign(r->k.size(), 0.0f);
  for (int l = 0; l < kLayers; ++l)
    for (int i = 0; i < r->n_kv; ++i) {
      const int pos = seq_len - r->n_kv + i;
      r->k[(static_cast<size_t>(l) * r->n_kv + i) * kEmbd] = static_cast<float>(pos + 1 + l);
      r->v[(static_cast<size_t>(l) * r->n_kv + i) * kEmbd + 1] = 2.0f;
    }
  r->kv_bytes = mode == CacheMode::kKV ? 2ull * kLayers * seq_len * kEmbd * 4 : 0;
  return r;
}

// prompt of 5 tokens, then `modes.size()` decode steps in the given modes
// (KV after NO CACHE is a refill, as the generator does it).
inline std::vector<RecordPtr> make_history(int n_prompt, const std::vector<CacheMode>& modes) {
  std::vector<RecordPtr> h;
  h.push_back(make_record(0, true, CacheMode::kKV, 0, n_prompt, n_prompt, 0, n_prompt, 500));
  bool cache_valid = true;
  for (size_t i = 0; i < modes.size(); ++i) {
    const int T = n_prompt + static_cast<int>(i) + 1;  // sequence after this forward
    const int idx = static_cast<int>(i) + 1;
    if (modes[i] == CacheMode::kNoCache) {
      h.push_back(make_record(idx, false, CacheMode::kNoCache, 0, T, T, T - 1, n_prompt, 500 + idx));
      cache_valid = false;
    } else if (!cache_valid) {
      h.push_back(make_record(idx, false, CacheMode::kKV, 0, T, T, T - 1, n_prompt, 500 + idx, true));
      cache_valid = true;
    } else {
      h.push_back(make_record(idx, false, CacheMode::kKV, T - 1, 1, T, 0, n_prompt, 500 + idx));
    }
  }
  return h;
}

}  // namespace kvscope::scene_fixtures
