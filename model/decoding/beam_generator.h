// Beam search on a real model: BeamSearch (beam_search.h) decides, this runs
// the forwards. All beams live in ONE KV cache, a sequence each: the prompt
// is computed once, every child beam is a fork of its parent's sequence
// (sharing its blocks by reference; paged, a shared block is copied only on
// the first write into it), dropped beams are released, and each step is
// ONE batched forward over the new position of every running beam.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/decoding/beam_record.h"
#include "model/decoding/beam_search.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

struct BeamOptions {
  int n_beams = 4;  // 1..8
  double length_penalty = 1.0;
  int max_new = 64;
  int block = kDefaultKvBlock;  // positions per cache block (paged); 0 = one contiguous reservation per beam
  // Row format of the cache (f16, q8_0, q4_0 round K/V as stored). A sliding
  // window is not offered: every step's fork would need positions the
  // window has already evicted from its parent's blocks when they diverge.
  KVDtype dtype = KVDtype::kF32;
};

class BeamGenerator {
 public:
  explicit BeamGenerator(std::shared_ptr<const Model> model);

  void start(const std::string& prompt, const BeamOptions& opt);
  void start_tokens(const std::vector<int>& prompt, const BeamOptions& opt);
  BeamRecordPtr step();  // nullptr once done

  bool done() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  const BeamSearch& search() const { return *search_; }
  int n_prompt() const { return search_->n_prompt(); }
  // Generated text of a hypothesis (EOS removed), raw bytes.
  std::string text(const Hypothesis& h) const;
  std::string text(const std::vector<int>& tokens) const;
  double ms_total() const { return ms_total_; }
  const KVCache& cache() const { return cache_; }
  uint64_t flops_total() const { return flops_total_; }
  const Model& model() const { return *model_; }

 private:
  std::shared_ptr<const Model> model_;
  Engine engine_;
  std::unique_ptr<BeamSearch> search_;
  KVCache cache_;
  std::vector<SeqId> seqs_;  // the cache's sequence of each running beam, same order
  StopReason reason_ = StopReason::kNone;
  int steps_ = 0;
  int max_new_ = 0;
  double ms_total_ = 0;
  uint64_t flops_total_ = 0;
};

}  // namespace kvscope
