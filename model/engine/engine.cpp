#include "model/engine/engine.h"

#include "model/engine/engine_detail.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <variant>

#include "model/core/error.h"
#include "model/core/thread_pool.h"
#include "model/engine/kernels.h"

namespace kvscope {

uint64_t forward_flops(const Config& c, int n_new, int seq_len) {
  const uint64_t d = static_cast<uint64_t>(c.n_embd);
  const uint64_t n = static_cast<uint64_t>(n_new);
  // New position i (0-based among the new ones) sits at seq_len - n + i and
  // attends to itself and everything before: L_i = seq_len - n + i + 1, or
  // at most W positions under the model's sliding window.
  const uint64_t first = static_cast<uint64_t>(seq_len) - n;
  uint64_t sum_l = n * first + n * (n + 1) / 2;
  if (c.sliding_window > 0) {
    sum_l = 0;
    for (uint64_t i = 0; i < n; ++i)
      sum_l += std::min<uint64_t>(first + i + 1, static_cast<uint64_t>(c.sliding_window));
  }
  // Q and O are (H hd) x d, K and V (Hkv hd) x d; the MLP's matrices ff x d
  // each (GPT-2: q = kv = d, ff = 4d, two of them: 24 n d^2).
  const uint64_t hd = static_cast<uint64_t>(c.head_dim()), q = static_cast<uint64_t>(c.n_head) * hd;
  // (n_inner 0, a config built by hand, is GPT-2's 4d.)
  const uint64_t kv = static_cast<uint64_t>(c.kv_heads()) * hd;
  const uint64_t ff = static_cast<uint64_t>(c.n_inner > 0 ? c.n_inner : 4 * c.n_embd);
  const uint64_t mlp = static_cast<uint64_t>(c.mlp_matrices);
  const uint64_t per_layer = 2 * n * d * (2 * q + 2 * kv) + 2 * mlp * n * d * ff + 4 * q * sum_l;
  return static_cast<uint64_t>(c.n_layer) * per_layer + 2 * d * static_cast<uint64_t>(c.vocab_size);
}

uint64_t forward_read_bytes(const Model& m, uint64_t cache_read_bytes) {
  // Every layer matrix and the head once, as the products read them (the f32
  // copy where one is kept: WeightMatrix::product_bytes; a tied head is the
  // embedding, read once), one embedding row as stored, the f32 vectors.
  auto matrices = [](const std::vector<const WeightMatrix*>& ms, const WeightMatrix& head) {
    uint64_t bytes = head.product_bytes();
    for (const WeightMatrix* x : ms) bytes += x->product_bytes();
    return bytes;
  };
  return std::visit(
      [&](const auto& w) {
        return matrices(w.layer_matrices(), w.head()) + w.lookup_bytes() + w.vector_bytes() + cache_read_bytes;
      },
      m.weights);
}

int engine_threads() {
  return ThreadPool::default_threads();
}

Engine::Engine(const Model& model) : model_(model), ws_(new Workspace) {}
Engine::~Engine() {
  delete ws_;
}

namespace {

// Checks a batch against the model and the cache before anything is written.
void check_batch(const Config& c, const std::vector<BatchEntry>& batch, const KVCache& cache) {
  const KVLayout& lay = cache.layout();
  if (!cache.ready()) throw Error("forward: the KV cache has no layout");
  if (lay.n_layer != c.n_layer || lay.n_kv_head != c.kv_heads() || lay.head_dim != c.head_dim() ||
      lay.n_ctx != c.n_positions) {
    throw Error("forward: the KV cache's layout (" + std::to_string(lay.n_layer) + " layers, " +
                std::to_string(lay.n_kv_head) + " x " + std::to_string(lay.head_dim) + " K/V, context " +
                std::to_string(lay.n_ctx) + ") does not fit the model (" + std::to_string(c.n_layer) + " layers, " +
                std::to_string(c.kv_heads()) + " x " + std::to_string(c.head_dim()) + " K/V, context " +
                std::to_string(c.n_positions) + ")");
  }
  if (c.sliding_window > 0 && (lay.window == 0 || lay.window > c.sliding_window)) {
    throw Error("forward: " + c.model_type + " attends to at most " + std::to_string(c.sliding_window) +
                " positions (sliding_window); the cache's window must be at most that, got " +
                (lay.window ? std::to_string(lay.window) : std::string("none")));
  }
  if (batch.empty()) throw Error("forward: empty batch (expected at least one new position)");
  std::map<SeqId, int> next;
  for (const BatchEntry& e : batch) {
    if (e.token < 0 || e.token >= c.vocab_size) {
      throw Error("forward: token id " + std::to_string(e.token) + " at position " + std::to_string(e.pos) +
                  " is outside the vocabulary (0.." + std::to_string(c.vocab_size - 1) + ")");
    }
    if (e.pos < 0 || e.pos >= c.n_positions) {
      throw Error("forward: position " + std::to_string(e.pos) + " exceeds the context of " +
                  std::to_string(c.n_positions));
    }
    auto it = next.find(e.seq);
    if (it == next.end()) it = next.emplace(e.seq, cache.length(e.seq)).first;
    if (e.pos != it->second) {
      throw Error("forward: sequence " + std::to_string(e.seq) + " continues at position " +
                  std::to_string(it->second) + ", got an entry at " + std::to_string(e.pos));
    }
    ++it->second;
  }
}

}  // namespace

namespace detail {

BatchPlan plan_batch(const Config& c, const std::vector<BatchEntry>& batch, KVCache& cache, const ForwardTaps& taps,
                     ForwardOutput& out) {
  const KVLayout& lay = cache.layout();
  const int n = static_cast<int>(batch.size());
  const int qd = c.n_head * c.head_dim(), kvd = lay.kv_dim();
  BatchPlan plan;
  plan.tap_row.assign(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const BatchEntry& e = batch[static_cast<size_t>(i)];
    out.width = std::max(out.width, e.pos + 1);
    if (e.tap) {
      plan.tap_row[static_cast<size_t>(i)] = static_cast<int>(out.tap_entries.size());
      out.tap_entries.push_back(i);
    }
    if (e.logits) out.logit_entries.push_back(i);
  }
  out.n_rows = static_cast<int>(out.tap_entries.size());
  if (taps.attention) out.attn.assign(static_cast<size_t>(c.n_layer) * c.n_head * out.n_rows * out.width, 0.0f);
  if (taps.query) out.q.resize(static_cast<size_t>(c.n_layer) * out.n_rows * qd);
  if (taps.kv) {
    out.k.resize(static_cast<size_t>(c.n_layer) * n * kvd);
    out.v.resize(out.k.size());
  }
  // Room for every new row (blocks allocated, shared ones copied), then what
  // each query reads: runs of the cache, the same for every layer.
  plan.slots.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const BatchEntry& e = batch[static_cast<size_t>(i)];
    plan.seq.push_back(e.seq);
    plan.pos.push_back(e.pos);
    plan.slots[static_cast<size_t>(i)] = cache.append(e.seq, e.pos);
  }
  plan_runs(cache, plan, 0);
  return plan;
}

void plan_runs(const KVCache& cache, BatchPlan& plan, int l, int kv_head) {
  const size_t n = plan.seq.size();
  plan.runs.resize(n);
  plan.n_keys.assign(n, 0);
  plan.run_off.assign(n + 1, 0);
  plan.key_off.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<KVRun>& runs = plan.runs[i];
    if (kv_head >= 0) {
      cache.visible(plan.seq[i], l, kv_head, plan.pos[i], runs);
    } else {
      cache.visible(plan.seq[i], l, plan.pos[i], runs);
    }
    for (const KVRun& r : runs) plan.n_keys[i] += r.n;
    plan.run_off[i + 1] = plan.run_off[i] + runs.size();
    plan.key_off[i + 1] = plan.key_off[i] + static_cast<size_t>(plan.n_keys[i]);
  }
  plan.rows.resize(plan.run_off.back());
}

