// Speculative decoding on two real models: the draft proposes K tokens one
// forward at a time over its own cache; the target scores all K drafted
// positions plus the one after them in ONE forward over its cache; the
// acceptance test (model/decoding/speculative_accept.h) keeps a prefix, draws a replacement or a
// bonus token, and both caches are cut back to what was accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "model/decoding/spec_record.h"
#include "model/decoding/speculative_accept.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

struct SpecOptions {
  int k = 4;         // tokens drafted per iteration, 1..16
  int max_new = 64;  // new tokens in all
  SamplerSettings sampler;
  bool ignore_eos = false;
  // Layout of both caches (row format, pages). No user window: a rollback
  // needs the positions the window would already have evicted. A model's
  // own sliding_window is kept, with K positions beyond it held for rollback.
  KVLayout kv;
};

// Throws kvscope::Error naming both folders when the two models do not share
// a tokenizer (vocab.json and merges.txt byte for byte).
void check_same_tokenizer(const Model& target, const Model& draft);

class SpeculativeDecoder {
 public:
  SpeculativeDecoder(std::shared_ptr<const Model> target, std::shared_ptr<const Model> draft);

  void start_tokens(const std::vector<int>& prompt, const SpecOptions& opt);
  void start(const std::string& prompt, const SpecOptions& opt);
  SpecIterationPtr step();  // nullptr once done

  bool done() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  const std::vector<int>& tokens() const { return tokens_; }
  int n_prompt() const { return n_prompt_; }
  int n_generated() const { return static_cast<int>(tokens_.size()) - n_prompt_; }
  std::string text() const;  // generated text, EOS removed
  int drafted_total() const { return drafted_total_; }
  int accepted_total() const { return accepted_total_; }
  int target_forwards() const { return target_forwards_; }
  int draft_forwards() const { return draft_forwards_; }
  double draft_ms_total() const { return draft_ms_; }
  double ms_total() const { return ms_total_; }
  const KVCache& target_cache() const { return target_cache_; }
  const KVCache& draft_cache() const { return draft_cache_; }
  const Model& target() const { return *target_; }
  const Model& draft() const { return *draft_; }

 private:
  int drafts_this_iteration() const;
  // The stages of step(), in order.
  std::vector<int> draft_tokens(SpecIteration& it, std::vector<int>& seq, std::vector<TokenDist>& q);
  std::vector<TokenDist> verify_forward(SpecIteration& it, const std::vector<int>& seq);
  void emit_tokens(SpecIteration& it, const std::vector<int>& drafted, const Verification& v);
  void roll_back(SpecIteration& it);
  void finish_record(SpecIteration& it, const std::vector<int>& drafted) const;

  std::shared_ptr<const Model> target_, draft_;
  Engine target_engine_, draft_engine_;
  KVCache target_cache_, draft_cache_;
  SpecOptions opt_;
  UniformSource uniform_;
  std::vector<int> tokens_;
  int n_prompt_ = 0;
  StopReason reason_ = StopReason::kNone;
  bool started_ = false;
  int iterations_ = 0, target_forwards_ = 0, draft_forwards_ = 0;
  int drafted_total_ = 0, accepted_total_ = 0;
  double draft_ms_ = 0, ms_total_ = 0;
};

}  // namespace kvscope
