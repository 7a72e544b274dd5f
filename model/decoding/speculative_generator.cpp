#include "model/decoding/speculative_generator.h"

#include <algorithm>
#include <chrono>

#include "model/core/error.h"
#include "model/decoding/setting_ranges.h"
#include "model/decoding/strategy.h"

namespace kvscope {
namespace {

// Positions held by the cache's one sequence (0 before its first forward).
int held(const KVCache& c) {
  return c.ready() && c.has_sequence(0) ? c.length(0) : 0;
}

// A model's own sliding window (Mistral's sliding_window) evicts as it goes;
// an iteration rolls a cache back by at most k positions (the target's
// verify forward runs k past the accepted prefix, the draft k - 1), so each
// cache keeps k positions beyond the window.
KVLayout rollback_layout(const KVLayout& kv, const Model& m, const char* role, int k) {
  KVLayout l;
  try {
    l = kv.on_model(m.config);
  } catch (const UsageError& e) {  // two models: say whose layout it is
    throw UsageError(std::string(role) + " " + m.dir + ": " + e.what());
  } catch (const Error& e) {
    throw Error(std::string(role) + " " + m.dir + ": " + e.what());
  }
  if (l.windowed()) l.rollback = k;
  return l;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void check_same_tokenizer(const Model& target, const Model& draft) {
  // The draft's ids must mean what the target's mean: the same bytes for
  // every id, whichever files (vocab.json + merges.txt or tokenizer.json)
  // each tokenizer was loaded from.
  const Tokenizer& t = target.tokenizer;
  const Tokenizer& d = draft.tokenizer;
  const std::string both =
      "--draft: the draft " + draft.dir + " and the target " + target.dir + " must share a tokenizer";
  if (t.vocab_size() != d.vocab_size()) {
    throw Error(both + ", but the draft's has " + std::to_string(d.vocab_size()) + " tokens and the target's " +
                std::to_string(t.vocab_size()) + " (expected the same tokens for the same ids)");
  }
  for (int id = 0; id < t.vocab_size(); ++id) {
    if (t.token_bytes(id) != d.token_bytes(id)) {
      throw Error(both + ", but token " + std::to_string(id) + " is \"" + t.display_piece(id) +
                  "\" in the target and \"" + d.display_piece(id) +
                  "\" in the draft (expected the same tokens for the same ids)");
    }
  }
  if (target.config.vocab_size != draft.config.vocab_size) {
    throw Error("--draft: the draft " + draft.dir + " has vocab_size " + std::to_string(draft.config.vocab_size) +
                ", the target " + target.dir + " has " + std::to_string(target.config.vocab_size) +
                " (expected the same vocabulary)");
  }
}

SpeculativeDecoder::SpeculativeDecoder(std::shared_ptr<const Model> target, std::shared_ptr<const Model> draft)
    : target_(std::move(target)), draft_(std::move(draft)), target_engine_(*target_), draft_engine_(*draft_) {
  check_same_tokenizer(*target_, *draft_);
}

void SpeculativeDecoder::start(const std::string& prompt, const SpecOptions& opt) {
  if (prompt.empty()) throw Error("prompt is empty (expected at least one character of text)");
  start_tokens(target_->tokenizer.encode_prompt(prompt), opt);
}

void SpeculativeDecoder::start_tokens(const std::vector<int>& prompt, const SpecOptions& opt) {
  const Config& c = target_->config;
  if (prompt.empty()) throw Error("prompt is empty (expected at least one token)");
  if (static_cast<int>(prompt.size()) > c.n_positions) {
    throw Error("prompt is " + std::to_string(prompt.size()) + " tokens, longer than the context: " + target_->name +
                " has n_positions = " + std::to_string(c.n_positions));
  }
  for (int t : prompt) {
    if (t < 0 || t >= c.vocab_size) {
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                  std::to_string(c.vocab_size - 1) + ")");
    }
  }
  if (opt.k < setting::kSpeculate.lo || opt.k > setting::kSpeculate.hi)
    throw Error(std::string(setting::kSpeculate.flag) + " must be in " + std::to_string(setting::kSpeculate.lo) + ".." +
                std::to_string(setting::kSpeculate.hi) + ", got " + std::to_string(opt.k));
  if (opt.max_new < 1) throw Error("max_new must be at least 1, got " + std::to_string(opt.max_new));
  Sampler check(opt.sampler);  // validates the settings
  if (const auto refused = strategy_refusal(strategy::Speculative{draft_->dir, opt.k}, opt.kv))
    throw Error(refused->message);
  // Both layouts before anything changes: a refused start leaves the decoder as it was.
  const KVLayout target_layout = rollback_layout(opt.kv, *target_, "the target", opt.k);
  const KVLayout draft_layout = rollback_layout(opt.kv, *draft_, "the draft", opt.k);
  opt_ = opt;
  uniform_ = UniformSource(opt.sampler.seed);
  tokens_ = prompt;
  n_prompt_ = static_cast<int>(prompt.size());
  reason_ = StopReason::kNone;
  started_ = true;
  iterations_ = target_forwards_ = draft_forwards_ = drafted_total_ = accepted_total_ = 0;
  draft_ms_ = ms_total_ = 0;
  target_cache_.reset(target_layout);
  draft_cache_.reset(draft_layout);
}

// K, or fewer so that the iteration emits at most the remaining new tokens
// and every forward stays within both contexts (0: a plain target step).
int SpeculativeDecoder::drafts_this_iteration() const {
  const int len = static_cast<int>(tokens_.size());
  int k = std::min(opt_.k, opt_.max_new - n_generated() - 1);
  k = std::min(k, target_->config.n_positions - len);     // target runs len + k tokens
  k = std::min(k, draft_->config.n_positions - len + 1);  // draft runs up to len + k - 1
  return std::max(k, 0);
}

// 1. Draft K tokens, one forward each; the draft's cache catches up on
// whatever it lacks (the prompt, or the last token of a fully accepted run).
// `seq` grows by the drafted tokens; q: the draft's distribution of each.
std::vector<int> SpeculativeDecoder::draft_tokens(SpecIteration& it, std::vector<int>& seq, std::vector<TokenDist>& q) {
  std::vector<int> drafted;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < it.k; ++i) {
    ForwardOutput out = draft_engine_.forward(seq, held(draft_cache_), &draft_cache_, false);
    ++draft_forwards_;
    q.push_back(sampling_distribution(out.logits, seq, opt_.sampler));
    const int x = draw_token(q.back(), uniform_.next());
    drafted.push_back(x);
    seq.push_back(x);
  }
  it.draft_ms = ms_since(t0);
  return drafted;
}

// 2. The target scores every drafted position and the one after: one
// forward over [its cached length, len + k), logits for the last k + 1.
std::vector<TokenDist> SpeculativeDecoder::verify_forward(SpecIteration& it, const std::vector<int>& seq) {
  const auto t0 = std::chrono::steady_clock::now();
  ForwardOutput tout = target_engine_.forward(seq, held(target_cache_), &target_cache_, false, true);
  ++target_forwards_;
  it.target_positions = tout.n_new;
  const size_t vocab = static_cast<size_t>(target_->config.vocab_size);
  std::vector<TokenDist> p;
  for (int i = 0; i <= it.k; ++i) {
    const size_t row = static_cast<size_t>(tout.n_new - (it.k + 1) + i);
    std::vector<float> logits(tout.logits.begin() + static_cast<std::ptrdiff_t>(row * vocab),
                              tout.logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * vocab));
    std::vector<int> history(seq.begin(), seq.begin() + it.first + i);
    p.push_back(sampling_distribution(logits, history, opt_.sampler));
  }
  it.target_ms = ms_since(t0);
  return p;
}