namespace {

// Stores layer l's new K/V rows (quantized once, here) and taps them and the
// tapped entries' queries as computed.
void store_rows(const Config& c, KVCache& cache, const BatchPlan& plan, int l, const RowsQKV& rows,
                const ForwardTaps& taps, ForwardOutput& out) {
  const int n = static_cast<int>(plan.slots.size());
  const int kvd = cache.layout().kv_dim(), qd = c.n_head * c.head_dim();
  for (int i = 0; i < n; ++i) {
    const float* k = rows.k + static_cast<size_t>(i) * rows.kv_stride;
    const float* v = rows.v + static_cast<size_t>(i) * rows.kv_stride;
    // Evicting by score, each layer keeps its own rows in its own slots.
    const KVSlot at = cache.layout().evicting()
                          ? cache.slot_of(plan.seq[static_cast<size_t>(i)], l, plan.pos[static_cast<size_t>(i)])
                          : plan.slots[static_cast<size_t>(i)];
    cache.write(l, at, k, v);
    if (taps.kv) {
      const size_t o = (static_cast<size_t>(l) * n + i) * kvd;
      std::copy(k, k + kvd, out.k.begin() + static_cast<std::ptrdiff_t>(o));
      std::copy(v, v + kvd, out.v.begin() + static_cast<std::ptrdiff_t>(o));
    }
    if (taps.query && plan.tap_row[static_cast<size_t>(i)] >= 0) {
      const float* q = rows.q + static_cast<size_t>(i) * rows.q_stride;
      const size_t o = (static_cast<size_t>(l) * out.n_rows + plan.tap_row[static_cast<size_t>(i)]) * qd;
      std::copy(q, q + qd, out.q.begin() + static_cast<std::ptrdiff_t>(o));
    }
  }
}

// Layer l's K/V rows of every entry's runs: one pointer per run, not per key.
void layer_rows(const KVCache& cache, BatchPlan& plan, int l) {
  const size_t rb = cache.layout().row_bytes();
  KVRowRun* dst = plan.rows.data();
  for (const std::vector<KVRun>& runs : plan.runs) {
    for (const KVRun& r : runs) {
      const size_t at = static_cast<size_t>(r.slot) * rb;
      *dst++ = KVRowRun{cache.k_rows(r.block, l) + at, cache.v_rows(r.block, l) + at, r.n};
    }
  }
}

// Copies entry i's weights p (in key order) to their positions in the
// attention tap of layer l, head h.
void tap_weights(const BatchPlan& plan, int l, int H, int h, int i, const float* p, ForwardOutput& out) {
  const int row = plan.tap_row[static_cast<size_t>(i)];
  float* dst = &out.attn[((static_cast<size_t>(l) * H + h) * out.n_rows + row) * out.width];
  for (const KVRun& r : plan.runs[static_cast<size_t>(i)])
    for (int j = 0; j < r.n; ++j) dst[r.first_pos + j] = *p++;
}

// Eviction by score: each entry's weights averaged over the H query heads,
// handed to the cache in entry order (TOVA keeps its sequence's last query's).
void observe_weights(KVCache& cache, const BatchPlan& plan, int l, int H) {
  const size_t total = plan.key_off.back();
  std::vector<double> avg;
  for (size_t i = 0; i + 1 < plan.key_off.size(); ++i) {
    const size_t k0 = plan.key_off[i], nk = plan.key_off[i + 1] - k0;
    avg.assign(nk, 0.0);
    for (int h = 0; h < H; ++h) {
      const float* w = plan.weights.data() + static_cast<size_t>(h) * total + k0;
      for (size_t k = 0; k < nk; ++k) avg[k] += w[k];
    }
    for (double& a : avg) a /= H;
    cache.observe(plan.seq[i], l, static_cast<int>(nk), avg.data());
  }
}

// SnapKV, in a sequence's prefill (every head holds the same positions):
// each entry's weights per query head, handed to the cache in entry order.
void observe_head_weights(KVCache& cache, const BatchPlan& plan, const BatchPlan& head0, size_t stride, int l, int H) {
  std::vector<double> w;
  for (size_t i = 0; i < plan.seq.size(); ++i) {
    if (!cache.snap_pending(plan.seq[i])) continue;
    const size_t k0 = head0.key_off[i], nk = head0.key_off[i + 1] - k0;
    w.resize(static_cast<size_t>(H) * nk);
    for (int h = 0; h < H; ++h)
      std::copy_n(plan.weights.data() + static_cast<size_t>(h) * stride + k0, nk,
                  w.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(h) * nk));
    cache.observe_heads(plan.seq[i], l, plan.pos[i], static_cast<int>(nk), H, w.data());
  }
}

