#include "model/decoding/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/core/error.h"
#include "model/core/overloaded.h"
#include "model/decoding/setting_ranges.h"

namespace kvscope {
namespace {

int clamp_int(int x, const IntSetting& s) {
  return static_cast<int>(std::clamp<int64_t>(x, s.lo, s.hi));
}

}  // namespace

const char* strategy_name(const Strategy& s) {
  return std::visit(overloaded{[](const strategy::Sample&) { return "sampling"; },
                               [](const strategy::Beam&) { return "beam search"; },
                               [](const strategy::Speculative&) { return "speculative decoding"; }},
                    s);
}

const char* strategy_key(const Strategy& s) {
  return std::visit(
      overloaded{[](const strategy::Sample&) { return "sample"; }, [](const strategy::Beam&) { return "beam"; },
                 [](const strategy::Speculative&) { return "speculative"; }},
      s);
}

std::optional<Strategy> strategy_of_key(const std::string& key) {
  for (const Strategy& s :
       {Strategy(strategy::Sample{}), Strategy(strategy::Beam{}), Strategy(strategy::Speculative{})})
    if (key == strategy_key(s)) return s;
  return std::nullopt;
}

std::string strategy_parameters(const Strategy& s) {
  char buf[96] = "";
  if (const auto* b = std::get_if<strategy::Beam>(&s))
    std::snprintf(buf, sizeof buf, "beams N = %d, length penalty L = %.2f", b->beams, b->length_penalty);
  else if (const auto* p = std::get_if<strategy::Speculative>(&s))
    std::snprintf(buf, sizeof buf, "drafted tokens K = %d", p->k);
  return buf;
}

std::string strategy_ranges(const Strategy& s) {
  char buf[96] = "";
  if (is_beam(s))
    std::snprintf(buf, sizeof buf, "beams N %lld..%lld, length penalty L %g..%g",
                  static_cast<long long>(setting::kBeams.lo), static_cast<long long>(setting::kBeams.hi),
                  setting::kLengthPenalty.lo, setting::kLengthPenalty.hi);
  else if (is_speculative(s))
    std::snprintf(buf, sizeof buf, "drafted tokens K %lld..%lld", static_cast<long long>(setting::kSpeculate.lo),
                  static_cast<long long>(setting::kSpeculate.hi));
  return buf;
}

Strategy clamp_strategy(Strategy s) {
  if (auto* b = std::get_if<strategy::Beam>(&s)) {
    b->beams = clamp_int(b->beams, setting::kBeams);
    const double l = std::isfinite(b->length_penalty) ? b->length_penalty : 1.0;
    b->length_penalty = std::clamp(l, setting::kLengthPenalty.lo, setting::kLengthPenalty.hi);
  } else if (auto* p = std::get_if<strategy::Speculative>(&s)) {
    p->k = clamp_int(p->k, setting::kSpeculate);
  }
  return s;
}

std::optional<StrategyRefusal> strategy_refusal(const Strategy& s, const KVLayout& kv) {
  if (is_sampling(s)) return std::nullopt;
  const bool beam = is_beam(s);
  const std::string who = strategy_name(s);
  const std::string flag = beam ? "--beams" : "--draft";
  const std::string why = beam ? "a fork" : "a rollback";
  StrategyRefusal r;
  if (kv.evict != KVEvict::kNone) {
    r.message = who + ": eviction by score (" + to_string(kv.evict) + ") is not available (" + why +
                " needs positions the rule may have dropped); set evict by score to off";
    r.usage = "--kv-evict: not available with " + flag + " (" + why +
              " needs positions that eviction by score drops; --kv-dtype and --kv-block combine)";
    return r;
  }
  if (kv.window > 0 || kv.sinks > 0) {
    r.message = who + ": the sliding window of the KV memory layout is not available with " +
                (beam ? "beams" : "a draft") + " (" + why + " needs positions the window evicts); set the window to 0";
    r.usage = std::string(kv.window > 0 ? "--kv-window" : "--kv-sinks") + ": not available with " + flag + " (" + why +
              " needs positions a sliding window evicts; --kv-dtype and --kv-block combine)";
    return r;
  }
  return std::nullopt;
}

namespace {

std::unique_ptr<BeamGenerator> start_beams(const strategy::Beam& b, std::shared_ptr<const Model> model,
                                           const std::string& prompt, const GenerateOptions& opt) {
  BeamOptions o;
  o.n_beams = b.beams;
  o.length_penalty = b.length_penalty;
  o.max_new = opt.max_new;
  o.dtype = opt.kv.dtype;  // the KV memory layout's row format and pages (0: the beams' default)
  if (opt.kv.block > 0) o.block = opt.kv.block;
  auto gen = std::make_unique<BeamGenerator>(std::move(model));
  gen->start(prompt, o);
  return gen;
}

std::unique_ptr<SpeculativeDecoder> start_speculative(const strategy::Speculative& p,
                                                      std::shared_ptr<const Model> model, const DraftLoader& load_draft,
                                                      const std::string& prompt, const GenerateOptions& opt) {
  if (!load_draft) throw Error("speculative decoding: no way to load the draft model " + p.draft_dir);
  SpecOptions o;
  o.k = p.k;
  o.max_new = opt.max_new;
  o.sampler = opt.sampler;
  o.ignore_eos = opt.ignore_eos;
  o.kv = opt.kv;
  auto spec = std::make_unique<SpeculativeDecoder>(std::move(model), load_draft(p.draft_dir));
  spec->start(prompt, o);
  return spec;
}

}  // namespace

Driver make_driver(const Strategy& s, std::shared_ptr<const Model> model, const DraftLoader& load_draft,
                   const std::string& prompt, const GenerateOptions& opt) {
  if (const auto refused = strategy_refusal(s, opt.kv)) throw Error(refused->message);
  return std::visit(overloaded{[&](const strategy::Sample&) -> Driver {
                                 auto gen = std::make_unique<Generator>(model);
                                 gen->start(prompt, opt);
                                 return gen;
                               },
                               [&](const strategy::Beam& b) -> Driver { return start_beams(b, model, prompt, opt); },
                               [&](const strategy::Speculative& p) -> Driver {
                                 return start_speculative(p, model, load_draft, prompt, opt);
                               }},
                    s);
}

StepOutput step_driver(Driver& d) {
  return std::visit([](auto& g) -> StepOutput { return g->step(); }, d);
}

}  // namespace kvscope