// 4. Emit the accepted drafts and the next token, one by one, until a stop condition.
void SpeculativeDecoder::emit_tokens(SpecIteration& it, const std::vector<int>& drafted, const Verification& v) {
  std::vector<int> out(drafted.begin(), drafted.begin() + v.n_accepted);
  out.push_back(v.next_token);
  const Config& c = target_->config;
  for (int t : out) {
    const int chosen_after = static_cast<int>(tokens_.size());  // the forward that chose t saw this many tokens
    tokens_.push_back(t);
    it.emitted.push_back(t);
    it.emitted_pieces.push_back(target_->tokenizer.display_piece(t));
    if (!opt_.ignore_eos && c.is_eos(t)) {
      reason_ = StopReason::kEos;
    } else if (n_generated() >= opt_.max_new) {
      reason_ = StopReason::kMaxNew;
    } else if (chosen_after >= c.n_positions) {
      reason_ = StopReason::kContextFull;
    }
    if (reason_ != StopReason::kNone) break;
  }
}

// 5. Roll both caches back to the accepted prefix: position j's K/V depend
// on tokens [0, j] only, so every cached row before the first rejected or
// new token stays valid.
void SpeculativeDecoder::roll_back(SpecIteration& it) {
  const int keep = static_cast<int>(tokens_.size()) - 1;
  const int t_held = held(target_cache_), d_held = held(draft_cache_);
  const int t_keep = std::min(keep, t_held);
  it.target_rolled_back = t_held - t_keep;
  if (t_held > t_keep) target_cache_.truncate(0, t_keep);
  const int d_keep = std::min(keep, d_held);
  it.draft_rolled_back = d_held - d_keep;
  if (d_held > d_keep) draft_cache_.truncate(0, d_keep);
  it.target_kv_bytes = target_cache_.bytes();
  it.draft_kv_bytes = draft_cache_.bytes();
}