// Per K/V head layouts (SnapKV): what each K/V head of layer l reads, its own
// held positions, one plan per head; empty for the others.
std::vector<BatchPlan> head_plans(const KVCache& cache, const BatchPlan& plan, int l) {
  std::vector<BatchPlan> heads;
  if (!cache.layout().per_head()) return heads;
  heads.resize(static_cast<size_t>(cache.layout().n_kv_head));
  for (size_t g = 0; g < heads.size(); ++g) {
    heads[g].seq = plan.seq;
    heads[g].pos = plan.pos;
    heads[g].tap_row = plan.tap_row;
    plan_runs(cache, heads[g], l, static_cast<int>(g));
    layer_rows(cache, heads[g], l);
  }
  return heads;
}

}  // namespace

void store_and_attend(const Config& c, Workspace& ws, KVCache& cache, BatchPlan& plan, int l, const RowsQKV& rows,
                      const ForwardTaps& taps, ForwardOutput& out, uint64_t& flops) {
  const KVLayout& lay = cache.layout();
  const int n = static_cast<int>(plan.slots.size());
  const int H = c.n_head, hd = c.head_dim(), qd = H * hd;
  const int group = H / lay.n_kv_head;  // query heads per K/V head
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  store_rows(c, cache, plan, l, rows, taps, out);
  if (lay.evicting() && l > 0) plan_runs(cache, plan, l);
  layer_rows(cache, plan, l);
  // Per K/V head (SnapKV) each head reads its own positions, and the weights
  // are wanted only in a prefill, where every head holds the same.
  const std::vector<BatchPlan> heads = head_plans(cache, plan, l);
  const bool per_head = !heads.empty();
  bool scored = lay.evicting() && !per_head;
  for (size_t i = 0; per_head && i < plan.seq.size(); ++i) scored = scored || cache.snap_pending(plan.seq[i]);
  const BatchPlan& head0 = per_head ? heads[0] : plan;
  size_t stride = plan.key_off.back();  // (head, keys) weights: room for the head reading the most
  for (const BatchPlan& hp : heads) stride = std::max(stride, hp.key_off.back());
  int64_t keys = 0;  // summed over the query heads
  for (int len : plan.n_keys) keys += len;
  keys *= H;
  if (per_head) {
    keys = 0;
    for (const BatchPlan& hp : heads)
      for (int len : hp.n_keys) keys += static_cast<int64_t>(group) * len;
  }
  if (scored) plan.weights.resize(static_cast<size_t>(H) * stride);
  ws.att.resize(n, qd);
  // Heads are independent and equally costly: one share of heads per thread.
  ws.pool.parallel_for(
      H,
      [&](int64_t h0, int64_t h1) {
        std::vector<float> scratch;
        for (int64_t h = h0; h < h1; ++h) {
          const int kvh = static_cast<int>(h) / group;
          const BatchPlan& hp = per_head ? heads[static_cast<size_t>(kvh)] : plan;
          for (int i = 0; i < n; ++i) {
            const int len = hp.n_keys[static_cast<size_t>(i)];
            // Weights go to a 64-byte aligned buffer in every layout: the
            // softmax's vector reductions then add in the same order for all.
            scratch.resize(static_cast<size_t>(len) + 16);
            float* p = scratch.data();
            p += (16 - (reinterpret_cast<uintptr_t>(p) / sizeof(float)) % 16) % 16;
            const size_t r0 = hp.run_off[static_cast<size_t>(i)], r1 = hp.run_off[static_cast<size_t>(i) + 1];
            const KVRunsView view{lay.dtype, hp.rows.data() + r0, static_cast<int>(r1 - r0),
                                  static_cast<size_t>(lay.row_bytes()), kvh * hd};
            attend_runs(rows.q + static_cast<size_t>(i) * rows.q_stride + h * hd, view, hd, len, scale, p,
                        ws.att.data() + static_cast<size_t>(i) * qd + h * hd);
            if (taps.attention && plan.tap_row[static_cast<size_t>(i)] >= 0)
              tap_weights(hp, l, H, static_cast<int>(h), i, p, out);
            if (scored)
              std::copy(p, p + len,
                        plan.weights.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(h) * stride +
                                                                           hp.key_off[static_cast<size_t>(i)]));
          }
        }
      },
      2 * std::max<int64_t>(keys, static_cast<int64_t>(n) * H) * hd);
  if (scored && per_head) observe_head_weights(cache, plan, head0, stride, l, H);
  if (scored && !per_head) observe_weights(cache, plan, l, H);
  flops += 4ull * static_cast<uint64_t>(hd) * static_cast<uint64_t>(keys);
}

}  // namespace detail

