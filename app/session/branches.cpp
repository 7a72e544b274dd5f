#include "app/session/branches.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "model/core/error.h"
#include "model/core/overloaded.h"
#include "model/decoding/sampler.h"
#include "model/engine/engine.h"

namespace kvscope {

ForkCost fork_cost(const Config& c, int fork_pos, bool cache_reused) {
  if (fork_pos < 1) throw Error("fork_cost: fork position " + std::to_string(fork_pos) + " (expected >= 1)");
  ForkCost f;
  f.fork_pos = fork_pos;
  f.cache_reused = cache_reused;
  f.reused_positions = cache_reused ? fork_pos : 0;
  f.flops_reuse = forward_flops(c, 1, fork_pos + 1);
  f.flops_recompute = forward_flops(c, fork_pos + 1, fork_pos + 1);
  f.flops_next = cache_reused ? f.flops_reuse : f.flops_recompute;
  f.flops_saved = f.flops_recompute - f.flops_next;
  return f;
}

double Branch::prob() const {
  return std::exp(log_prob);
}

std::vector<int> branch_tokens(const Branch& b) {
  if (b.history.empty()) return {};
  std::vector<int> t = b.history.tokens_before(b.history.size());
  return t;
}

BranchTree::BranchTree(uint64_t budget_bytes, int keep_recent)
    : budget_(budget_bytes), keep_recent_(std::max(0, keep_recent)) {}

void BranchTree::clear() {
  branches_.clear();
  timeline_ = std::monostate{};
  current_ = -1;
  trim_ = TrimReport{};
}

int BranchTree::start() {
  Branch b;
  b.id = static_cast<int>(branches_.size());
  b.history = History();
  branches_.push_back(std::move(b));
  current_ = branches_.back().id;
  return current_;
}

Branch& BranchTree::mutable_branch(int id) {
  if (id < 0 || id >= static_cast<int>(branches_.size()))
    throw Error("branch " + std::to_string(id) + " does not exist (" + std::to_string(branches_.size()) + " explored)");
  return branches_[static_cast<size_t>(id)];
}

const Branch& BranchTree::branch(int id) const {
  return const_cast<BranchTree*>(this)->mutable_branch(id);
}

const std::vector<RecordPtr>& BranchTree::current_records() const {
  static const std::vector<RecordPtr> kNone;
  return current_ < 0 ? kNone : current_history().records();
}

void BranchTree::select(int id) {
  current_ = mutable_branch(id).id;
}

namespace {

double ln_prob(float p) {
  return p > 0 ? std::log(static_cast<double>(p)) : -INFINITY;
}

}  // namespace

void BranchTree::push(RecordPtr rec) {
  if (current_ < 0) start();
  Branch& b = mutable_branch(current_);
  if (!rec) throw Error("BranchTree::push: null record");
  if (rec->index != static_cast<int>(b.history.size())) {
    throw Error("BranchTree::push: record " + std::to_string(rec->index) + " does not follow the branch's " +
                std::to_string(b.history.size()) + " records");
  }
  b.log_prob += ln_prob(rec->prob);
  b.text += rec->raw_piece;
  b.history.push(std::move(rec));
  enforce_budget();
}

void BranchTree::push(const StepOutput& step) {
  std::visit(overloaded{
                 [this](const RecordPtr& r) { push(r); },
                 [this](const BeamRecordPtr& r) { push_beam(r); },
                 [this](const SpecIterationPtr& it) { push_spec(it); },
             },
             step);
}

namespace {

// The timeline of type T in `tl`, started if it holds none yet; a timeline of
// another strategy throws (one generation runs one strategy).
template <typename T>
T& strategy_timeline(StrategyTimeline& tl, const char* what) {
  if (std::holds_alternative<std::monostate>(tl)) tl = T{};
  T* t = std::get_if<T>(&tl);
  if (!t) throw Error(std::string("BranchTree: a ") + what + " in a generation of another decoding strategy");
  return *t;
}

}  // namespace

void BranchTree::push_beam(BeamRecordPtr rec) {
  if (!rec) throw Error("BranchTree::push_beam: null record");
  BeamTimeline& beams = strategy_timeline<BeamTimeline>(timeline_, "beam-search step");
  if (rec->index != static_cast<int>(beams.size())) {
    throw Error("BranchTree::push_beam: step " + std::to_string(rec->index) + " does not follow the " +
                std::to_string(beams.size()) + " steps held");
  }
  beams.push_back(std::move(rec));
  enforce_budget();
}

void BranchTree::push_spec(SpecIterationPtr it) {
  if (!it) throw Error("BranchTree::push_spec: null iteration");
  SpecTimeline& its = strategy_timeline<SpecTimeline>(timeline_, "speculative iteration");
  if (it->index != static_cast<int>(its.size())) {
    throw Error("BranchTree::push_spec: iteration " + std::to_string(it->index) + " does not follow the " +
                std::to_string(its.size()) + " iterations held");
  }
  its.push_back(std::move(it));
  enforce_budget();
}

const BeamTimeline& BranchTree::beam_records() const {
  static const BeamTimeline kNone;
  const BeamTimeline* b = std::get_if<BeamTimeline>(&timeline_);
  return b ? *b : kNone;
}

const SpecTimeline& BranchTree::spec_iterations() const {
  static const SpecTimeline kNone;
  const SpecTimeline* s = std::get_if<SpecTimeline>(&timeline_);
  return s ? *s : kNone;
}

int BranchTree::timeline_size() const {
  return std::visit(
      overloaded{
          [this](std::monostate) { return current_ < 0 ? 0 : static_cast<int>(current_branch().history.size()); },
          [](const auto& steps) { return static_cast<int>(steps.size()); },
      },
      timeline_);
}

int BranchTree::fork(RecordPtr forced, const ForkCost& cost) {
  if (!forced) throw Error("BranchTree::fork: null record");
  const Branch& parent = mutable_branch(current_);
  const int step = forced->index;
  if (step < 0 || step >= static_cast<int>(parent.history.size())) {
    throw Error("fork: step " + std::to_string(step) + " is not in the current branch (0.." +
                std::to_string(static_cast<int>(parent.history.size()) - 1) + ")");
  }
  Branch b;
  b.id = static_cast<int>(branches_.size());
  b.parent = parent.id;
  b.fork_step = step;
  b.forced_token = forced->token;
  b.fork = cost;
  b.history = History();
  for (int i = 0; i < step; ++i) {
    const RecordPtr& r = parent.history[static_cast<size_t>(i)];
    b.log_prob += ln_prob(r->prob);
    b.text += r->raw_piece;
    b.history.push(r);
  }
  b.log_prob += ln_prob(forced->prob);
  b.text += forced->raw_piece;
  b.history.push(std::move(forced));
  branches_.push_back(std::move(b));
  current_ = branches_.back().id;
  enforce_budget();
  return current_;
}

int BranchTree::find_fork(int parent, int step, int token) const {
  for (const Branch& b : branches_)
    if (b.parent == parent && b.fork_step == step && b.forced_token == token) return b.id;
  return -1;
}

std::vector<int> BranchTree::children(int id) const {
  std::vector<int> out;
  for (const Branch& b : branches_)
    if (b.parent == id) out.push_back(b.id);
  return out;
}

std::vector<TreeRow> BranchTree::rows() const {
  std::vector<TreeRow> out;
  std::function<void(int, int)> visit = [&](int id, int depth) {
    out.push_back({id, depth});
    for (int c : children(id)) visit(c, depth + 1);
  };
  for (const Branch& b : branches_)
    if (b.parent < 0) visit(b.id, 0);
  return out;
}

int BranchTree::shared_positions(int a, int b) const {
  const std::vector<int> ta = branch_tokens(branch(a)), tb = branch_tokens(branch(b));
  const size_t n = std::min(ta.size(), tb.size());
  size_t i = 0;
  while (i < n && ta[i] == tb[i]) ++i;
  return static_cast<int>(i);
}

uint64_t BranchTree::flops_saved_total() const {
  uint64_t s = 0;
  for (const Branch& b : branches_) s += b.fork.flops_saved;
  return s;
}

uint64_t BranchTree::bytes() const {
  std::unordered_set<const StepRecord*> seen;
  uint64_t total = 0;
  for (const Branch& b : branches_)
    for (const RecordPtr& r : b.history.records())
      if (seen.insert(r.get()).second) total += record_bytes(*r);
  for (const BeamRecordPtr& r : beam_records()) total += record_bytes(*r);
  for (const SpecIterationPtr& it : spec_iterations()) total += record_bytes(*it);
  return total;
}

void BranchTree::set_budget(uint64_t b) {
  budget_ = b;
  enforce_budget();
}

TrimReport BranchTree::enforce_budget() {
  TrimReport now;
  now.first_full = trim_.first_full;
  if (budget_ == 0) return now;
  uint64_t total = bytes();
  if (total <= budget_) return now;
  const unsigned passes[3] = {kDetailAttention | kDetailLogits, kDetailKV, kDetailPages};
  for (unsigned drop : passes) {
    trim_branches(drop, total, now);
    if (total <= budget_) break;
  }
  if (total > budget_) trim_beams(total, now);
  trim_.add_counts(now);
  trim_.first_full = now.first_full;
  return now;
}

// One pass over the branches: drops `drop` from the oldest step on.
void BranchTree::trim_branches(unsigned drop, uint64_t& total, TrimReport& now) {
  size_t max_len = 0;
  for (const Branch& b : branches_) max_len = std::max(max_len, b.history.size());
  for (size_t i = 0; i < max_len && total > budget_; ++i) {
    // Records shared by several branches sit at the same index in each: strip
    // once, hand the same lighter copy to every holder.
    std::unordered_map<const StepRecord*, RecordPtr> stripped;
    std::vector<RecordPtr> originals;  // alive until every holder is updated (keys stay unique)
    for (Branch& b : branches_) {
      if (i >= b.history.size()) continue;
      const bool protected_rec = b.id == current_ && i + static_cast<size_t>(keep_recent_) >= b.history.size();
      if (protected_rec) continue;
      const RecordPtr& r = b.history[i];
      auto it = stripped.find(r.get());
      if (it == stripped.end()) {
        const unsigned have = detail_of(*r) & drop;
        if (!have) continue;
        // A record the current branch protects is shared: leave it whole.
        const Branch& cur = branches_[static_cast<size_t>(current_)];
        if (i < cur.history.size() && cur.history[i].get() == r.get() &&
            i + static_cast<size_t>(keep_recent_) >= cur.history.size())
          continue;
        const uint64_t before = record_bytes(*r);
        originals.push_back(r);
        RecordPtr light = strip_detail(*r, have);
        const uint64_t freed = before - record_bytes(*light);
        total -= freed;
        now.bytes_freed += freed;
        if (have & kDetailAttention) ++now.attention_dropped;
        if (have & kDetailLogits) ++now.logits_dropped;
        if (have & kDetailKV) ++now.kv_dropped;
        if (have & kDetailPages) ++now.pages_dropped;
        it = stripped.emplace(r.get(), std::move(light)).first;
      }
      b.history.replace(i, it->second);
      now.first_full = std::max(now.first_full, static_cast<int>(i) + 1);
    }
  }
}

// Beam-search steps, oldest first, the newest keep_recent aside.
void BranchTree::trim_beams(uint64_t& total, TrimReport& now) {
  BeamTimeline* beams = std::get_if<BeamTimeline>(&timeline_);
  if (!beams) return;
  for (size_t i = 0; i + static_cast<size_t>(keep_recent_) < beams->size() && total > budget_; ++i) {
    BeamRecordPtr& r = (*beams)[i];
    if (beam_tokens_bytes(*r) == 0) continue;
    const uint64_t before = record_bytes(*r);
    r = strip_beam_tokens(*r);
    const uint64_t freed = before - record_bytes(*r);
    total -= freed;
    now.bytes_freed += freed;
    ++now.beam_tokens_dropped;
  }
}

}  // namespace kvscope
