// Which requests a serving step computes, and how many of their tokens: the
// rules of vLLM's V1 scheduler, pure (no model). The driver (server.h) runs
// the forward the plan asks for and reports the tokens it sampled.
// - Each step has a token budget T. Running requests go first, in admission
//   order: a decode token each, or the next chunk of a prompt (chunked
//   prefill) while the budget lasts; then waiting requests in arrival order
//   while the budget, the pool and --max-running allow (none in a step that
//   preempted).
// - Admission takes the blocks the scheduled tokens need now. With prefix
//   caching a request first takes the cached full blocks its tokens start
//   with (at most (length - 1) / B of them: the last token is always
//   computed, its logits choose the next one).
// - A running request that needs a block when none is free preempts the most
//   recently admitted running request (possibly itself): its blocks are freed,
//   it loses what it computed and goes back to the front of the waiting queue,
//   to recompute its prompt and generated tokens on readmission.
// - Static policy: requests are admitted only when nothing runs, so a batch
//   holds its places until its longest request ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "model/kv/kv_layout.h"
#include "model/serving/block_pool.h"

namespace kvscope {

enum class ServePolicy { kContinuous, kStatic };
const char* to_string(ServePolicy p);  // "continuous" / "static"

struct SchedulerConfig {
  // The pool's page size is the cache layout's (KVLayout::block), given to the Scheduler beside this.
  int pool_blocks = 256;
  int max_batch_tokens = 512;  // T: positions one step computes at most
  int max_running = 16;        // R
  ServePolicy policy = ServePolicy::kContinuous;
  bool prefix_caching = false;
};

// A request as the scheduler sees it: its prompt's token ids and arrival step.
struct SchedRequest {
  std::vector<int> prompt;
  int arrive = 0;
};

enum class ReqState { kPending, kWaiting, kRunning, kDone };

// Positions [first, first + n) of request `req`'s tokens, computed this step.
// `samples`: the chunk ends at its last token, whose logits choose the next.
struct Chunk {
  int req = 0;
  int first = 0, n = 0;
  bool samples = false;
  bool prefill() const { return n > 1 || !samples; }  // a prompt (or recompute) chunk, else a decode token
};

struct Plan {
  int step = 0;
  std::vector<Chunk> chunks;   // running first (admission order), then the admitted
  std::vector<int> admitted;   // requests admitted this step
  std::vector<int> preempted;  // requests preempted this step
  int prefix_hit_blocks = 0;   // cached blocks the admitted requests took
};

// What the driver sampled for a chunk with `samples`.
struct Sampled {
  int req = 0;
  int token = 0;
  bool finished = false;  // the request stops (max_new, end of text, context full)
};

class Scheduler {
 public:
  // `block`: positions per pool block (the cache layout's page size).
  Scheduler(const SchedulerConfig& c, int block);

  // Requests are numbered in the order added; arrival ties keep that order.
  int add(const SchedRequest& r);

  // The next step's plan (steps are numbered from 0). Throws kvscope::Error
  // when requests remain but nothing can be scheduled.
  Plan schedule(int step);
  // After the forward: the chunks' positions are computed (their full blocks
  // join the prefix cache), sampled tokens append, finished requests free
  // their blocks.
  void complete(const Plan& p, const std::vector<Sampled>& sampled);

  bool all_done() const;
  // The earliest arrival among requests not yet arrived, or -1.
  int next_arrival() const;

  const SchedulerConfig& config() const { return c_; }
  int block() const { return block_; }
  const BlockPool& pool() const { return pool_; }
  ReqState state(int req) const { return reqs_.at(static_cast<size_t>(req)).state; }
  const std::vector<int>& tokens(int req) const { return reqs_.at(static_cast<size_t>(req)).tokens; }
  const std::vector<int>& blocks(int req) const { return reqs_.at(static_cast<size_t>(req)).blocks; }
  int computed(int req) const { return reqs_.at(static_cast<size_t>(req)).computed; }
  int preemptions(int req) const { return reqs_.at(static_cast<size_t>(req)).preemptions; }
  const std::vector<int>& running() const { return running_; }
  std::vector<int> waiting() const { return {waiting_.begin(), waiting_.end()}; }
  int preemptions_total() const { return preemptions_total_; }
  int prefix_hit_blocks_total() const { return hits_total_; }

 private:
  struct Req {
    std::vector<int> tokens;  // prompt + generated
    int arrive = 0;
    ReqState state = ReqState::kPending;
    int computed = 0;           // positions whose K/V the pool holds
    std::vector<int> blocks;    // pool blocks of positions [0, blocks * B)
    std::vector<int64_t> keys;  // prefix keys of the full blocks of `tokens` (computed lazily)
    int keyed = 0;              // blocks[0, keyed) offered to the prefix cache
    int preemptions = 0;
  };
  int blocks_for(int positions) const { return kv_pages(positions, block_); }
  int64_t block_key(Req& r, int j);
  void arrive(int step);
  bool schedule_running(Plan& p, int& budget);
  void admit_waiting(Plan& p, int& budget);
  int prefix_hits(Req& r, std::vector<int>& hit_blocks);
  void preempt_last(Plan& p);

  SchedulerConfig c_;
  int block_ = 0;
  BlockPool pool_;
  std::vector<Req> reqs_;
  std::vector<int> running_;  // admission order
  std::deque<int> waiting_;
  int preemptions_total_ = 0, hits_total_ = 0;
};

}  // namespace kvscope