namespace {

// Each sequence's forward is over: evicts what its later queries cannot see.
void commit_sequences(const std::vector<BatchEntry>& batch, KVCache& cache, ForwardOutput& out) {
  std::vector<SeqId> done;
  for (const BatchEntry& e : batch) {
    if (std::find(done.begin(), done.end(), e.seq) != done.end()) continue;
    done.push_back(e.seq);
    out.evicted += cache.commit(e.seq);
  }
}

// The rows of x whose logits were asked for: (logit_entries, d).
MatrixRM logit_rows(const MatrixRM& x, const std::vector<int>& entries) {
  MatrixRM sel(static_cast<Eigen::Index>(entries.size()), x.cols());
  for (size_t r = 0; r < entries.size(); ++r) sel.row(static_cast<Eigen::Index>(r)) = x.row(entries[r]);
  return sel;
}

}  // namespace

ForwardOutput Engine::forward(const std::vector<BatchEntry>& batch, KVCache& cache, const ForwardTaps& taps) {
  const Config& c = model_.config;
  check_batch(c, batch, cache);
  ForwardOutput out;
  detail::BatchPlan plan = detail::plan_batch(c, batch, cache, taps, out);
  Workspace& ws = *ws_;
  uint64_t flops = 0;
  // The one place the engine picks a family: its embedding, layers and head
  // (model/models/) around the shared loop, attention and products.
  std::visit(
      [&](const auto& w) {
        embed(w, batch, ws.x);
        detail::LayerPass pass{ws, cache, plan, batch, taps, out, flops};
        for (int l = 0; l < c.n_layer; ++l) run_layer(c, w, pass, l);
        commit_sequences(batch, cache, out);
        // The LM head only where asked (generation needs the last position).
        if (out.logit_entries.empty()) return;
        out.logits.resize(out.logit_entries.size() * static_cast<size_t>(w.head().rows));  // (logit_entries, vocab)
        head_logits(c, w, ws, logit_rows(ws.x, out.logit_entries), out.logits.data(), flops);
      },
      model_.weights);
  out.flops = flops;
  return out;
}

