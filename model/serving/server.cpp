#include "model/serving/server.h"

#include <algorithm>
#include <map>

#include "model/core/error.h"

namespace kvscope {

int blocks_needed(int n_prompt, int max_new, int n_ctx, int block) {
  const int positions = std::min(n_prompt + max_new - 1, n_ctx);
  return kv_pages(positions, block);
}

namespace {

// Serving recomputes a preempted request from position 0 and builds a prefix
// hit's sequence on shared blocks: both need every position kept, which a
// model's own sliding window evicts. Refused before any cache is built.
KVLayout serve_layout(const Model& m, const KVLayout& kv) {
  const Config& c = m.config;
  if (c.sliding_window > 0)
    throw UsageError("serve: the model " + m.dir +
                     " has its own sliding window (config.json sliding_window = " + std::to_string(c.sliding_window) +
                     "); serving recomputes preempted requests from position 0 and shares prefix blocks across "
                     "requests, which a window evicts (use generate for this model)");
  if (kv.windowed() || kv.evicting())  // (the CLI offers neither; a caller's layout could)
    throw UsageError(
        "serve: the cache keeps every position, for the same reasons: no window or eviction by score "
        "(got " +
        kv.describe() + ")");
  return kv.on_model(c);
}

}  // namespace

Server::Server(std::shared_ptr<const Model> model, std::vector<ServeRequest> reqs, const ServeOptions& opt)
    : model_(std::move(model)),
      opt_(opt),
      engine_(*model_),
      cache_(serve_layout(*model_, opt.kv)),
      sched_(opt.sched, opt.kv.block),
      phys_(static_cast<size_t>(opt.sched.pool_blocks), -1),
      retained_(static_cast<size_t>(opt.sched.pool_blocks), false),
      attention_left_(opt.attention_budget) {
  for (ServeRequest& r : reqs) add(std::move(r));
  t0_ = std::chrono::steady_clock::now();
}

int Server::add(ServeRequest r) {
  const Config& c = model_->config;
  const int n = static_cast<int>(r.prompt.size());
  if (n < 1 || n > c.n_positions)
    throw Error("request " + r.id + ": prompt of " + std::to_string(n) + " tokens (expected 1.." +
                std::to_string(c.n_positions) + ", the context)");
  for (int t : r.prompt)
    if (t < 0 || t >= c.vocab_size)
      throw Error("request " + r.id + ": token " + std::to_string(t) + " outside the vocabulary");
  if (r.max_new < 1) throw Error("request " + r.id + ": max_new must be at least 1");
  const int need = blocks_needed(n, r.max_new, c.n_positions, opt_.kv.block);
  if (need > opt_.sched.pool_blocks)
    throw Error("request " + r.id + " needs " + std::to_string(need) + " blocks of " + std::to_string(opt_.kv.block) +
                " positions at its longest, more than the pool's " + std::to_string(opt_.sched.pool_blocks));
  // A request that comes while serving is under way arrives no earlier than the next step.
  r.arrive = std::max(r.arrive, step_);
  sched_.add(SchedRequest{r.prompt, r.arrive});
  samplers_.emplace_back(r.sampler);
  reqs_.push_back(std::move(r));
  results_.emplace_back();
  seq_.push_back(-1);
  return static_cast<int>(reqs_.size()) - 1;
}

double Server::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

// The cache keeps the rows of every block the scheduler's prefix cache keys,
// and lets go of those whose key was evicted.
void Server::sync_retained() {
  const BlockPool& pool = sched_.pool();
  for (int b = 0; b < pool.n_blocks(); ++b) {
    const size_t i = static_cast<size_t>(b);
    const bool want = pool.cached(b);
    if (want == retained_[i]) continue;
    if (want && phys_[i] < 0) throw Error("serving: cached pool block " + std::to_string(b) + " was never written");
    if (want) {
      cache_.retain_block(phys_[i]);
    } else {
      cache_.release_block(phys_[i]);
    }
    retained_[i] = want;
  }
}

// After a forward: which cache block holds each of the request's pool blocks.
void Server::map_blocks(int req) {
  const std::vector<int> table = cache_.block_table(seq_[static_cast<size_t>(req)]);
  const std::vector<int>& logical = sched_.blocks(req);
  if (table.size() != logical.size())
    throw Error("serving: request " + reqs_[static_cast<size_t>(req)].id + " holds " + std::to_string(table.size()) +
                " cache blocks for " + std::to_string(logical.size()) + " pool blocks");
  for (size_t j = 0; j < table.size(); ++j) phys_[static_cast<size_t>(logical[j])] = table[j];
}

// Preempted requests lose their sequence; admitted ones get one, on the
// cached blocks of their prefix hits.
void Server::open_sequences(const Plan& p) {
  for (int r : p.preempted) {
    cache_.release(seq_[static_cast<size_t>(r)]);
    seq_[static_cast<size_t>(r)] = -1;
  }
  for (int r : p.admitted) {
    const int hits = sched_.computed(r) / opt_.kv.block;
    std::vector<int> blocks;
    for (int j = 0; j < hits; ++j)
      blocks.push_back(phys_[static_cast<size_t>(sched_.blocks(r)[static_cast<size_t>(j)])]);
    seq_[static_cast<size_t>(r)] = hits > 0 ? cache_.add_sequence_on(blocks) : cache_.add_sequence();
  }
}

// generate's stop rules (Generator::update_stop), without stop strings.
StopReason Server::stop_reason(int req, int token) const {
  const Config& c = model_->config;
  if (c.is_eos(token)) return StopReason::kEos;
  const ServeRequest& r = reqs_[static_cast<size_t>(req)];
  const int seq_len = static_cast<int>(sched_.tokens(req).size());  // the token lands at this position
  if (seq_len + 1 - static_cast<int>(r.prompt.size()) >= r.max_new) return StopReason::kMaxNew;
  if (seq_len >= c.n_positions) return StopReason::kContextFull;
  return StopReason::kNone;
}

std::vector<Sampled> Server::sample(const Plan& p, const ForwardOutput& out, ServeStep& rec) {
  std::vector<Sampled> sampled;
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
  size_t row = 0;
  for (size_t i = 0; i < p.chunks.size(); ++i) {
    const Chunk& c = p.chunks[i];
    if (!c.samples) continue;
    const auto first = out.logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
    const std::vector<float> logits(first, first + static_cast<std::ptrdiff_t>(vocab));
    ++row;
    const SampleResult drawn = samplers_[static_cast<size_t>(c.req)].sample(logits, sched_.tokens(c.req), 1);
    const int token = drawn.token;
    const StopReason why = stop_reason(c.req, token);
    ServeResult& res = results_[static_cast<size_t>(c.req)];
    res.tokens.push_back(token);
    if (res.first_token_step < 0) res.first_token_step = p.step;
    if (why != StopReason::kNone) {
      res.reason = why;
      res.finish_step = p.step;
      rec.finished.push_back(c.req);
    }
    rec.entries[i].token = token;
    rec.entries[i].prob = drawn.prob;
    sampled.push_back(Sampled{c.req, token, why != StopReason::kNone});
  }
  return sampled;
}

// Each entry's newest query row, cut to the request's own keys [0, first +
// n) (the batch's rows are as wide as its longest sequence, zero past a
// request's own keys), while the budget lasts: a step keeps all its rows or none.
void Server::keep_attention(const ForwardOutput& out, ServeStep& rec) {
  const Config& c = model_->config;
  const size_t LH = static_cast<size_t>(c.n_layer) * c.n_head;
  int64_t bytes = 0;
  for (const ServeEntry& e : rec.entries) bytes += static_cast<int64_t>(LH * (e.first + e.n) * sizeof(float));
  if (out.n_rows != static_cast<int>(rec.entries.size()) || bytes > attention_left_) {
    attention_left_ = 0;  // spent: later steps tap nothing
    return;
  }
  attention_left_ -= bytes;
  const size_t width = static_cast<size_t>(out.width), rows = static_cast<size_t>(out.n_rows);
  for (size_t i = 0; i < rec.entries.size(); ++i) {
    ServeEntry& e = rec.entries[i];
    const size_t keys = static_cast<size_t>(e.first + e.n);
    e.attn.resize(LH * keys);
    for (size_t lh = 0; lh < LH; ++lh) {
      const float* src = &out.attn[(lh * rows + i) * width];
      std::copy(src, src + keys, &e.attn[lh * keys]);
    }
  }
}

SlotCounts Server::slot_counts() const {
  SlotCounts s;
  const int B = opt_.kv.block;
  std::map<int, int> live;  // pool block -> positions it holds (shared blocks once)
  for (int r : sched_.running()) {
    const std::vector<int>& blocks = sched_.blocks(r);
    for (size_t j = 0; j < blocks.size(); ++j) {
      const int n = std::min(B, sched_.computed(r) - static_cast<int>(j) * B);
      int& l = live[blocks[j]];
      l = std::max(l, n);
    }
  }
  for (const auto& kv : live) s.live += kv.second;
  s.paged = static_cast<int64_t>(live.size()) * B;
  s.contiguous = static_cast<int64_t>(sched_.running().size()) * model_->config.n_positions;
  return s;
}

std::string Server::text(int req) const {
  const ServeResult& res = results_.at(static_cast<size_t>(req));
  return generated_text(*model_, res.tokens, 0, res.reason == StopReason::kEos);
}

void ServeTotals::add(const ServeStep& s) {
  ++steps;
  preemptions += static_cast<int>(s.preempted.size());
  prefix_hit_blocks += s.prefix_hit_blocks;
  for (const ServeEntry& e : s.entries) {
    positions += e.n;
    (e.prefill ? prefill_positions : decode_positions) += e.n;
    generated += e.token >= 0 ? 1 : 0;
  }
  blocks_used_sum += s.blocks_used;
  blocks_used_peak = std::max(blocks_used_peak, s.blocks_used);
  slots_sum.live += s.slots.live;
  slots_sum.paged += s.slots.paged;
  slots_sum.contiguous += s.slots.contiguous;
  flops += s.flops;
  last_end_ms = s.end_ms;
}

std::shared_ptr<const ServeStep> Server::step() {
  if (sched_.all_done()) return nullptr;
  if (sched_.running().empty() && sched_.waiting().empty()) step_ = std::max(step_, sched_.next_arrival());
  const double t_start = elapsed_ms();
  const Plan p = sched_.schedule(step_);
  for (size_t i = 0; i < reqs_.size(); ++i)
    if (results_[i].arrive_ms < 0 && sched_.state(static_cast<int>(i)) != ReqState::kPending)
      results_[i].arrive_ms = t_start;
  auto rec = std::make_shared<ServeStep>();
  rec->step = step_++;
  sync_retained();
  open_sequences(p);
  std::vector<BatchEntry> batch;
  const bool tap = attention_left_ > 0;  // each chunk's last position: one attention row per entry, in order
  for (const Chunk& c : p.chunks) {
    const std::vector<int>& toks = sched_.tokens(c.req);
    for (int pos = c.first; pos < c.first + c.n; ++pos)
      batch.push_back(BatchEntry{seq_[static_cast<size_t>(c.req)], pos, toks[static_cast<size_t>(pos)],
                                 c.samples && pos == c.first + c.n - 1, tap && pos == c.first + c.n - 1});
    ServeEntry e;
    e.req = c.req;
    e.prefill = c.prefill();
    e.first = c.first;
    e.n = c.n;
    rec->entries.push_back(std::move(e));
    rec->positions += c.n;
  }
  rec->running = sched_.running();
  rec->waiting = sched_.waiting();
  rec->admitted = p.admitted;
  rec->preempted = p.preempted;
  rec->prefix_hit_blocks = p.prefix_hit_blocks;
  ForwardTaps taps;
  taps.attention = tap;
  taps.kv = taps.query = false;
  ForwardOutput out;
  if (!batch.empty()) out = engine_.forward(batch, cache_, taps);
  if (tap) keep_attention(out, *rec);
  for (const Chunk& c : p.chunks) map_blocks(c.req);
  const std::vector<Sampled> sampled = sample(p, out, *rec);
  sched_.complete(p, sampled);
  sync_retained();  // before a finished request's sequence lets its cached blocks go
  const double t_end = elapsed_ms();
  for (int r : rec->finished) {
    cache_.release(seq_[static_cast<size_t>(r)]);
    seq_[static_cast<size_t>(r)] = -1;
    results_[static_cast<size_t>(r)].finish_ms = t_end;
  }
  for (const Sampled& s : sampled)
    if (results_[static_cast<size_t>(s.req)].first_token_ms < 0)
      results_[static_cast<size_t>(s.req)].first_token_ms = t_end;
  for (int r : p.preempted) results_[static_cast<size_t>(r)].preemptions = sched_.preemptions(r);
  const BlockPool& pool = sched_.pool();
  rec->blocks_used = pool.used_count();
  rec->blocks_free = pool.free_count();
  rec->blocks_cached = pool.cached_free_count();
  rec->running_after = sched_.running();
  for (int r : rec->running_after) rec->tables.push_back(sched_.blocks(r));
  for (int b = 0; b < pool.n_blocks(); ++b) rec->block_cached.push_back(pool.cached(b) && pool.refs(b) == 0 ? 1 : 0);
  rec->slots = slot_counts();
  rec->flops = out.flops;
  rec->ms = t_end - t_start;
  rec->end_ms = t_end;
  return rec;
}

}  // namespace kvscope
