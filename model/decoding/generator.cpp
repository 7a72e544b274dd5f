#include "model/decoding/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "model/core/error.h"

namespace kvscope {

std::string generated_text(const Model& m, const std::vector<int>& tokens, int n_prompt, bool stopped_on_eos) {
  const size_t first = std::min(tokens.size(), static_cast<size_t>(std::max(0, n_prompt)));
  std::vector<int> gen(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
  if (stopped_on_eos && !gen.empty() && m.config.is_eos(gen.back())) gen.pop_back();
  return m.tokenizer.decode(gen);
}

namespace {

// The quantization error of the rows a forward wrote for positions
// [from, out.first + out.n_new), read back from `cache` where it still holds
// them: (layer, row, 4) = K max|d|, K rms d, V max|d|, V rms d; -1 where the
// row was already evicted. Empty for f32 rows (stored exactly).
std::vector<float> quant_errors(const KVCache& cache, SeqId seq, const ForwardOutput& out, int from) {
  const KVLayout& lay = cache.layout();
  if (lay.dtype == KVDtype::kF32) return {};
  const int d = lay.kv_dim(), n = out.first + out.n_new - from;
  std::vector<float> err(static_cast<size_t>(lay.n_layer) * n * 4, -1.0f), row(static_cast<size_t>(d));
  for (int l = 0; l < lay.n_layer; ++l) {
    for (int i = 0; i < n; ++i) {
      const KVSlot at = cache.slot_of(seq, l, from + i);
      if (at.block < 0) continue;
      const size_t src = (static_cast<size_t>(l) * out.n_new + (from + i - out.first)) * d;
      float* e = &err[(static_cast<size_t>(l) * n + i) * 4];
      for (int kv = 0; kv < 2; ++kv) {
        cache.read_row(l, at, kv == 1, row.data());
        const float* x = (kv == 0 ? out.k.data() : out.v.data()) + src;
        double mx = 0, ss = 0;
        for (int j = 0; j < d; ++j) {
          const double diff = static_cast<double>(row[j]) - x[j];
          mx = std::max(mx, std::fabs(diff));
          ss += diff * diff;
        }
        e[kv * 2] = static_cast<float>(mx);
        e[kv * 2 + 1] = static_cast<float>(std::sqrt(ss / d));
      }
    }
  }
  return err;
}

// NO CACHE would recompute every position in one forward, where every query
// sees every earlier position: under eviction by score the tokens would
// differ from the cached run's, so the combination is refused.
void refuse_no_cache(const KVLayout& lay) {
  if (!lay.evicting()) return;
  throw Error(std::string("NO CACHE (--no-cache) with --kv-evict ") + to_string(lay.evict) +
              ": not supported; eviction decides each layer's held positions forward by forward, on the cache");
}

}  // namespace

Generator::Generator(std::shared_ptr<const Model> model) : model_(std::move(model)), engine_(*model_) {}

void Generator::start(const std::string& prompt, const GenerateOptions& opt) {
  if (prompt.empty()) throw Error("prompt is empty (expected at least one character of text)");
  start_tokens(model_->tokenizer.encode_prompt(prompt), opt);
}

void Generator::start_tokens(const std::vector<int>& prompt, const GenerateOptions& opt) {
  begin(prompt, opt, 0);
}

int Generator::continue_tokens(const std::vector<int>& prompt, const GenerateOptions& opt) {
  int keep = 0;
  if (started_ && seq_ >= 0 && opt.mode == CacheMode::kKV && cache_.ready() &&
      cache_.layout() == opt.kv.on_model(model_->config)) {
    const int held = std::min(cache_.length(seq_), static_cast<int>(tokens_.size()));
    while (keep < held && keep + 1 < static_cast<int>(prompt.size()) &&
           tokens_[static_cast<size_t>(keep)] == prompt[static_cast<size_t>(keep)]) {
      ++keep;
    }
    if (keep > 0 && !cache_.can_truncate(seq_, keep)) keep = 0;
  }
  begin(prompt, opt, keep);
  return keep;
}

void Generator::begin(const std::vector<int>& prompt, const GenerateOptions& opt, int keep) {
  const Config& c = model_->config;
  if (prompt.empty()) throw Error("prompt is empty (expected at least one token)");
  if (static_cast<int>(prompt.size()) > c.n_positions) {
    throw Error("prompt is " + std::to_string(prompt.size()) + " tokens, longer than the context: " + model_->name +
                " has n_positions = " + std::to_string(c.n_positions) + ", expected at most that many prompt tokens");
  }
  for (int t : prompt) {
    if (t < 0 || t >= c.vocab_size) {
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                  std::to_string(c.vocab_size - 1) + ")");
    }
  }
  if (opt.max_new < 1) throw Error("max_new must be at least 1, got " + std::to_string(opt.max_new));
  const KVLayout layout = opt.kv.on_model(c);  // throws on a bad layout before anything changes
  if (opt.mode == CacheMode::kNoCache) refuse_no_cache(layout);
  sampler_.set_settings(opt.sampler);
  opt_ = opt;
  tokens_ = prompt;
  n_prompt_ = static_cast<int>(prompt.size());
  reason_ = StopReason::kNone;
  flops_total_ = 0;
  ms_total_ = 0;
  computed_upto_ = keep;
  stop_cut_ = std::string::npos;
  started_ = true;
  n_forwards_ = 0;
  fork_reused_cache_ = false;
  prefill_from_ = keep;
  if (keep > 0) {  // continue_tokens checked the layout and that the sequence can be cut here
    release_prefixes();
    cache_.truncate(seq_, keep);
    return;
  }
  if (!cache_.ready() || cache_.layout() != layout) {
    cache_.reset(layout);
  } else {
    cache_.clear();
  }
  seq_ = -1;
  prefixes_.clear();
}

ForwardOutput Generator::run_forward(KVCache& cache, SeqId seq, int first, bool keep_all) {
  const int seq_len = static_cast<int>(tokens_.size());
  std::vector<BatchEntry> batch;
  batch.reserve(static_cast<size_t>(seq_len - first));
  for (int p = first; p < seq_len; ++p) {
    const bool last = p == seq_len - 1;
    batch.push_back(BatchEntry{seq, p, tokens_[static_cast<size_t>(p)], last, keep_all || last});
  }
  ForwardTaps taps;
  taps.query = true;
  ForwardOutput out = engine_.forward(batch, cache, taps);
  out.first = first;
  out.n_new = seq_len - first;
  out.seq_len = seq_len;
  return out;
}

namespace {

// The forward's results a record keeps: shapes, taps, and the K/V rows of
// positions never computed before (recomputed ones equal what an earlier
// record already holds; `computed_upto` positions were computed before).
void take_forward(const Config& c, int computed_upto, ForwardOutput& out, StepRecord& rec) {
  rec.first = out.first;
  rec.n_new = out.n_new;
  rec.seq_len = out.seq_len;
  rec.n_layer = c.n_layer;
  rec.n_head = c.n_head;
  rec.n_embd = c.n_embd;
  rec.n_kv_head = c.kv_heads();
  rec.head_dim = c.head_dim();
  rec.n_rows = out.n_rows;
  rec.attn = std::move(out.attn);
  rec.q = std::move(out.q);
  rec.recomputed = std::max(0, std::min(computed_upto, out.first + out.n_new) - out.first);
  rec.n_kv = out.n_new - rec.recomputed;
  const size_t d = static_cast<size_t>(c.kv_heads()) * static_cast<size_t>(c.head_dim());  // K/V row width
  rec.k.resize(static_cast<size_t>(c.n_layer) * rec.n_kv * d);
  rec.v.resize(rec.k.size());
  for (int l = 0; l < c.n_layer; ++l) {
    const auto src = static_cast<std::ptrdiff_t>((static_cast<size_t>(l) * out.n_new + rec.recomputed) * d);
    const auto dst = static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * rec.n_kv * d);
    const auto n = static_cast<std::ptrdiff_t>(rec.n_kv * d);
    std::copy(out.k.begin() + src, out.k.begin() + src + n, rec.k.begin() + dst);
    std::copy(out.v.begin() + src, out.v.begin() + src + n, rec.v.begin() + dst);
  }
}

}  // namespace

