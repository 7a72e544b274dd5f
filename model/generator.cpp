#include "generator.h"

#include <algorithm>
#include <chrono>

#include "error.h"

namespace kvscope {

const char* to_string(CacheMode m) {
  return m == CacheMode::kKV ? "kv_cache" : "no_cache";
}

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::kNone:
      return "";
    case StopReason::kEos:
      return "eos";
    case StopReason::kMaxNew:
      return "max_new";
    case StopReason::kContextFull:
      return "context_full";
    case StopReason::kStop:
      return "stop";
  }
  return "";
}

Generator::Generator(std::shared_ptr<const Model> model) : model_(std::move(model)), engine_(*model_) {}

void Generator::start(const std::string& prompt, const GenerateOptions& opt) {
  if (prompt.empty()) throw Error("prompt is empty (expected at least one character of text)");
  start_tokens(model_->tokenizer.encode(prompt), opt);
}

void Generator::start_tokens(const std::vector<int>& prompt, const GenerateOptions& opt) {
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
  sampler_.set_settings(opt.sampler);
  opt_ = opt;
  tokens_ = prompt;
  n_prompt_ = static_cast<int>(prompt.size());
  history_.clear();
  reason_ = StopReason::kNone;
  flops_total_ = 0;
  ms_total_ = 0;
  computed_upto_ = 0;
  stop_cut_ = std::string::npos;
  started_ = true;
  n_forwards_ = 0;
  if (cache_.capacity != c.n_positions) cache_.init(c);
  cache_.clear();
}

RecordPtr Generator::step() {
  if (!started_ || done()) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const Config& c = model_->config;
  const int seq_len = static_cast<int>(tokens_.size());
  const bool prefill = n_forwards_ == 0;

  auto rec = std::make_shared<StepRecord>();
  rec->index = n_forwards_++;
  rec->prefill = prefill;
  rec->mode = opt_.mode;
  rec->n_prompt = n_prompt_;

  bool keep_all = false;
  if (prefill) {
    const uint64_t p = static_cast<uint64_t>(seq_len);
    keep_all = static_cast<uint64_t>(c.n_layer) * c.n_head * p * p * 4 <= opt_.max_prefill_attn_bytes;
  }
  ForwardOutput out;
  if (opt_.mode == CacheMode::kKV) {
    // The cache is stale after NO CACHE steps: rebuild it in one pass.
    if (cache_.n_pos != seq_len - 1 || prefill) {
      cache_.clear();
      rec->refill = !prefill;
      out = engine_.forward(tokens_, 0, &cache_, keep_all);
    } else {
      out = engine_.forward(tokens_, seq_len - 1, &cache_, false);
    }
  } else {
    cache_.clear();  // NO CACHE keeps nothing between steps
    out = engine_.forward(tokens_, 0, nullptr, keep_all);
  }

  rec->first = out.first;
  rec->n_new = out.n_new;
  rec->seq_len = out.seq_len;
  rec->n_layer = c.n_layer;
  rec->n_head = c.n_head;
  rec->n_embd = c.n_embd;
  rec->n_rows = out.n_rows;
  rec->attn = std::move(out.attn);
  rec->q = std::move(out.q);
  // K/V rows of positions never computed before; recomputed ones are equal to
  // what an earlier record already holds.
  rec->recomputed = std::min(computed_upto_, out.first + out.n_new) - out.first;
  if (rec->recomputed < 0) rec->recomputed = 0;
  rec->n_kv = out.n_new - rec->recomputed;
  const size_t d = static_cast<size_t>(c.n_embd);
  rec->k.resize(static_cast<size_t>(c.n_layer) * rec->n_kv * d);
  rec->v.resize(rec->k.size());
  for (int l = 0; l < c.n_layer; ++l) {
    const size_t src = (static_cast<size_t>(l) * out.n_new + rec->recomputed) * d;
    const size_t dst = static_cast<size_t>(l) * rec->n_kv * d;
    std::copy(out.k.begin() + static_cast<std::ptrdiff_t>(src),
              out.k.begin() + static_cast<std::ptrdiff_t>(src + rec->n_kv * d),
              rec->k.begin() + static_cast<std::ptrdiff_t>(dst));
    std::copy(out.v.begin() + static_cast<std::ptrdiff_t>(src),
              out.v.begin() + static_cast<std::ptrdiff_t>(src + rec->n_kv * d),
              rec->v.begin() + static_cast<std::ptrdiff_t>(dst));
  }
  computed_upto_ = std::max(computed_upto_, out.seq_len);

  const SampleResult s = sampler_.sample(out.logits, tokens_, 10);
  rec->token = s.token;
  rec->prob = s.prob;
  rec->top = s.top;
  rec->draw = s.draw;
  rec->sampler = sampler_.settings();
  rec->logits = std::move(out.logits);
  const Tokenizer& tok = model_->tokenizer;
  rec->raw_piece = tok.token_bytes(s.token);
  rec->piece = tok.display_piece(s.token);
  if (prefill) {
    rec->prompt_tokens = tokens_;
    for (int t : tokens_) rec->prompt_pieces.push_back(tok.display_piece(t));
  }
  tokens_.push_back(s.token);

  rec->flops = out.flops;
  flops_total_ += out.flops;
  rec->flops_total = flops_total_;
  rec->kv_bytes = opt_.mode == CacheMode::kKV ? cache_.bytes() : 0;
  rec->read_bytes = forward_read_bytes(*model_, opt_.mode == CacheMode::kKV ? out.seq_len : 0);

  update_stop(s.token, out.seq_len);
  rec->stop = reason_;
  rec->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ms_total_ += rec->ms;

  RecordPtr ptr = rec;
  if (opt_.keep_history) history_.push_back(ptr);
  return ptr;
}

