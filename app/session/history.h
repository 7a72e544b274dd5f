// The timeline: every step's record is kept so the whole
// generation can be scrubbed, and memory stays bounded: above a budget the
// heavy detail of the oldest records is dropped (attention and logits first,
// then K/V rows) while their tokens, candidates and counters stay. The budget
// is enforced in one place, BranchTree (app/session/branches.h), over every explored
// branch at once; a History is one branch's records.
//
// Records are immutable and shared (RecordPtr); dropping detail replaces the
// History's pointer with a lighter copy. The memory is returned only when no
// one else holds the original: the tree is the records' one owner (the
// Generator hands each record out and keeps none).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/core/index_check.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"

namespace kvscope {

constexpr uint64_t kDefaultHistoryBudget = 256ull << 20;  // 256 MiB

// Bytes a record holds: the struct plus every vector's and string's heap
// storage (capacity). A decode step's attention grows with the context, so
// over a long generation the records' attention together grows with its
// square. Its cache picture is small but not constant: held positions are a
// run or two, eviction by score's per-layer lists are bounded by its budget,
// and a paged cache's pages are a run each, seq_len / block of them.
uint64_t record_bytes(const StepRecord& r);
// The same for beam search's steps and speculative decoding's iterations.
// A beam step's beams and hypotheses hold their whole token sequences, so
// these too grow with the square of the generation's length; a speculative
// iteration holds its K drafted tokens and counters (and the first, the
// prompt): it grows with nothing.
uint64_t record_bytes(const BeamStepRecord& r);
uint64_t record_bytes(const SpecIteration& it);
// Bytes of the token sequences of a beam step's beams and hypotheses (the
// prompt's beam in the first step aside: the whole search starts from it).
uint64_t beam_tokens_bytes(const BeamStepRecord& r);
// A copy of `r` without those sequences: every beam and hypothesis keeps its
// id, scores and parent, and its tokens can be rebuilt from the steps'
// candidates (beam_tokens in app/lessons/decode.h).
BeamRecordPtr strip_beam_tokens(const BeamStepRecord& r);

// Bytes of the heavy detail only, by kind, and of the cache picture (kept).
uint64_t attention_bytes(const StepForward& r);  // attn + q
uint64_t logits_bytes(const StepChoice& r);      // logits
uint64_t kv_rows_bytes(const StepForward& r);    // k + v
uint64_t cache_bytes(const StepCache& r);        // held runs, page runs, eviction lists, kv_qerr

// Which heavy detail a record still has.
enum DetailBits : unsigned {
  kDetailAttention = 1u << 0,  // attn (n_rows > 0)
  kDetailLogits = 1u << 1,     // logits
  kDetailKV = 1u << 2,         // k, v
  kDetailAll = kDetailAttention | kDetailLogits | kDetailKV,
  // A paged record's page runs (seq_len / block of them: a block of 1 over
  // a long context adds up): the last thing dropped, only when the budget
  // cannot hold them either. The rest of the cache picture always stays.
  kDetailPages = 1u << 3,
};
unsigned detail_of(const StepRecord& r);  // bits of what is non-empty

// A copy of `r` without the detail in `drop`: vectors emptied (and freed),
// n_rows = 0 when attention goes (so readers that check n_rows see none);
// n_kv, tokens, top candidates, prompt, sampler settings, the cache picture
// (StepCache; its page runs unless kDetailPages) and counters stay.
RecordPtr strip_detail(const StepRecord& r, unsigned drop);

// What the memory policy did (cumulative since the last clear()).
struct TrimReport {
  int attention_dropped = 0;    // records whose attention was dropped
  int logits_dropped = 0;       // records whose logits were dropped
  int kv_dropped = 0;           // records whose K/V rows were dropped
  int pages_dropped = 0;        // records whose page runs were dropped too
  int beam_tokens_dropped = 0;  // beam-search steps whose beams' token sequences were dropped
  uint64_t bytes_freed = 0;
  int first_full = 0;  // records [first_full, size) still have all their detail
  bool any() const { return attention_dropped || logits_dropped || kv_dropped || pages_dropped || beam_tokens_dropped; }
  // Accumulates another trim's counts (first_full is each owner's own business).
  void add_counts(const TrimReport& o) {
    attention_dropped += o.attention_dropped;
    logits_dropped += o.logits_dropped;
    kv_dropped += o.kv_dropped;
    pages_dropped += o.pages_dropped;
    beam_tokens_dropped += o.beam_tokens_dropped;
    bytes_freed += o.bytes_freed;
  }
};

class History {
 public:
  void clear();
  // Appends the next record (in generation order; the first is the prefill).
  void push(RecordPtr rec);
  // Keeps records [0, n) (a fork drops the later ones).
  void truncate(size_t n);

  size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  const RecordPtr& operator[](size_t i) const {
    KVSCOPE_CHECK_INDEX("history step", i, records_.size());
    return records_[i];
  }
  const RecordPtr& back() const { return records_.back(); }
  const std::vector<RecordPtr>& records() const { return records_; }

  // The scene at step i: records [0, i] (what the scene builder takes, with count i + 1).
  std::vector<RecordPtr> upto(size_t i) const;
  // Every token of the sequence before step i chose (prompt + tokens of records < i):
  // the Sampler's history for step i. Needs record 0 to be the prefill.
  std::vector<int> tokens_before(size_t i) const;
  // Detail still held by step i.
  unsigned detail(size_t i) const { return detail_of(*(*this)[i]); }

  uint64_t bytes() const { return bytes_; }  // sum of record_bytes

  // Replaces record i (BranchTree hands every holder one stripped copy).
  void replace(size_t i, RecordPtr rec);

 private:
  std::vector<RecordPtr> records_;
  uint64_t bytes_ = 0;
};

}  // namespace kvscope
