// Serving many requests from one paged KV pool: each step() runs the
// scheduler's plan (scheduler.h) as one batched forward over a shared
// KVCache, samples each request's next token with its own sampler, and
// yields an immutable ServeStep record. The scheduler's pool blocks map onto
// the cache's blocks: a prefix hit builds the request's sequence on the
// cached blocks (KVCache::add_sequence_on), and a cached-but-free block stays
// retained in the cache until the scheduler evicts its key.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/index_check.h"
#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "model/serving/scheduler.h"

namespace kvscope {

struct ServeRequest {
  std::string id;
  std::vector<int> prompt;  // token ids
  int max_new = 16;
  int arrive = 0;  // the step at which it enters the waiting queue
  SamplerSettings sampler;
};

struct ServeOptions {
  // The cache's layout: its row format and page size (the pool's blocks); serving keeps every position, so
  // no window or eviction (Server refuses them).
  KVLayout kv = paged_layout(kDefaultKvBlock);
  SchedulerConfig sched;
  // Bytes of attention rows the records may keep (ServeEntry::attn), over
  // the whole run: the view's rays. 0 (the CLI's): none, and the forward
  // copies none out.
  int64_t attention_budget = 0;
};

// One request's positions [first, first + n) in a step's batch.
struct ServeEntry {
  int req = 0;
  bool prefill = false;  // a prompt chunk (or recompute), else one decode token
  int first = 0, n = 0;
  int token = -1;  // the token its last position's logits chose, -1 when none (mid-prompt chunk)
  float prob = 0;  // the probability its sampler gave `token`
  // The attention of its last position (the newest query) over the request's
  // keys [0, first + n), every layer and head, as this step's batched forward
  // computed it; empty when not kept (ServeOptions::attention_budget).
  std::vector<float> attn;  // (layer, head, first + n)
  float attention(int n_head, int layer, int head, int key) const {
    KVSCOPE_CHECK_INDEX("attention head", head, n_head);
    KVSCOPE_CHECK_INDEX("attention key", key, first + n);
    // (the layers the buffer holds: the head and key checks above rule out an empty row)
    KVSCOPE_CHECK_INDEX("attention layer", layer,
                        attn.size() / (static_cast<size_t>(n_head) * static_cast<size_t>(first + n)));
    return attn[(static_cast<size_t>(layer) * n_head + head) * static_cast<size_t>(first + n) + key];
  }
};

// Pool occupancy in slots (positions): what tokens hold, what the paged pool
// allocated, and what one contiguous reservation of the context per running
// request would have held.
struct SlotCounts {
  int64_t live = 0, paged = 0, contiguous = 0;
};

struct ServeStep {
  int step = 0;
  std::vector<int> running;  // requests running after scheduling (the batch's), admission order
  std::vector<int> waiting;  // requests waiting after scheduling, queue order
  std::vector<ServeEntry> entries;
  std::vector<int> admitted, preempted, finished;
  int blocks_used = 0, blocks_free = 0, blocks_cached = 0;  // after the step; cached = free but keyed
  int prefix_hit_blocks = 0;
  // The pool after the step, for a view to draw: each running request's pool
  // blocks (aligned with `running_after`), and whether each pool block is
  // free but still cached (a block no running request holds and not cached is free).
  std::vector<int> running_after;
  std::vector<std::vector<int>> tables;  // (running_after, blocks)
  std::vector<uint8_t> block_cached;     // (pool block)
  int positions = 0;                     // positions this forward computed
  SlotCounts slots;
  uint64_t flops = 0;
  double ms = 0;      // forward + sampling
  double end_ms = 0;  // since serving began
};

struct ServeResult {
  std::vector<int> tokens;  // generated (the end-of-text token included when it stopped there)
  StopReason reason = StopReason::kNone;
  int first_token_step = -1, finish_step = -1;
  double arrive_ms = -1, first_token_ms = -1, finish_ms = -1;  // since serving began
  int preemptions = 0;
};

// Totals over the steps of a run (the summary record).
struct ServeTotals {
  int steps = 0, preemptions = 0, prefix_hit_blocks = 0;
  int64_t positions = 0, prefill_positions = 0, decode_positions = 0, generated = 0;
  int64_t blocks_used_sum = 0;
  int blocks_used_peak = 0;
  SlotCounts slots_sum;  // summed over steps
  uint64_t flops = 0;
  double last_end_ms = 0;
  void add(const ServeStep& s);
};

class Server {
 public:
  // Throws kvscope::Error for a request the model or the pool cannot take.
  Server(std::shared_ptr<const Model> model, std::vector<ServeRequest> reqs, const ServeOptions& opt);

  // Adds a request (a line of a stream read while serving): it arrives at
  // its `arrive` step or the next step, whichever is later. Returns its index
  // (into requests()); throws as the constructor does.
  int add(ServeRequest r);
  // Runs the next step; nullptr once every request is done.
  std::shared_ptr<const ServeStep> step();
  bool done() const { return sched_.all_done(); }

  const Model& model() const { return *model_; }
  const std::vector<ServeRequest>& requests() const { return reqs_; }
  // A request's generated text, as `generate` prints it (the end-of-text token removed).
  std::string text(int req) const;
  const ServeResult& result(int req) const { return results_.at(static_cast<size_t>(req)); }
  const Scheduler& scheduler() const { return sched_; }
  const KVCache& cache() const { return cache_; }
  double elapsed_ms() const;

 private:
  void sync_retained();
  void map_blocks(int req);
  void open_sequences(const Plan& p);
  std::vector<Sampled> sample(const Plan& p, const ForwardOutput& out, ServeStep& rec);
  void keep_attention(const ForwardOutput& out, ServeStep& rec);
  StopReason stop_reason(int req, int token) const;
  SlotCounts slot_counts() const;

  std::shared_ptr<const Model> model_;
  std::vector<ServeRequest> reqs_;
  ServeOptions opt_;
  Engine engine_;
  KVCache cache_;
  Scheduler sched_;
  std::vector<Sampler> samplers_;
  std::vector<ServeResult> results_;
  std::vector<SeqId> seq_;      // (request) its cache sequence, -1 when none
  std::vector<int> phys_;       // (pool block) the cache block holding its rows, -1 when never written
  std::vector<bool> retained_;  // (pool block) its cache block retained for the prefix cache
  int step_ = 0;
  int64_t attention_left_ = 0;  // bytes of ServeOptions::attention_budget not spent yet
  std::chrono::steady_clock::time_point t0_;
};

// The pool blocks a request needs at its longest: prompt + max_new - 1
// positions (the last token is never run), at most the context.
int blocks_needed(int n_prompt, int max_new, int n_ctx, int block);

}  // namespace kvscope