void Generator::update_stop(int token, int seq_len) {
  const Config& c = model_->config;
  // Stop conditions, in order of precedence.
  if (c.eos_token_id >= 0 && token == c.eos_token_id && !opt_.ignore_eos) {
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
  // K/V of position i depend only on tokens [0, i]: a cache holding this very
  // prefix stays valid when cut back to it.
  const bool reuse = cache_.n_pos >= p && static_cast<int>(tokens_.size()) >= p &&
                     std::equal(prefix.begin(), prefix.end(), tokens_.begin());
  if (reuse) {
    cache_.truncate(p);
  } else {
    cache_.clear();
  }

  auto rec = std::make_shared<StepRecord>(at);
  rec->token = token;
  const Tokenizer& tok = model_->tokenizer;
  rec->raw_piece = tok.token_bytes(token);
  rec->piece = tok.display_piece(token);
  rec->prob = 0;
  if (!at.logits.empty()) {
    // The distribution `at` drew from: penalty on the prefix, then temperature.
    std::vector<float> l = at.logits;
    apply_repetition_penalty(l, prefix, at.sampler.repetition_penalty);
    rec->prob = softmax(l, at.sampler.greedy ? 1.0f : at.sampler.temperature)[static_cast<size_t>(token)];
  } else {
    for (const Candidate& cand : at.top)
      if (cand.token == token) rec->prob = cand.prob;
  }

  tokens_ = prefix;
  tokens_.push_back(token);
  computed_upto_ = p;  // position p now holds another token: its K/V are new
  n_forwards_ = at.index + 1;
  flops_total_ = at.flops_total;
  if (opt_.keep_history) {
    if (history_.size() > static_cast<size_t>(at.index)) history_.resize(static_cast<size_t>(at.index));
    ms_total_ = 0;
    for (const RecordPtr& r : history_) ms_total_ += r->ms;
    ms_total_ += at.ms;
  }
  reason_ = StopReason::kNone;
  stop_cut_ = std::string::npos;
  update_stop(token, p);
  rec->stop = reason_;
  RecordPtr ptr = rec;
  if (opt_.keep_history) history_.push_back(ptr);
  return ptr;
}

std::string Generator::text() const {
  std::vector<int> gen(tokens_.begin() + n_prompt_, tokens_.end());
  if (reason_ == StopReason::kEos && !gen.empty()) gen.pop_back();
  std::string t = model_->tokenizer.decode(gen);
  if (stop_cut_ != std::string::npos && stop_cut_ < t.size()) t.resize(stop_cut_);
  return t;
}

}  // namespace kvscope
