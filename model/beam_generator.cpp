#include "beam_generator.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "error.h"

namespace kvscope {
namespace {

// Positions cached for `beams` if every shared prefix were stored once: the
// number of distinct prefixes (nodes of their token tree) among the cached
// positions [0, len - 1) of each beam.
uint64_t shared_positions(const std::vector<Beam>& beams) {
  std::set<std::vector<int>> nodes;
  for (const Beam& b : beams) {
    const size_t cached = b.tokens.size() - 1;
    for (size_t n = 1; n <= cached; ++n) nodes.emplace(b.tokens.begin(), b.tokens.begin() + static_cast<long>(n));
  }
  return nodes.size();
}

}  // namespace

BeamGenerator::BeamGenerator(std::shared_ptr<const Model> model) : model_(std::move(model)), engine_(*model_) {}

void BeamGenerator::start(const std::string& prompt, const BeamOptions& opt) {
  if (prompt.empty()) throw Error("prompt is empty (expected at least one character of text)");
  start_tokens(model_->tokenizer.encode_prompt(prompt), opt);
}

void BeamGenerator::start_tokens(const std::vector<int>& prompt, const BeamOptions& opt) {
  const Config& c = model_->config;
  if (opt.n_beams < 1 || opt.n_beams > 8) throw Error("--beams must be in 1..8, got " + std::to_string(opt.n_beams));
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
  s.eos = c.eos_token_id;
  // The last token may sit at position n_positions: chosen by a forward
  // over a full context, never fed to one.
  s.max_length = std::min(static_cast<int>(prompt.size()) + opt.max_new, c.n_positions + 1);
  search_ = std::make_unique<BeamSearch>(s, prompt);
  max_new_ = opt.max_new;
  caches_.assign(1, KVCache(KVLayout::for_model(c)));
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

  // One new position per running beam (the whole prompt the first time).
  std::vector<std::vector<double>> rows;
  for (size_t b = 0; b < rec->expanded.size(); ++b) {
    const std::vector<int>& toks = rec->expanded[b].tokens;
    KVCache& cache = caches_[b];
    ForwardOutput out = engine_.forward(toks, cached_length(cache), &cache, false);
    rec->positions += out.n_new;
    ++rec->forwards;
    rec->flops += out.flops;
    rows.push_back(log_softmax(out.logits));
  }
  rec->candidates = search_->step(rows);
  const Tokenizer& tok = model_->tokenizer;
  for (const BeamCandidate& c : rec->candidates) rec->candidate_pieces.push_back(tok.display_piece(c.token));
  if (rec->index == 0) {
    for (int t : rec->expanded.front().tokens) rec->prompt_pieces.push_back(tok.display_piece(t));
  }

  // Each new running beam continues its parent's cache.
  std::vector<KVCache> next;
  for (const Beam& b : search_->running()) next.push_back(caches_[static_cast<size_t>(b.parent)]);
  caches_ = std::move(next);
  rec->running = search_->running();
  rec->finished = search_->finished();

  const uint64_t per_pos = kv_bytes_per_position(model_->config);
  uint64_t independent = 0;
  for (const Beam& b : rec->running) independent += static_cast<uint64_t>(b.tokens.size() - 1);
  rec->kv_bytes_independent = independent * per_pos;
  rec->kv_bytes_shared = shared_positions(rec->running) * per_pos;

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
  std::vector<int> gen(tokens.begin() + n_prompt(), tokens.end());
  return model_->tokenizer.decode(gen);
}

std::string BeamGenerator::text(const Hypothesis& h) const {
  std::vector<int> gen(h.tokens.begin() + n_prompt(), h.tokens.end());
  if (h.eos && !gen.empty()) gen.pop_back();
  return model_->tokenizer.decode(gen);
}

}  // namespace kvscope