ForwardOutput Generator::forward_step(StepRecord& rec) {
  const Config& c = model_->config;
  const int seq_len = static_cast<int>(tokens_.size());
  bool keep_all = false;
  if (rec.prefill) {
    const uint64_t p = static_cast<uint64_t>(seq_len);
    keep_all = static_cast<uint64_t>(c.n_layer) * c.n_head * p * p * 4 <= opt_.max_prefill_attn_bytes;
  }
  ForwardOutput out;
  if (opt_.mode == CacheMode::kKV) {
    // The cache is stale after NO CACHE steps (or a fork it could not keep): rebuild it in one pass.
    if (rec.prefill && prefill_from_ > 0 && seq_ >= 0 && cache_.length(seq_) == prefill_from_) {
      out = run_forward(cache_, seq_, prefill_from_, keep_all);  // a continuation: the kept prefix stays
    } else if (rec.prefill || seq_ < 0 || cache_.length(seq_) != seq_len - 1) {
      if (seq_ >= 0) cache_.release(seq_);
      seq_ = cache_.add_sequence();
      rec.refill = !rec.prefill;
      out = run_forward(cache_, seq_, 0, keep_all);
    } else {
      out = run_forward(cache_, seq_, seq_len - 1, false);
    }
    rec.kv_qerr = quant_errors(cache_, seq_, out, std::max(out.first, std::min(computed_upto_, out.seq_len)));
  } else {
    // NO CACHE keeps nothing between steps: the same layout, filled and emptied by this forward.
    refuse_no_cache(cache_.layout());
    if (seq_ >= 0) cache_.release(seq_);
    seq_ = -1;
    release_prefixes();
    if (!scratch_.ready() || scratch_.layout() != cache_.layout()) scratch_.reset(cache_.layout());
    scratch_.clear();
    const SeqId s = scratch_.add_sequence();
    out = run_forward(scratch_, s, 0, keep_all);
    rec.kv_qerr = quant_errors(scratch_, s, out, std::max(out.first, std::min(computed_upto_, out.seq_len)));
    scratch_.clear();
  }
  return out;
}

