// The decoding strategy: one token per forward drawn by the sampler
// (generator.h), beam search (beam_generator.h), or speculative decoding with a
// draft model (speculative_generator.h). One sum type from the CLI's flags to
// the window's Decoding panel and the page's commands, with one clamp, one
// refusal against the KV memory layout and one factory of the driver that runs
// it: adding a strategy is an alternative here and a case in each visit.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

namespace strategy {
// One token per forward, drawn by the sampler (SamplerSettings).
struct Sample {
  bool operator==(const Sample&) const { return true; }
};
// Keep the N most probable sequences (Hugging Face's conventions).
struct Beam {
  int beams = 4;                // N, setting::kBeams
  double length_penalty = 1.0;  // exponent of the generated length in a finished hypothesis' score
  bool operator==(const Beam& o) const { return beams == o.beams && length_penalty == o.length_penalty; }
};
// A draft model proposes K tokens, the model verifies them in one forward.
struct Speculative {
  std::string draft_dir;  // the draft model folder or id (the target's tokenizer)
  int k = 4;              // tokens drafted per iteration, setting::kSpeculate
  bool operator==(const Speculative& o) const { return draft_dir == o.draft_dir && k == o.k; }
};
}  // namespace strategy

using Strategy = std::variant<strategy::Sample, strategy::Beam, strategy::Speculative>;

inline bool is_sampling(const Strategy& s) {
  return std::holds_alternative<strategy::Sample>(s);
}
inline bool is_beam(const Strategy& s) {
  return std::holds_alternative<strategy::Beam>(s);
}
inline bool is_speculative(const Strategy& s) {
  return std::holds_alternative<strategy::Speculative>(s);
}

// "sampling", "beam search" or "speculative decoding": what the window and messages call it.
const char* strategy_name(const Strategy& s);
// "sample", "beam" or "speculative": its name in JSON (page commands, records).
const char* strategy_key(const Strategy& s);
// The strategy of `key` with its default parameters, or nullopt for an unknown key.
std::optional<Strategy> strategy_of_key(const std::string& key);

// Its parameters in words ("beams N = 4, length penalty L = 1.00", "drafted tokens K = 4"; "" when
// sampling) and their ranges ("beams N 1..8, length penalty L -100..100").
std::string strategy_parameters(const Strategy& s);
std::string strategy_ranges(const Strategy& s);

// The one clamp: every parameter into its setting's range (setting_ranges.h),
// a length penalty that is not finite to 1.
Strategy clamp_strategy(Strategy s);

// Why a strategy cannot run on a cache laid out as `kv`: a beam's fork and a
// draft's rollback need positions a sliding window or a score rule may have
// dropped. One rule, said in two vocabularies from the same facts.
struct StrategyRefusal {
  std::string message;  // the window's words: names the KV memory layout's settings
  std::string usage;    // the CLI's words: names the flags (--kv-evict, --kv-window, --kv-sinks)
};
std::optional<StrategyRefusal> strategy_refusal(const Strategy& s, const KVLayout& kv);

// A generation's driver, stepped through one std::visit, and what one step
// yields (a null pointer once the generation is done).
using Driver =
    std::variant<std::unique_ptr<Generator>, std::unique_ptr<BeamGenerator>, std::unique_ptr<SpeculativeDecoder>>;
using StepOutput = std::variant<RecordPtr, BeamRecordPtr, SpecIterationPtr>;

// Loads the draft model of a speculative strategy (the CLI's loader, or the
// window's, which keeps the last one).
using DraftLoader = std::function<std::shared_ptr<const Model>(const std::string& dir)>;

// The one factory: the driver of `s` for `model`, started on `prompt`. The
// options every strategy shares (max_new, sampler, KV layout, ignore_eos) come
// from `opt`; beam search keeps its pages (kDefaultKvBlock unless opt.kv pages).
// Throws Error with the refusal's window words on a layout the strategy
// cannot run on (the CLI refuses its flags before it loads a model), and on
// an empty or too long prompt.
Driver make_driver(const Strategy& s, std::shared_ptr<const Model> model, const DraftLoader& load_draft,
                   const std::string& prompt, const GenerateOptions& opt);

// The next step of whichever driver runs.
StepOutput step_driver(Driver& d);

}  // namespace kvscope
