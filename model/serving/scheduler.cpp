#include "model/serving/scheduler.h"

#include <algorithm>
#include <string>

#include "model/core/error.h"

namespace kvscope {

const char* to_string(ServePolicy p) {
  return p == ServePolicy::kStatic ? "static" : "continuous";
}

Scheduler::Scheduler(const SchedulerConfig& c, int block)
    : c_(c), block_(block), pool_(c.pool_blocks, c.prefix_caching) {
  if (c.pool_blocks < 1 || block < 1 || c.max_batch_tokens < 1 || c.max_running < 1)
    throw Error("scheduler: pool blocks, block size, token budget and max running must be >= 1");
}

int Scheduler::add(const SchedRequest& r) {
  if (r.prompt.empty()) throw Error("scheduler: a request needs at least one prompt token");
  Req q;
  q.tokens = r.prompt;
  q.arrive = std::max(0, r.arrive);
  reqs_.push_back(std::move(q));
  return static_cast<int>(reqs_.size()) - 1;
}

bool Scheduler::all_done() const {
  return std::all_of(reqs_.begin(), reqs_.end(), [](const Req& r) { return r.state == ReqState::kDone; });
}

int Scheduler::next_arrival() const {
  int best = -1;
  for (const Req& r : reqs_)
    if (r.state == ReqState::kPending && (best < 0 || r.arrive < best)) best = r.arrive;
  return best;
}

void Scheduler::arrive(int step) {
  std::vector<int> now;
  for (size_t i = 0; i < reqs_.size(); ++i)
    if (reqs_[i].state == ReqState::kPending && reqs_[i].arrive <= step) now.push_back(static_cast<int>(i));
  std::stable_sort(now.begin(), now.end(), [&](int a, int b) {
    return reqs_[static_cast<size_t>(a)].arrive < reqs_[static_cast<size_t>(b)].arrive;
  });
  for (int i : now) {
    reqs_[static_cast<size_t>(i)].state = ReqState::kWaiting;
    waiting_.push_back(i);
  }
}

int64_t Scheduler::block_key(Req& r, int j) {
  while (static_cast<int>(r.keys.size()) <= j) {
    const size_t k = r.keys.size();
    const int64_t parent = k == 0 ? BlockPool::kNoKey : r.keys.back();
    const auto first = r.tokens.begin() + static_cast<std::ptrdiff_t>(k * static_cast<size_t>(block_));
    r.keys.push_back(pool_.key(parent, std::vector<int>(first, first + block_)));
  }
  return r.keys[static_cast<size_t>(j)];
}

void Scheduler::preempt_last(Plan& p) {
  const int id = running_.back();
  running_.pop_back();
  Req& r = reqs_[static_cast<size_t>(id)];
  pool_.release(r.blocks);
  r.blocks.clear();
  r.computed = 0;
  r.keyed = 0;
  r.state = ReqState::kWaiting;
  ++r.preemptions;
  ++preemptions_total_;
  waiting_.push_front(id);
  p.preempted.push_back(id);
}

bool Scheduler::schedule_running(Plan& p, int& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const int id = running_[i];
    Req& r = reqs_[static_cast<size_t>(id)];
    const int len = static_cast<int>(r.tokens.size());
    const int n = std::min(len - r.computed, budget);
    if (n <= 0) continue;
    const int need = blocks_for(r.computed + n) - static_cast<int>(r.blocks.size());
    bool self = false;
    while (need > pool_.free_count() && !self) {
      self = running_.back() == id;
      preempt_last(p);
    }
    if (self) break;
    for (int k = 0; k < need; ++k) r.blocks.push_back(pool_.allocate());
    p.chunks.push_back(Chunk{id, r.computed, n, r.computed + n == len});
    budget -= n;
  }
  return !p.preempted.empty();
}

int Scheduler::prefix_hits(Req& r, std::vector<int>& hit) {
  hit.clear();
  if (!c_.prefix_caching) return 0;
  const int max_hits = (static_cast<int>(r.tokens.size()) - 1) / block_;
  for (int j = 0; j < max_hits; ++j) {
    const int b = pool_.lookup(block_key(r, j));
    if (b < 0) break;
    hit.push_back(b);
  }
  return static_cast<int>(hit.size());
}

void Scheduler::admit_waiting(Plan& p, int& budget) {
  if (c_.policy == ServePolicy::kStatic && !running_.empty()) return;
  std::vector<int> hit;
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < c_.max_running) {
    const int id = waiting_.front();
    Req& r = reqs_[static_cast<size_t>(id)];
    const int hits = prefix_hits(r, hit);
    const int computed = hits * block_, len = static_cast<int>(r.tokens.size());
    const int n = std::min(len - computed, budget);
    const int need = blocks_for(computed + n) - hits;
    const int hit_free =
        static_cast<int>(std::count_if(hit.begin(), hit.end(), [&](int b) { return pool_.refs(b) == 0; }));
    if (need > pool_.free_count() - hit_free) break;
    for (int b : hit) pool_.ref(b);
    r.blocks = hit;
    for (int k = 0; k < need; ++k) r.blocks.push_back(pool_.allocate());
    r.computed = computed;
    r.keyed = hits;
    r.state = ReqState::kRunning;
    running_.push_back(id);
    waiting_.pop_front();
    p.admitted.push_back(id);
    p.prefix_hit_blocks += hits;
    p.chunks.push_back(Chunk{id, computed, n, computed + n == len});
    budget -= n;
  }
}

Plan Scheduler::schedule(int step) {
  arrive(step);
  Plan p;
  p.step = step;
  int budget = c_.max_batch_tokens;
  if (!schedule_running(p, budget)) admit_waiting(p, budget);
  hits_total_ += p.prefix_hit_blocks;
  if (p.chunks.empty() && p.preempted.empty() && !waiting_.empty())
    throw Error("scheduler: step " + std::to_string(step) + " can schedule nothing while " +
                std::to_string(waiting_.size()) + " requests wait (a request larger than the pool?)");
  return p;
}

void Scheduler::complete(const Plan& p, const std::vector<Sampled>& sampled) {
  for (const Chunk& c : p.chunks) {
    Req& r = reqs_.at(static_cast<size_t>(c.req));
    if (r.state != ReqState::kRunning || r.computed != c.first)
      throw Error("scheduler: completed chunk of request " + std::to_string(c.req) + " does not continue it");
    r.computed += c.n;
    if (!c_.prefix_caching) continue;
    for (; r.keyed < r.computed / block_; ++r.keyed)
      pool_.set_key(r.blocks[static_cast<size_t>(r.keyed)], block_key(r, r.keyed));
  }
  for (const Sampled& s : sampled) {
    Req& r = reqs_.at(static_cast<size_t>(s.req));
    if (r.state != ReqState::kRunning || r.computed != static_cast<int>(r.tokens.size()))
      throw Error("scheduler: a token sampled for request " + std::to_string(s.req) + " that had none to sample");
    r.tokens.push_back(s.token);
    if (!s.finished) continue;
    pool_.release(r.blocks);
    r.blocks.clear();
    r.state = ReqState::kDone;
    running_.erase(std::find(running_.begin(), running_.end(), s.req));
  }
}

}  // namespace kvscope