// The counters so far and the pieces the views show.
void SpeculativeDecoder::finish_record(SpecIteration& it, const std::vector<int>& drafted) const {
  it.target_forwards = target_forwards_;
  it.draft_forwards = draft_forwards_;
  it.drafted_total = drafted_total_;
  it.accepted_total = accepted_total_;
  it.generated = n_generated();
  const Tokenizer& tok = target_->tokenizer;
  for (int x : drafted) it.drafted_pieces.push_back(tok.display_piece(x));
  it.next_piece = tok.display_piece(it.next_token);
  if (it.index == 0) {
    it.prompt.assign(tokens_.begin(), tokens_.begin() + n_prompt_);
    for (int t : it.prompt) it.prompt_pieces.push_back(tok.display_piece(t));
  }
  it.n_target_layers = target_->config.n_layer;
  it.n_draft_layers = draft_->config.n_layer;
  it.stop = reason_;
}

SpecIterationPtr SpeculativeDecoder::step() {
  if (!started_ || done()) return nullptr;
  const auto t_iter = std::chrono::steady_clock::now();
  auto it = std::make_shared<SpecIteration>();
  it->index = iterations_++;
  it->first = static_cast<int>(tokens_.size());
  it->k = drafts_this_iteration();
  it->draft_context_full = it->k == 0 && draft_->config.n_positions < it->first && opt_.max_new - n_generated() > 1;

  std::vector<int> seq = tokens_;
  std::vector<TokenDist> q;
  const std::vector<int> drafted = draft_tokens(*it, seq, q);
  const std::vector<TokenDist> p = verify_forward(*it, seq);

  // 3. Accept a prefix, then the replacement or bonus token.
  const Verification v = verify_draft(drafted, q, p, uniform_);
  it->drafted = v.drafted;
  it->n_accepted = v.n_accepted;
  it->next_token = v.next_token;
  it->bonus = v.bonus;
  it->next_prob = v.next_prob;
  drafted_total_ += it->k;
  accepted_total_ += v.n_accepted;

  emit_tokens(*it, drafted, v);
  roll_back(*it);
  finish_record(*it, drafted);
  draft_ms_ += it->draft_ms;
  ms_total_ += ms_since(t_iter);
  return it;
}

std::string SpeculativeDecoder::text() const {
  return generated_text(*target_, tokens_, n_prompt_, reason_ == StopReason::kEos);
}

}  // namespace kvscope
