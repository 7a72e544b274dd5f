// One generation: prompt -> prefill -> decode steps, in KV CACHE or NO CACHE
// mode (switchable between any two steps). Each forward yields an immutable
// StepRecord, handed out and not kept: the caller owns the history (the
// window's BranchTree, a CLI stream). Readers only ever see those records.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/index_check.h"
#include "model/decoding/sampler.h"
#include "model/decoding/setting_ranges.h"
#include "model/engine/engine.h"

namespace kvscope {

enum class CacheMode { kKV, kNoCache };
enum class StopReason { kNone, kEos, kMaxNew, kContextFull, kStop };

const char* to_string(CacheMode m);   // "kv_cache" / "no_cache"
const char* to_string(StopReason r);  // "" / "eos" / "max_new" / "context_full" / "stop"

// The one rule for how a stop token ends a generation's text, for every
// decoding strategy (plain, beams, speculative, serving) and output form
// (streamed text, --json, the window): the text is the tokens after the
// prompt, decoded (raw bytes), less the last token when a stop token (an id
// of eos_token_id, Config::is_eos) ended the generation. `stopped_on_eos`:
// the generation (or beam hypothesis) ended because of that token; with
// ignore_eos a stop id is an ordinary token and stays in the text.
std::string generated_text(const Model& m, const std::vector<int>& tokens, int n_prompt, bool stopped_on_eos);

// Paged: held positions [pos, pos + n), consecutive and in one page (pool
// block), and how many sequences reference that page (> 1: shared).
struct PageRun {
  int pos = 0, n = 0;
  int block = 0, refs = 0;
  bool operator==(const PageRun& o) const { return pos == o.pos && n == o.n && block == o.block && refs == o.refs; }
};

struct StepRecord {
  int index = 0;         // 0 = the prefill, then 1, 2, ...
  bool prefill = false;  // the forward over the whole prompt
  bool refill = false;   // a KV CACHE forward that had to rebuild the cache (after NO CACHE)
  CacheMode mode = CacheMode::kKV;

  // The forward computed positions [first, first + n_new) of a sequence of
  // seq_len tokens (prefill: first = 0, n_new = seq_len = prompt length).
  int first = 0, n_new = 0, seq_len = 0;
  int n_prompt = 0;

  std::vector<int> prompt_tokens;          // prefill only
  std::vector<std::string> prompt_pieces;  // prefill only, display-safe

  // The token this forward chose; it lands at position seq_len.
  int token = 0;
  std::string piece;      // display-safe (partial UTF-8 escaped as \xNN)
  std::string raw_piece;  // the token's raw bytes
  float prob = 0;
  std::vector<Candidate> top;  // >= 10 entries, best first
  float draw = -1;             // uniform draw of the sampler, -1 when greedy
  std::vector<float> logits;   // (vocab) raw logits of the last position, before the sampler
  SamplerSettings sampler;     // the settings the token was drawn with

  // Attention of the query rows [seq_len - n_rows, seq_len) over keys
  // [0, seq_len), every layer and head (prefill: every prompt row).
  int n_layer = 0, n_head = 0, n_embd = 0;
  int n_kv_head = 0, head_dim = 0;  // K/V heads (grouped-query: fewer than n_head) and their width
  int n_rows = 0;
  std::vector<float> attn;  // (layer, head, n_rows, seq_len)
  // Query rows of the attention rows above (the Q in Q.K^T).
  std::vector<float> q;  // (layer, n_rows, n_head * head_dim)

  // K and V rows of positions that are new to the sequence, [seq_len - n_kv, seq_len),
  // as computed (before the cache quantizes them; K after RoPE for Llama-family models).
  int n_kv = 0;
  std::vector<float> k, v;  // (layer, n_kv, n_kv_head * head_dim); GPT-2: n_embd wide

  // The cache after this forward (KV CACHE; NO CACHE keeps nothing: all 0 / empty).
  // It may also hold other branches of this generation (Generator::fork keeps
  // them, sharing their common prefix): kv_bytes counts every row once.
  KVLayout kv_layout;              // the layout the forward ran with (also in NO CACHE)
  int kv_sequences = 0;            // sequences in the cache: this branch + the branches kept beside it
  int kv_rows = 0;                 // distinct rows held over every sequence (a shared row once)
  uint64_t kv_bytes_separate = 0;  // what the sequences would hold as separate caches (KVCache::bytes_alone)
  int kv_positions = 0;            // positions held
  int evicted = 0;                 // positions this forward's window evicted
  std::vector<int> kv_held;        // the positions held, ascending
  // Eviction by score: (layer) the positions each layer holds, ascending
  // (kv_held is their union). Empty for other layouts.
  std::vector<std::vector<int>> kv_held_by_layer;
  // Eviction by score: (layer, held) the score of each kv_held_by_layer
  // position, the one the rule ranks by (TOVA: this forward's last query's
  // weight averaged over the query heads; H2O: that weight accumulated over
  // every query so far); and (layer) the positions this forward dropped, with
  // the score that ranked each. Empty for other layouts.
  std::vector<std::vector<double>> kv_score_by_layer;
  std::vector<std::vector<KVDrop>> kv_dropped_by_layer;
  int kv_blocks = 0;        // paged: blocks held
  int kv_slots_wasted = 0;  // paged: allocated slots holding nothing
  // Paged: for each kv_held position, its block (page id) and how many
  // sequences reference that block (> 1: shared with a fork, copied on first write).
  std::vector<int> kv_held_block, kv_held_refs;
  // The same pages a run each (a few per page, not one entry per position):
  // what a record keeps of them once the lists above are dropped with its
  // K/V rows to keep the step history within its memory budget.
  std::vector<PageRun> kv_page_runs;
  // Quantization error of the new rows above (dtypes other than f32): the
  // stored row read back (dequantized) minus the row as computed.
  // (layer, n_kv, 4): K max|d|, K rms d, V max|d|, V rms d; -1 where the row
  // was evicted before it could be read back. Empty for f32.
  std::vector<float> kv_qerr;