ForwardOutput Engine::forward(const std::vector<int>& tokens, int first, KVCache* cache, bool keep_all_rows,
                              bool all_logits, const KVLayout* layout) {
  const Config& c = model_.config;
  const int seq_len = static_cast<int>(tokens.size());
  const int n = seq_len - first;
  if (n <= 0)
    throw Error("forward: no new positions (first = " + std::to_string(first) + ", sequence of " +
                std::to_string(seq_len) + ")");
  if (seq_len > c.n_positions) {
    throw Error("forward: sequence of " + std::to_string(seq_len) + " tokens exceeds the context of " +
                std::to_string(c.n_positions));
  }
  KVCache* kc = cache;
  SeqId s = 0;
  if (!cache) {
    if (first != 0) throw Error("forward: without a cache the whole sequence must be computed (first must be 0)");
    const KVLayout lay = layout ? *layout : KVLayout::for_model(c);
    if (lay.evicting()) {
      throw Error(std::string("NO CACHE with --kv-evict ") + to_string(lay.evict) +
                  ": not supported (each layer's held positions are decided forward by forward; run on the cache)");
    }
    kc = &ws_->scratch;
    if (!kc->ready() || kc->layout() != lay) kc->reset(lay);
    kc->clear();
    s = kc->add_sequence();
  } else {
    if (!cache->ready()) cache->reset(KVLayout::for_model(c));
    if (!cache->has_sequence(0)) {
      if (!cache->sequences().empty()) throw Error("forward: the cache has no sequence 0");
      cache->add_sequence();
    }
    if (cache->length(0) != first) {
      throw Error("forward: the cache holds " + std::to_string(cache->length(0)) + " positions, expected " +
                  std::to_string(first));
    }
  }
  std::vector<BatchEntry> batch(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const bool last = first + i == seq_len - 1;
    batch[static_cast<size_t>(i)] =
        BatchEntry{s, first + i, tokens[static_cast<size_t>(first + i)], all_logits || last, keep_all_rows || last};
  }
  ForwardOutput out;
  try {
    ForwardTaps taps;
    taps.query = true;  // the Q.K.V inspector reads the query rows of the tapped positions
    out = forward(batch, *kc, taps);
  } catch (...) {
    if (!cache) kc->clear();
    throw;
  }
  if (!cache) kc->clear();  // NO CACHE keeps nothing between forwards
  out.first = first;
  out.n_new = n;
  out.seq_len = seq_len;
  return out;
}

}  // namespace kvscope