void Generator::take_sample(const SampleResult& s, std::vector<float>&& logits, StepRecord& rec) {
  rec.token = s.token;
  rec.prob = s.prob;
  rec.top = s.top;
  rec.draw = s.draw;
  rec.sampler = sampler_.settings();
  rec.logits = std::move(logits);
  const Tokenizer& tok = model_->tokenizer;
  rec.raw_piece = tok.token_bytes(s.token);
  rec.piece = tok.display_piece(s.token);
  if (rec.prefill) {
    rec.prompt_tokens = tokens_;
    for (int t : tokens_) rec.prompt_pieces.push_back(tok.display_piece(t));
  }
  tokens_.push_back(s.token);
}

RecordPtr Generator::step() {
  if (!started_ || done()) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = std::make_shared<StepRecord>();
  rec->index = n_forwards_++;
  rec->prefill = rec->index == 0;
  rec->mode = opt_.mode;
  rec->n_prompt = n_prompt_;

  ForwardOutput out = forward_step(*rec);
  take_forward(model_->config, computed_upto_, out, *rec);
  computed_upto_ = std::max(computed_upto_, out.seq_len);
  const SampleResult s = sampler_.sample(out.logits, tokens_, 10);
  take_sample(s, std::move(out.logits), *rec);

  rec->flops = out.flops;
  flops_total_ += out.flops;
  rec->flops_total = flops_total_;
  const KVLayout& lay = cache_.layout();
  rec->kv_layout = lay;
  const bool kv = opt_.mode == CacheMode::kKV;
  if (kv) {
    enforce_branch_budget();
    fill_cache_fields(*rec);
    rec->evicted = out.evicted;
  }
  rec->read_bytes = forward_read_bytes(
      *model_, kv ? lay.bytes_per_position() * static_cast<uint64_t>(lay.visible_count(out.seq_len - 1)) : 0);

  update_stop(s.token, out.seq_len);
  rec->stop = reason_;
  rec->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ms_total_ += rec->ms;
  rec->ms_total = ms_total_;

  RecordPtr ptr = rec;
  return ptr;
}

void Generator::update_stop(int token, int seq_len) {
  const Config& c = model_->config;
  // Stop conditions, in order of precedence.
  const bool stop_id = std::find(opt_.stop_ids.begin(), opt_.stop_ids.end(), token) != opt_.stop_ids.end();
  if ((c.is_eos(token) || stop_id) && !opt_.ignore_eos) {
    reason_ = StopReason::kEos;
  } else {
    if (!opt_.stop.empty()) {
      const std::string t = text();
      for (const std::string& stop : opt_.stop) {
        const size_t at = stop.empty() ? std::string::npos : t.find(stop);
        if (at != std::string::npos && at < stop_cut_) stop_cut_ = at;
      }
      if (stop_cut_ != std::string::npos) reason_ = StopReason::kStop;
    }
    if (reason_ == StopReason::kNone) {
      if (n_generated() >= opt_.max_new) {
        reason_ = StopReason::kMaxNew;
      } else if (seq_len >= c.n_positions) {
        // The token just chosen sits at position n_positions: no forward can take it.
        reason_ = StopReason::kContextFull;
      }
    }
  }
}