  // Counters, from what ran.
  uint64_t flops = 0;        // this forward
  uint64_t flops_total = 0;  // every forward of this generation so far
  uint64_t kv_bytes = 0;     // resident cache after this forward (0 in NO CACHE)
  int recomputed = 0;        // positions computed that had been computed before
  uint64_t read_bytes = 0;   // weights + cached K/V this forward had to read (forward_read_bytes)
  double ms = 0;             // wall time of the forward + sampling
  double ms_total = 0;       // this branch's forwards so far, this one included (a fork continues its parent's)

  StopReason stop = StopReason::kNone;  // set on the last record

  float attention(int layer, int head, int row, int key) const {
    KVSCOPE_CHECK_INDEX("attention layer", layer, n_layer);
    KVSCOPE_CHECK_INDEX("attention head", head, n_head);
    KVSCOPE_CHECK_INDEX("attention row", row, n_rows);
    KVSCOPE_CHECK_INDEX("attention key", key, seq_len);
    return attn[((static_cast<size_t>(layer) * n_head + head) * n_rows + row) * seq_len + key];
  }
  // The K/V head query head `head` reads (grouped-query: n_head / n_kv_head share one).
  int kv_head_of(int head) const {
    KVSCOPE_CHECK_INDEX("query head", head, n_head);
    return head / (n_head / n_kv_head);
  }
  // Head `head`'s slice of query row `row` at `layer` (head_dim floats).
  const float* q_row(int layer, int row, int head) const {
    KVSCOPE_CHECK_INDEX("query layer", layer, n_layer);
    KVSCOPE_CHECK_INDEX("query row", row, n_rows);
    KVSCOPE_CHECK_INDEX("query head", head, n_head);
    const size_t at = ((static_cast<size_t>(layer) * n_rows + row) * n_head + head) * head_dim;
    KVSCOPE_CHECK_INDEX("query row end", at + head_dim - 1, q.size());
    return q.data() + at;
  }
  // K/V head `kv_head`'s slice of new row `i` (position seq_len - n_kv + i) at `layer` (head_dim floats).
  const float* k_row(int layer, int i, int kv_head) const { return kv_row(k, "K", layer, i, kv_head); }
  const float* v_row(int layer, int i, int kv_head) const { return kv_row(v, "V", layer, i, kv_head); }

 private:
  const float* kv_row(const std::vector<float>& rows, const char* what, int layer, int i, int kv_head) const {
    (void)what;  // (only the checks name it)
    KVSCOPE_CHECK_INDEX(what, layer, n_layer);
    KVSCOPE_CHECK_INDEX(what, i, n_kv);
    KVSCOPE_CHECK_INDEX(what, kv_head, n_kv_head);
    const size_t at = ((static_cast<size_t>(layer) * n_kv + i) * n_kv_head + kv_head) * head_dim;
    KVSCOPE_CHECK_INDEX(what, at + head_dim - 1, rows.size());
    return rows.data() + at;
  }
};

using RecordPtr = std::shared_ptr<const StepRecord>;

// The most new tokens one generation (or one served request) may ask for.
inline constexpr int kMaxNewLimit = static_cast<int>(setting::kMaxNew.hi);

struct GenerateOptions {
  int max_new = 64;               // new tokens, including the prefill's
  std::vector<std::string> stop;  // stop strings
  SamplerSettings sampler;
  CacheMode mode = CacheMode::kKV;
  bool ignore_eos = false;  // keep going past the end-of-text token (soak runs fill the context)
  KVSettings kv;            // cache layout: dtype, window + sinks, paging (both modes run it)
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
  int n_forwards_ = 0;  // forwards run in this generation (records are handed out, not kept)
  bool fork_reused_cache_ = false;
};

// A paged record's pages as runs: from kv_held, kv_held_block and kv_held_refs
// where it holds them, else its kv_page_runs. Empty when not paged.
std::vector<PageRun> page_runs(const StepRecord& r);

// The record of a forced choice (what Generator::fork returns): a copy of
// record `at` (its forward, logits, attention and counters are what ran) with
// `token` as its choice and no stop. prob = the token's probability in the
// distribution `at` drew from: the repetition penalty on `prefix` (the tokens
// before `at`), then temperature, over the stored logits; from at.top when the
// logits were dropped; 0 when neither has it. Throws kvscope::Error for a
// token outside the vocabulary.
RecordPtr make_forced_record(const StepRecord& at, int token, const std::vector<int>& prefix, const Tokenizer& tok);

}  // namespace kvscope
