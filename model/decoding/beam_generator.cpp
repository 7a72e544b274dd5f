#include "model/decoding/beam_generator.h"

#include <algorithm>
#include <chrono>

#include "model/core/error.h"
#include "model/decoding/sampler.h"
#include "model/decoding/setting_ranges.h"

namespace kvscope {
BeamGenerator::BeamGenerator(std::shared_ptr<const Model> model) : model_(std::move(model)), engine_(*model_) {}

void BeamGenerator::start(const std::string& prompt, const BeamOptions& opt) {
  if (prompt.empty()) throw Error("prompt is empty (expected at least one character of text)");
  start_tokens(model_->tokenizer.encode_prompt(prompt), opt);
}

void BeamGenerator::start_tokens(const std::vector<int>& prompt, const BeamOptions& opt) {
  const Config& c = model_->config;
  if (opt.n_beams < setting::kBeams.lo || opt.n_beams > setting::kBeams.hi)
    throw Error(std::string(setting::kBeams.flag) + " must be in " + std::to_string(setting::kBeams.lo) + ".." +
                std::to_string(setting::kBeams.hi) + ", got " + std::to_string(opt.n_beams));
  if (opt.max_new < 1) throw Error("max_new must be at least 1, got " + std::to_string(opt.max_new));
  if (prompt.empty()) throw Error("prompt is empty (expected at least one token)");
  if (static_cast<int>(prompt.size()) > c.n_positions) {
    throw Error("prompt is " + std::to_string(prompt.size()) + " tokens, longer than the context: " + model_->name +
                " has n_positions = " + std::to_string(c.n_positions));
  }
  for (int t : prompt) {
    if (t < 0 || t >= c.vocab_size) {
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                  std::to_string(c.vocab_size - 1) + ")");
    }
  }
  BeamSettings s;
  s.n_beams = opt.n_beams;
  s.length_penalty = opt.length_penalty;
  s.eos = c.eos_token_ids;
  // The last token may sit at position n_positions: chosen by a forward
  // over a full context, never fed to one.
  s.max_length = std::min(static_cast<int>(prompt.size()) + opt.max_new, c.n_positions + 1);
  search_ = std::make_unique<BeamSearch>(s, prompt);
  max_new_ = opt.max_new;
  check_kv_block(opt.block, c);
  KVLayout layout = KVLayout::for_model(c);
  layout.block = opt.block;
  layout.dtype = opt.dtype;
  cache_.reset(layout);  // validates (q8_0 / q4_0 need rows of a multiple of 32 values)
  seqs_.assign(1, cache_.add_sequence());
  reason_ = StopReason::kNone;
  steps_ = 0;
  ms_total_ = 0;
  flops_total_ = 0;
}

BeamRecordPtr BeamGenerator::step() {
  if (!search_ || done()) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = std::make_shared<BeamStepRecord>();
  rec->index = steps_++;
  rec->expanded = search_->running();

  // One batched forward: the new position of every running beam (the whole
  // prompt the first time), logits for each beam's last entry.
  std::vector<BatchEntry> batch;
  std::vector<size_t> logit_entry;  // per beam: its batch index with logits
  for (size_t b = 0; b < rec->expanded.size(); ++b) {
    const std::vector<int>& toks = rec->expanded[b].tokens;
    const SeqId seq = seqs_[b];
    for (int pos = cache_.length(seq); pos < static_cast<int>(toks.size()); ++pos) {
      const bool last = pos + 1 == static_cast<int>(toks.size());
      if (last) logit_entry.push_back(batch.size());
      batch.push_back(BatchEntry{seq, pos, toks[static_cast<size_t>(pos)], last, false});
    }
  }
  ForwardOutput out = engine_.forward(batch, cache_, ForwardTaps{false, false, false});
  // What the step's forward leaves in the cache, before the forks: every
  // running beam's sequence with its new row.
  rec->kv_bytes_shared = cache_.bytes();
  for (SeqId s : seqs_) rec->kv_bytes_independent += cache_.bytes_alone(s);
  rec->positions = static_cast<int>(batch.size());
  rec->forwards = 1;
  rec->flops = out.flops;
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
  std::vector<std::vector<double>> rows;
  for (size_t want : logit_entry) {
    const auto it = std::find(out.logit_entries.begin(), out.logit_entries.end(), static_cast<int>(want));
    if (it == out.logit_entries.end()) throw Error("beam search: the forward returned no logits for a beam");
    const size_t row = static_cast<size_t>(it - out.logit_entries.begin());
    rows.push_back(log_softmax(out.logits.data() + row * vocab, vocab));
  }
  rec->candidates = search_->step(rows);
  const Tokenizer& tok = model_->tokenizer;
  for (const BeamCandidate& c : rec->candidates) rec->candidate_pieces.push_back(tok.display_piece(c.token));
  if (rec->index == 0) {
    for (int t : rec->expanded.front().tokens) rec->prompt_pieces.push_back(tok.display_piece(t));
  }

  // Each new running beam forks its parent's sequence (sharing every block);
  // the parents are then released, so what no beam continues is freed.
  std::vector<SeqId> next;
  for (const Beam& b : search_->running()) {
    const SeqId parent = seqs_[static_cast<size_t>(b.parent)];
    next.push_back(cache_.fork(parent, cache_.length(parent)));
  }
  for (SeqId s : seqs_) cache_.release(s);
  seqs_ = std::move(next);
  rec->running = search_->running();
  rec->finished = search_->finished();
  rec->cow_copies = cache_.blocks_copied();
  rec->block = cache_.layout().block;

  if (search_->done()) {
    if (search_->stop() == BeamStop::kBeaten) {
      reason_ = StopReason::kEos;
    } else {
      // The maximum length is the context's when it cut max_new short.
      const bool ctx = search_->settings().max_length < search_->n_prompt() + max_new_;
      reason_ = ctx ? StopReason::kContextFull : StopReason::kMaxNew;
    }
  }
  rec->stop = reason_;
  rec->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ms_total_ += rec->ms;
  flops_total_ += rec->flops;
  return rec;
}

std::string BeamGenerator::text(const std::vector<int>& tokens) const {
  return generated_text(*model_, tokens, n_prompt(), false);  // a running beam has met no stop token
}

std::string BeamGenerator::text(const Hypothesis& h) const {
  return generated_text(*model_, h.tokens, n_prompt(), h.eos);
}

}  // namespace kvscope
