// One generation: prompt -> prefill -> decode steps, in KV CACHE or NO CACHE
// mode (switchable between any two steps). Each forward yields an immutable
// StepRecord (model/decoding/step_record.h), handed out and not kept: the caller owns the history (the
// window's BranchTree, a CLI stream). Readers only ever see those records.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/sampler.h"
#include "model/decoding/setting_ranges.h"
#include "model/decoding/step_record.h"
#include "model/engine/engine.h"

namespace kvscope {

// The one rule for how a stop token ends a generation's text, for every
// decoding strategy (plain, beams, speculative, serving) and output form
// (streamed text, --json, the window): the text is the tokens after the
// prompt, decoded (raw bytes), less the last token when a stop token (an id
// of eos_token_id, Config::is_eos) ended the generation. `stopped_on_eos`:
// the generation (or beam hypothesis) ended because of that token; with
// ignore_eos a stop id is an ordinary token and stays in the text.
std::string generated_text(const Model& m, const std::vector<int>& tokens, int n_prompt, bool stopped_on_eos);

// The most new tokens one generation (or one served request) may ask for.
inline constexpr int kMaxNewLimit = static_cast<int>(setting::kMaxNew.hi);

struct GenerateOptions {
  int max_new = 64;               // new tokens, including the prefill's
  std::vector<std::string> stop;  // stop strings
  SamplerSettings sampler;
  CacheMode mode = CacheMode::kKV;
  bool ignore_eos = false;  // keep going past the end-of-text token (soak runs fill the context)
  // More ids that end the text as eos_token_id's do (a chat template's
  // end-of-turn token, e.g. <|im_end|>, where config.json names another).
  std::vector<int> stop_ids;
  KVLayout kv;  // cache layout: dtype, window + sinks, paging (both modes run it)
  // Branching keeps the sequences of branches left by fork() in the cache
  // (a paged cache shares their common prefix pages) while the whole cache
  // holds at most this many bytes; beyond, least recently used ones go first.
  uint64_t branch_cache_budget = 256ull << 20;
  // The prefill keeps every prompt row of attention when (layer*head*P*P) f32
  // stays under this; above it only the last row (a 1k-token GPT-2 prompt
  // would otherwise need 600 MB).
  uint64_t max_prefill_attn_bytes = 64ull << 20;
};

class Generator {
 public:
  explicit Generator(std::shared_ptr<const Model> model);

  // Tokenizes the prompt; throws kvscope::Error when it is empty or leaves
  // no room in the context.
  void start(const std::string& prompt, const GenerateOptions& opt);
  void start_tokens(const std::vector<int>& prompt, const GenerateOptions& opt);
  // As start_tokens, keeping what the cache already holds of `prompt`: the
  // longest common prefix of the cached positions' tokens and `prompt` (at
  // most all but its last token, whose logits the prefill must produce)
  // stays, the rest of the sequence is dropped, and the prefill computes
  // only the positions after it (a chat's next turn). KV CACHE with the
  // same layout only, and a layout that can truncate (no window or
  // eviction); otherwise nothing is kept. Returns the positions kept.
  int continue_tokens(const std::vector<int>& prompt, const GenerateOptions& opt);

  // Runs the next forward (the prefill first). Returns nullptr once done.
  RecordPtr step();

  bool done() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }

  void set_mode(CacheMode m) { opt_.mode = m; }  // from the next step on
  CacheMode mode() const { return opt_.mode; }
  void set_sampler(const SamplerSettings& s) {
    sampler_.set_settings(s);
    opt_.sampler = s;
  }
  void set_max_new(int n) { opt_.max_new = n; }

  // Forks the generation (branching): the sequence becomes `prefix`
  // + `token`, where `at` is the record whose choice is replaced and `prefix`
  // the at.seq_len tokens before it chose (History::tokens_before(at.index));
  // `at` may come from another branch of the same prompt. Returns the forced
  // record (a copy of `at` choosing `token`; prob from at's logits, else its
  // top candidates); the next step() continues from it.
  // KV CACHE: when a sequence of the cache holds `prefix` (this branch's, or
  // one kept for an earlier branch) the new branch takes it, forked at
  // at.seq_len (KVCache::fork, sharing the prefix) unless it holds exactly
  // the prefix, and the next step() computes one position; otherwise the next
  // step() rebuilds it (a refill). The branch left keeps its sequence while
  // it holds positions the new one does not (see branch_cache_budget); the
  // forced record's cache fields are the cache after the fork. NO CACHE recomputes
  // everything, as always. Counters continue from `at`; the sampler is not
  // reseeded. Throws kvscope::Error when prefix and `at` disagree or the
  // token is outside the vocabulary.
  RecordPtr fork(const std::vector<int>& prefix, const StepRecord& at, int token);
  // Whether the last fork() kept the cache's prefix for the next step: KV
  // CACHE mode and the cache held it, so that step computes one position
  // instead of refilling (what a fork saves, app/session/branches.h's fork_cost).
  bool fork_reused_cache() const { return fork_reused_cache_; }
  const GenerateOptions& options() const { return opt_; }