namespace {

std::shared_ptr<StepRecord> forced_copy(const StepRecord& at, int token, const std::vector<int>& prefix,
                                        const Tokenizer& tok) {
  if (token < 0 || (!at.logits.empty() && token >= static_cast<int>(at.logits.size()))) {
    throw Error("fork: token id " + std::to_string(token) + " is outside the vocabulary");
  }
  auto r = std::make_shared<StepRecord>(at);
  r->token = token;
  r->piece = tok.display_piece(token);
  r->raw_piece = tok.token_bytes(token);
  r->stop = StopReason::kNone;
  r->prob = 0;
  if (!at.logits.empty()) {
    // The distribution `at` drew from: penalty on the prefix, then temperature.
    std::vector<float> l = at.logits;
    apply_repetition_penalty(l, prefix, at.sampler.repetition_penalty);
    r->prob = softmax(l, at.sampler.greedy ? 1.0f : at.sampler.temperature)[static_cast<size_t>(token)];
  } else {
    for (const Candidate& c : at.top)
      if (c.token == token) r->prob = c.prob;
  }
  return r;
}

}  // namespace

RecordPtr Generator::fork(const std::vector<int>& prefix, const StepRecord& at, int token) {
  const Config& c = model_->config;
  if (!started_) throw Error("fork: no generation has started");
  const int p = at.seq_len;
  if (static_cast<int>(prefix.size()) != p || p < n_prompt_ || at.index < 0 ||
      !std::equal(prefix.begin(), prefix.begin() + n_prompt_, tokens_.begin())) {
    throw Error("fork: the prefix (" + std::to_string(prefix.size()) + " tokens) does not match step " +
                std::to_string(at.index) + " (expected its " + std::to_string(p) +
                " tokens, starting with this generation's prompt)");
  }
  if (token < 0 || token >= c.vocab_size) {
    throw Error("fork: token id " + std::to_string(token) + " is outside the vocabulary (0.." +
                std::to_string(c.vocab_size - 1) + ")");
  }
  const std::shared_ptr<StepRecord> rec = forced_copy(at, token, prefix, model_->tokenizer);
  keep_current();
  seq_ = take_prefix(prefix);
  fork_reused_cache_ = opt_.mode == CacheMode::kKV && seq_ >= 0 && cache_.length(seq_) == p;

  tokens_ = prefix;
  tokens_.push_back(token);
  computed_upto_ = p;  // position p now holds another token: its K/V are new
  n_forwards_ = at.index + 1;
  // The totals continue from the record forked.
  flops_total_ = at.flops_total;
  ms_total_ = at.ms_total;
  // The branch left keeps its sequence only for what the new one lacks.
  prefixes_.erase(std::remove_if(prefixes_.begin(), prefixes_.end(),
                                 [&](const CachedPrefix& k) {
                                   const bool redundant = k.tokens.size() <= tokens_.size() &&
                                                          std::equal(k.tokens.begin(), k.tokens.end(), tokens_.begin());
                                   if (redundant) cache_.release(k.seq);
                                   return redundant;
                                 }),
                  prefixes_.end());
  enforce_branch_budget();
  if (seq_ >= 0) fill_cache_fields(*rec);
  reason_ = StopReason::kNone;
  stop_cut_ = std::string::npos;
  update_stop(token, p);
  rec->stop = reason_;
  return rec;
}

RecordPtr make_forced_record(const StepRecord& at, int token, const std::vector<int>& prefix, const Tokenizer& tok) {
  return forced_copy(at, token, prefix, tok);
}

// The current sequence joins the kept ones (with the tokens of its cached
// positions) before a fork chooses which sequence the new branch takes.
void Generator::keep_current() {
  if (seq_ < 0) return;
  const int n = std::min(cache_.length(seq_), static_cast<int>(tokens_.size()));
  prefixes_.push_back(CachedPrefix{seq_, std::vector<int>(tokens_.begin(), tokens_.begin() + n), ++use_clock_});
  seq_ = -1;
}

