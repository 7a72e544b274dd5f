#include "app/session/history.h"

#include <algorithm>
#include <string>

#include "model/core/error.h"

namespace kvscope {
namespace {

template <class T>
uint64_t vec_bytes(const std::vector<T>& v) {
  return static_cast<uint64_t>(v.capacity()) * sizeof(T);
}

uint64_t string_heap(const std::string& s) {
  // libstdc++ keeps up to 15 chars inline (small-string optimisation).
  return s.capacity() > 15 ? static_cast<uint64_t>(s.capacity()) + 1 : 0;
}

constexpr uint64_t kControlBlock = 32;  // make_shared's control block, roughly

}  // namespace

uint64_t attention_bytes(const StepForward& r) {
  return vec_bytes(r.attn) + vec_bytes(r.q);  // the weights and the query rows they came from
}
uint64_t logits_bytes(const StepChoice& r) {
  return vec_bytes(r.logits);
}
uint64_t kv_rows_bytes(const StepForward& r) {
  return vec_bytes(r.k) + vec_bytes(r.v);
}

uint64_t cache_bytes(const StepCache& r) {
  uint64_t b = vec_bytes(r.kv_held.runs()) + vec_bytes(r.kv_page_runs) + vec_bytes(r.kv_qerr);
  b += vec_bytes(r.kv_held_by_layer) + vec_bytes(r.kv_score_by_layer) + vec_bytes(r.kv_dropped_by_layer);
  for (const auto& v : r.kv_held_by_layer) b += vec_bytes(v);
  for (const auto& v : r.kv_score_by_layer) b += vec_bytes(v);
  for (const auto& v : r.kv_dropped_by_layer) b += vec_bytes(v);
  b += vec_bytes(r.kv_held_by_head);
  for (const auto& l : r.kv_held_by_head) {
    b += vec_bytes(l);
    for (const auto& v : l) b += vec_bytes(v);
  }
  return b;
}

uint64_t record_bytes(const StepRecord& r) {
  uint64_t b = sizeof(StepRecord) + kControlBlock;
  b += attention_bytes(r) + logits_bytes(r) + kv_rows_bytes(r) + cache_bytes(r);
  b += vec_bytes(r.top) + vec_bytes(r.prompt_tokens) + vec_bytes(r.prompt_pieces);
  for (const std::string& s : r.prompt_pieces) b += string_heap(s);
  b += string_heap(r.piece) + string_heap(r.raw_piece);
  return b;
}

namespace {

uint64_t tokens_bytes(const std::vector<Beam>& beams) {
  uint64_t b = 0;
  for (const Beam& x : beams) b += vec_bytes(x.tokens);
  return b;
}

uint64_t tokens_bytes(const std::vector<Hypothesis>& hyps) {
  uint64_t b = 0;
  for (const Hypothesis& h : hyps) b += vec_bytes(h.tokens);
  return b;
}

uint64_t strings_bytes(const std::vector<std::string>& v) {
  uint64_t b = vec_bytes(v);
  for (const std::string& s : v) b += string_heap(s);
  return b;
}

}  // namespace

uint64_t beam_tokens_bytes(const BeamStepRecord& r) {
  return (r.index == 0 ? 0 : tokens_bytes(r.expanded)) + tokens_bytes(r.running) + tokens_bytes(r.finished);
}

uint64_t record_bytes(const BeamStepRecord& r) {
  uint64_t b = sizeof(BeamStepRecord) + kControlBlock;
  b += vec_bytes(r.expanded) + vec_bytes(r.running) + vec_bytes(r.finished) + vec_bytes(r.candidates);
  b += tokens_bytes(r.expanded) + tokens_bytes(r.running) + tokens_bytes(r.finished);
  b += strings_bytes(r.candidate_pieces) + strings_bytes(r.prompt_pieces);
  return b;
}

uint64_t record_bytes(const SpecIteration& it) {
  uint64_t b = sizeof(SpecIteration) + kControlBlock;
  b += vec_bytes(it.drafted) + vec_bytes(it.emitted) + vec_bytes(it.prompt);
  b += strings_bytes(it.emitted_pieces) + strings_bytes(it.drafted_pieces) + strings_bytes(it.prompt_pieces);
  b += string_heap(it.next_piece);
  return b;
}

BeamRecordPtr strip_beam_tokens(const BeamStepRecord& r) {
  auto out = std::make_shared<BeamStepRecord>(r);
  if (r.index != 0)
    for (Beam& b : out->expanded) std::vector<int>().swap(b.tokens);
  for (Beam& b : out->running) std::vector<int>().swap(b.tokens);
  for (Hypothesis& h : out->finished) std::vector<int>().swap(h.tokens);
  return out;
}

unsigned detail_of(const StepRecord& r) {
  unsigned d = 0;
  if (!r.attn.empty() && r.n_rows > 0) d |= kDetailAttention;
  if (!r.logits.empty()) d |= kDetailLogits;
  if (!r.k.empty() || !r.v.empty()) d |= kDetailKV;
  if (!r.kv_page_runs.empty()) d |= kDetailPages;
  return d;
}

RecordPtr strip_detail(const StepRecord& r, unsigned drop) {
  auto out = std::make_shared<StepRecord>(r);
  if (drop & kDetailAttention) {
    std::vector<float>().swap(out->attn);
    std::vector<float>().swap(out->q);
    out->n_rows = 0;
  }
  if (drop & kDetailLogits) std::vector<float>().swap(out->logits);
  if (drop & kDetailKV) {
    std::vector<float>().swap(out->k);
    std::vector<float>().swap(out->v);
  }
  if (drop & kDetailPages) std::vector<PageRun>().swap(out->kv_page_runs);
  return out;
}

void History::clear() {
  records_.clear();
  bytes_ = 0;
}

void History::push(RecordPtr rec) {
  if (!rec) throw Error("History::push: null record");
  if (records_.empty() && !rec->prefill) {
    throw Error("History::push: the first record must be the prefill (got step " + std::to_string(rec->index) + ")");
  }
  bytes_ += record_bytes(*rec);
  records_.push_back(std::move(rec));
}

void History::truncate(size_t n) {
  while (records_.size() > n) {
    bytes_ -= record_bytes(*records_.back());
    records_.pop_back();
  }
}

void History::replace(size_t i, RecordPtr rec) {
  if (i >= records_.size() || !rec) throw Error("History::replace: index " + std::to_string(i) + " out of range");
  bytes_ -= record_bytes(*records_[i]);
  bytes_ += record_bytes(*rec);
  records_[i] = std::move(rec);
}

std::vector<RecordPtr> History::upto(size_t i) const {
  const size_t n = std::min(i + 1, records_.size());
  return std::vector<RecordPtr>(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<int> History::tokens_before(size_t i) const {
  if (records_.empty()) return {};
  std::vector<int> t = records_[0]->prompt_tokens;
  for (size_t j = 0; j < i && j < records_.size(); ++j) t.push_back(records_[j]->token);
  return t;
}

}  // namespace kvscope