  const std::vector<int>& tokens() const { return tokens_; }  // prompt + generated
  int n_prompt() const { return n_prompt_; }
  int n_generated() const { return static_cast<int>(tokens_.size()) - n_prompt_; }
  std::string text() const;  // generated text (raw bytes), EOS and stop string removed
  uint64_t flops_total() const { return flops_total_; }
  double ms_total() const { return ms_total_; }
  const KVCache& cache() const { return cache_; }
  SeqId sequence() const { return seq_; }  // the cache's sequence for this generation, -1 when none
  int cache_length() const { return seq_ >= 0 ? cache_.length(seq_) : 0; }  // positions written to the cache
  const Model& model() const { return *model_; }

 private:
  // A sequence of the cache kept after a fork, by the tokens it holds: KV
  // memory that lets a later fork at any of its prefixes compute one position
  // instead of refilling (a prefix cache, per sequence). It names no branch:
  // the branches themselves (ids, parents, records) are the caller's (the
  // window's BranchTree); this is only which cached rows are worth keeping.
  struct CachedPrefix {
    SeqId seq = -1;
    std::vector<int> tokens;  // the tokens of its cached positions [0, length)
    uint64_t used = 0;        // when it last served a fork (least recently used go first)
  };
  void begin(const std::vector<int>& prompt, const GenerateOptions& opt, int keep);
  void keep_current();
  SeqId take_prefix(const std::vector<int>& prefix);
  void release_prefixes();
  void enforce_branch_budget();
  void fill_cache_fields(StepRecord& rec) const;
  void update_stop(int token, int seq_len);
  // step()'s parts: the forward in the current mode (rebuilding the cache
  // when stale), then the sampled token into the record and the sequence.
  ForwardOutput forward_step(StepRecord& rec);
  void take_sample(const SampleResult& s, std::vector<float>&& logits, StepRecord& rec);
  ForwardOutput run_forward(KVCache& cache, SeqId seq, int first,
                            bool keep_all);  // sets reason_ after `token` was chosen by a forward over seq_len

  std::shared_ptr<const Model> model_;
  Engine engine_;
  KVCache cache_;
  KVCache scratch_;  // NO CACHE: filled by one forward, emptied after it
  SeqId seq_ = -1;
  std::vector<CachedPrefix> prefixes_;  // sequences of cache_ other than seq_
  uint64_t use_clock_ = 0;
  Sampler sampler_;
  GenerateOptions opt_;
  std::vector<int> tokens_;
  int n_prompt_ = 0;
  StopReason reason_ = StopReason::kNone;
  uint64_t flops_total_ = 0;
  double ms_total_ = 0;
  int computed_upto_ = 0;                // positions [0, computed_upto_) have been computed at least once
  size_t stop_cut_ = std::string::npos;  // byte offset of the first stop string in text()
  bool started_ = false;
  int prefill_from_ = 0;  // the prefill starts here: positions [0, prefill_from_) are kept in seq_
  int n_forwards_ = 0;  // forwards run in this generation (records are handed out, not kept)
  bool fork_reused_cache_ = false;
};

// The record of a forced choice (what Generator::fork returns): a copy of
// record `at` (its forward, logits, attention and counters are what ran) with
// `token` as its choice and no stop. prob = the token's probability in the
// distribution `at` drew from: the repetition penalty on `prefix` (the tokens
// before `at`), then temperature, over the stored logits; from at.top when the
// logits were dropped; 0 when neither has it. Throws kvscope::Error for a
// token outside the vocabulary.
RecordPtr make_forced_record(const StepRecord& at, int token, const std::vector<int>& prefix, const Tokenizer& tok);

}  // namespace kvscope