// K/V of position i depend only on tokens [0, i]: a kept sequence whose
// tokens start with `prefix` serves a branch at it. One holding exactly the
// prefix is taken over; else the most recently used is forked at the prefix
// (sharing it) and stays. -1 when none holds it (the next step refills).
SeqId Generator::take_prefix(const std::vector<int>& prefix) {
  const int p = static_cast<int>(prefix.size());
  int best = -1;
  for (size_t i = 0; i < prefixes_.size(); ++i) {
    const CachedPrefix& k = prefixes_[i];
    if (static_cast<int>(k.tokens.size()) < p || !std::equal(prefix.begin(), prefix.end(), k.tokens.begin()) ||
        !cache_.can_truncate(k.seq, p))
      continue;
    const bool exact = static_cast<int>(k.tokens.size()) == p;
    if (exact) {
      const SeqId s = k.seq;
      prefixes_.erase(prefixes_.begin() + static_cast<std::ptrdiff_t>(i));
      return s;
    }
    if (best < 0 || k.used > prefixes_[static_cast<size_t>(best)].used) best = static_cast<int>(i);
  }
  if (best < 0) return -1;
  CachedPrefix& from = prefixes_[static_cast<size_t>(best)];
  from.used = ++use_clock_;
  return cache_.fork(from.seq, p);
}

void Generator::release_prefixes() {
  for (const CachedPrefix& k : prefixes_) cache_.release(k.seq);
  prefixes_.clear();
}

void Generator::enforce_branch_budget() {
  while (!prefixes_.empty() && cache_.bytes() > opt_.branch_cache_budget) {
    const auto oldest = std::min_element(prefixes_.begin(), prefixes_.end(),
                                         [](const CachedPrefix& a, const CachedPrefix& b) { return a.used < b.used; });
    cache_.release(oldest->seq);
    prefixes_.erase(oldest);
  }
}

// The cache as it stands, seen from the current sequence.
void Generator::fill_cache_fields(StepRecord& rec) const {
  rec.kv_bytes = cache_.bytes();
  rec.kv_positions = cache_.n_held(seq_);
  const std::vector<int> held = cache_.positions(seq_);
  rec.kv_held = PositionRuns::from_sorted(held);
  rec.kv_held_by_layer.clear();
  rec.kv_score_by_layer.clear();
  rec.kv_dropped_by_layer.clear();
  rec.kv_held_by_head.clear();
  const KVLayout& lay = cache_.layout();
  if (lay.evicting()) {
    for (int l = 0; l < lay.n_layer; ++l) {
      rec.kv_held_by_layer.push_back(cache_.positions(seq_, l));
      rec.kv_score_by_layer.push_back(cache_.scores(seq_, l));
      rec.kv_dropped_by_layer.push_back(cache_.dropped(seq_, l));
      if (!lay.per_head()) continue;
      rec.kv_held_by_head.emplace_back();
      for (int g = 0; g < lay.n_kv_head; ++g) rec.kv_held_by_head.back().push_back(cache_.positions(seq_, l, g));
    }
  }
  rec.kv_rows = cache_.slots_used();
  const std::vector<SeqId> seqs = cache_.sequences();
  rec.kv_sequences = static_cast<int>(seqs.size());
  rec.kv_bytes_separate = 0;
  for (SeqId s : seqs) rec.kv_bytes_separate += cache_.bytes_alone(s);
  rec.kv_page_runs.clear();
  rec.kv_blocks = rec.kv_slots_wasted = 0;
  if (!cache_.layout().paged()) return;
  rec.kv_blocks = cache_.blocks_held();
  rec.kv_slots_wasted = cache_.slots_wasted();
  // One run per stretch of consecutive positions in one block.
  for (int p : held) {
    const int b = cache_.slot_of(seq_, p).block;
    PageRun* last = rec.kv_page_runs.empty() ? nullptr : &rec.kv_page_runs.back();
    if (last && last->block == b && last->pos + last->n == p) {
      ++last->n;
      continue;
    }
    rec.kv_page_runs.push_back({p, 1, b, cache_.block_refs(b)});
  }
  rec.kv_page_runs.shrink_to_fit();
}

std::string Generator::text() const {
  std::string t = generated_text(*model_, tokens_, n_prompt_, reason_ == StopReason::kEos);
  if (stop_cut_ != std::string::npos && stop_cut_ < t.size()) t.resize(stop_cut_);
  return t;
}

}  // namespace kvscope
