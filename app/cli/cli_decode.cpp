#include "app/cli/cli_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_json.h"
#include "app/cli/cli_out.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/core/overloaded.h"
#include "model/decoding/beam_generator.h"
#include "model/decoding/generator.h"
#include "model/decoding/speculative_generator.h"
#include "model/decoding/strategy.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;

std::vector<int> generated(const std::vector<int>& tokens, int n_prompt) {
  return std::vector<int>(tokens.begin() + n_prompt, tokens.end());
}

json beam_json(const Beam& b, const BeamGenerator& gen) {
  return {{"id", b.id},
          {"parent", b.parent},
          {"parent_id", b.parent_id},
          {"tokens", generated(b.tokens, gen.n_prompt())},
          {"text", escape_invalid_utf8(gen.text(b.tokens))},
          {"text_bytes", bytes_json(gen.text(b.tokens))},
          {"logprob", b.logprob}};
}

json hypothesis_json(const Hypothesis& h, const BeamGenerator& gen) {
  return {{"tokens", generated(h.tokens, gen.n_prompt())},
          {"text", escape_invalid_utf8(gen.text(h))},
          {"text_bytes", bytes_json(gen.text(h))},
          {"score", h.score},
          {"sum_logprob", h.sum_logprob},
          {"generated_length", h.gen_len},
          {"eos", h.eos}};
}

json beam_step_json(const BeamStepRecord& r, const BeamGenerator& gen) {
  const Tokenizer& tok = gen.model().tokenizer;
  json cands = json::array();
  for (const BeamCandidate& c : r.candidates) {
    cands.push_back({{"parent", c.parent},
                     {"token", c.token},
                     {"piece", tok.display_piece(c.token)},
                     {"bytes", bytes_json(tok.token_bytes(c.token))},
                     {"logprob", c.logprob},
                     {"token_logprob", c.token_logprob},
                     {"running", c.running},
                     {"finished", c.finished}});
  }
  json beams = json::array();
  for (const Beam& b : r.running) beams.push_back(beam_json(b, gen));
  json fin = json::array();
  for (const Hypothesis& h : r.finished) fin.push_back(hypothesis_json(h, gen));
  return {{"event", r.index == 0 ? "prefill" : "step"},
          {"index", r.index},
          {"beams", beams},
          {"candidates", cands},
          {"finished", fin},
          {"positions", r.positions},
          {"forwards", r.forwards},
          {"kv_bytes_shared", r.kv_bytes_shared},
          {"kv_bytes_independent", r.kv_bytes_independent},
          {"cow_copies", r.cow_copies},
          {"block", r.block},
          {"flops", r.flops},
          {"ms", r.ms}};
}

// Streams beam search's steps, then the best hypothesis.
int stream_beams(BeamGenerator& gen, const strategy::Beam& b, const DecodeArgs& a) {
  while (BeamRecordPtr r = gen.step()) {
    if (a.json) out_line(beam_step_json(*r, gen).dump());
  }
  const std::vector<Hypothesis>& fin = gen.search().finished();
  if (fin.empty()) throw Error("beam search ended without a finished hypothesis");
  const Hypothesis& best = fin.front();
  if (a.json) {
    json hyps = json::array();
    for (const Hypothesis& h : fin) hyps.push_back(hypothesis_json(h, gen));
    out_line(json{{"event", "done"},
                  {"reason", to_string(gen.reason())},
                  {"text", escape_invalid_utf8(gen.text(best))},
                  {"text_bytes", bytes_json(gen.text(best))},
                  {"tokens", generated(best.tokens, gen.n_prompt())},
                  {"score", best.score},
                  {"sum_logprob", best.sum_logprob},
                  {"new_tokens", static_cast<int>(best.tokens.size()) - gen.n_prompt()},
                  {"beams", b.beams},
                  {"length_penalty", b.length_penalty},
                  {"hypotheses", hyps},
                  {"steps", gen.search().steps()},
                  {"flops_total", gen.flops_total()},
                  {"ms_total", gen.ms_total()}}
                 .dump());
  } else {
    out_line(gen.text(best));  // before the summary on stderr
    std::fprintf(stderr, "[%s] beam search, %d beams: best score %.4f (sum log p %.4f over %d tokens), stop: %s\n",
                 gen.model().name.c_str(), b.beams, best.score, best.sum_logprob, best.gen_len,
                 to_string(gen.reason()));
  }
  return 0;
}

json iteration_json(const SpecIteration& it, const Tokenizer& tok) {
  json emitted_bytes = json::array();  // the exact bytes beside each display piece, as generate's pieces_bytes
  for (int t : it.emitted) emitted_bytes.push_back(bytes_json(tok.token_bytes(t)));
  json drafted = json::array();
  for (const DraftVerdict& d : it.drafted) {
    json j = {{"token", d.token},
              {"piece", tok.display_piece(d.token)},
              {"bytes", bytes_json(tok.token_bytes(d.token))},
              {"p", d.p},
              {"q", d.q}};
    if (d.r >= 0) {
      j["r"] = d.r;
      j["accepted"] = d.accepted;
    } else {
      j["accepted"] = false;
      j["tested"] = false;
    }
    drafted.push_back(j);
  }
  return {{"event", "iteration"},
          {"index", it.index},
          {"first", it.first},
          {"k", it.k},
          {"drafted", drafted},
          {"accepted", it.n_accepted},
          {it.bonus ? "bonus" : "replacement",
           {{"token", it.next_token},
            {"piece", tok.display_piece(it.next_token)},
            {"bytes", bytes_json(tok.token_bytes(it.next_token))},
            {"prob", it.next_prob}}},
          {"emitted", it.emitted},
          {"draft_context_full", it.draft_context_full},
          {"emitted_pieces", it.emitted_pieces},
          {"emitted_pieces_bytes", emitted_bytes},
          {"target_forwards", it.target_forwards},
          {"draft_forwards", it.draft_forwards},
          {"target_positions", it.target_positions},
          {"target_rolled_back", it.target_rolled_back},
          {"draft_rolled_back", it.draft_rolled_back},
          {"target_kv_bytes", it.target_kv_bytes},
          {"draft_kv_bytes", it.draft_kv_bytes},
          {"draft_ms", it.draft_ms},
          {"target_ms", it.target_ms}};
}

// What the speculative run's iterations add up to beyond the decoder's own
// totals: the drafts the target tested, and the draft's and the target's
// forwards after the prefill (the steady-state costs).
struct SpecTally {
  int tested = 0;
  double draft_ms_after_first = 0;
  int draft_forwards_after_first = 0;
  double verify_ms = 0;  // target forwards after the prefill
  int verify_forwards = 0;
};

// Runs the speculative decoder to the end, streaming text or JSON Lines.
SpecTally stream_speculative(SpeculativeDecoder& spec, const Tokenizer& tok, bool as_json) {
  SpecTally t;
  size_t printed = 0;  // bytes of spec.text() written: the text rule (a stop token is not text) is text()'s
  bool told = false;
  while (SpecIterationPtr it = spec.step()) {
    if (it->draft_context_full && !told) {
      std::fprintf(stderr,
                   "kvscope: note: the draft %s holds %d positions, fewer than the %d tokens so far: the target "
                   "decodes alone from here (no drafts)\n",
                   spec.draft().dir.c_str(), spec.draft().config.n_positions, it->first);
      told = true;
    }
    for (const DraftVerdict& d : it->drafted) t.tested += d.r >= 0 ? 1 : 0;
    if (it->index > 0) {
      t.draft_ms_after_first += it->draft_ms;
      t.draft_forwards_after_first += it->k;
      t.verify_ms += it->target_ms;
      ++t.verify_forwards;
    }
    if (as_json) {
      out_line(iteration_json(*it, tok).dump());
    } else {
      const std::string text = spec.text();
      if (text.size() > printed) out_text(text.substr(printed));
      printed = std::max(printed, text.size());
    }
  }
  return t;
}

// Plain decoding of the same prompt with the same settings, in the same run,
// for the measured speed-up and the draft/target cost ratio.
struct PlainRun {
  int n_generated = 0;
  double ms_total = 0;
  double tokens_per_s = 0;
  double decode_step_ms = 0;  // mean decode step (the prefill alone if there was none)
  std::vector<int> tokens;
};

PlainRun run_plain(const std::shared_ptr<const Model>& target, const DecodeArgs& a) {
  GenerateOptions g;
  g.max_new = a.max_new;
  g.sampler = a.sampler;
  g.max_prefill_attn_bytes = 0;
  g.kv = a.kv;  // the same cache layout as the speculative run
  Generator plain(target);
  plain.start(a.prompt, g);
  double decode_ms = 0;
  int decode_steps = 0;
  while (RecordPtr r = plain.step()) {
    if (!r->prefill) {
      decode_ms += r->ms;
      ++decode_steps;
    }
  }
  PlainRun p;
  p.n_generated = plain.n_generated();
  p.ms_total = plain.ms_total();
  p.tokens_per_s = plain.ms_total() > 0 ? plain.n_generated() / (plain.ms_total() / 1000.0) : 0.0;
  p.decode_step_ms = decode_steps ? decode_ms / decode_steps : plain.ms_total();
  p.tokens = plain.tokens();
  return p;
}

// The measured rates and Leviathan et al.'s predicted speed-up from them.
// alpha, the cost ratio and the prediction are undefined (NaN: "n/a", JSON
// null) when nothing was drafted, tested or timed.
struct SpecSummary {
  double tokens_per_s, alpha, alpha_tested, draft_step_ms, cost_ratio, predicted, speedup, per_forward;
};

// A measured ratio with three decimals, or "n/a" where it is undefined.
std::string ratio_text(double x) {
  return rate_text(x, 3);
}

json maybe_number(double x) {
  return std::isnan(x) ? json() : json(x);
}

SpecSummary summarize(const SpeculativeDecoder& spec, const SpecTally& t, const PlainRun& plain, int k) {
  SpecSummary s;
  s.tokens_per_s = spec.ms_total() > 0 ? spec.n_generated() / (spec.ms_total() / 1000.0) : 0.0;
  s.alpha = measured_rate(spec.accepted_total(), spec.drafted_total());
  s.alpha_tested = measured_rate(spec.accepted_total(), t.tested);
  // The draft's forward time after the first iteration (whose forwards also
  // ran the prompt), else over all of them; NaN when the draft never ran.
  s.draft_step_ms = t.draft_forwards_after_first ? t.draft_ms_after_first / t.draft_forwards_after_first
                                                 : measured_rate(spec.draft_ms_total(), spec.draft_forwards());
  s.cost_ratio = measured_rate(s.draft_step_ms, plain.decode_step_ms);
  s.predicted = predicted_speedup(s.alpha_tested, k, s.cost_ratio);  // NaN from either
  s.speedup = plain.tokens_per_s > 0 ? s.tokens_per_s / plain.tokens_per_s : 0.0;
  s.per_forward = spec.target_forwards() ? static_cast<double>(spec.n_generated()) / spec.target_forwards() : 0.0;
  return s;
}

json spec_done_json(const SpeculativeDecoder& spec, const SpecTally& t, const PlainRun& plain, const SpecSummary& s,
                    int k) {
  return {{"event", "done"},
          {"reason", to_string(spec.reason())},
          {"text", escape_invalid_utf8(spec.text())},
          {"text_bytes", bytes_json(spec.text())},
          {"new_tokens", spec.n_generated()},
          {"k", k},
          {"draft", spec.draft().dir},
          {"drafted", spec.drafted_total()},
          {"tested", t.tested},
          {"accepted", spec.accepted_total()},
          {"alpha", maybe_number(s.alpha)},
          {"alpha_tested", maybe_number(s.alpha_tested)},
          {"target_forwards", spec.target_forwards()},
          {"draft_forwards", spec.draft_forwards()},
          {"tokens_per_target_forward", s.per_forward},
          {"ms_total", spec.ms_total()},
          {"tokens_per_s", s.tokens_per_s},
          {"plain",
           {{"new_tokens", plain.n_generated},
            {"ms_total", plain.ms_total},
            {"tokens_per_s", plain.tokens_per_s},
            {"same_tokens", plain.tokens == spec.tokens()}}},
          {"speedup", s.speedup},
          {"draft_forward_ms", maybe_number(s.draft_step_ms)},
          {"target_forward_ms", plain.decode_step_ms},
          {"cost_ratio", maybe_number(s.cost_ratio)},
          {"target_verify_ms", t.verify_forwards ? t.verify_ms / t.verify_forwards : 0.0},
          {"predicted_speedup", maybe_number(s.predicted)}};
}

// Streams speculative decoding's iterations, then plain decoding of the same
// prompt for the measured speed-up, and the summary.
int run_speculative(SpeculativeDecoder& spec, const std::shared_ptr<const Model>& target_model,
                    const strategy::Speculative& p, const DecodeArgs& a) {
  const Model& target = *target_model;
  const SpecTally tally = stream_speculative(spec, target.tokenizer, a.json);
  const PlainRun plain = run_plain(target_model, a);
  const SpecSummary s = summarize(spec, tally, plain, p.k);
  if (a.json) {
    out_line(spec_done_json(spec, tally, plain, s, p.k).dump());
  } else {
    out_text("\n");  // the text ends before the summary on stderr, piped or not
    const std::string predicted = std::isnan(s.predicted) ? "n/a" : rate_text(s.predicted, 2) + "x";
    std::fprintf(stderr,
                 "[%s drafted by %s] K=%d: %d new tokens, stop: %s; alpha %s (accepted %d of %d drafted), %.2f "
                 "tokens per target forward; %.1f tokens/s vs %.1f plain: speed-up %.2fx (Leviathan et al. predict "
                 "%s from alpha %s per test and cost ratio %s)\n",
                 target.name.c_str(), spec.draft().name.c_str(), p.k, spec.n_generated(), to_string(spec.reason()),
                 ratio_text(s.alpha).c_str(), spec.accepted_total(), spec.drafted_total(), s.per_forward,
                 s.tokens_per_s, plain.tokens_per_s, s.speedup, predicted.c_str(), ratio_text(s.alpha_tested).c_str(),
                 ratio_text(s.cost_ratio).c_str());
  }
  return 0;
}

}  // namespace

void add_strategy_flags(CLI::App* cmd, StrategyFlags& f, const std::string& verb) {
  f.beams = cmd->add_option("--beams", f.beam.beams, verb + " beam search with N beams (1-8; Hugging Face conventions)")
                ->check(in_range(setting::kBeams));
  f.length_penalty = cmd->add_option("--length-penalty", f.beam.length_penalty,
                                     "Beam score = sum log p / (generated length)^L (default 1.0)")
                         ->check(in_range(setting::kLengthPenalty));
  f.draft = cmd->add_option("--draft", f.spec.draft_dir, verb + " speculative decoding with this draft model folder")
                ->check(non_empty("a draft model folder"));
  f.speculate = cmd->add_option("--speculate", f.spec.k, "Tokens the draft proposes per iteration (1-16, default 4)")
                    ->check(in_range(setting::kSpeculate));
}

Strategy strategy_from_flags(const StrategyFlags& f) {
  const bool beams = f.beams->count() > 0, draft = f.draft->count() > 0;
  if (beams && (draft || f.speculate->count()))
    throw UsageError("--beams cannot be combined with --draft/--speculate (choose one strategy)");
  if (f.length_penalty->count() && !beams) throw UsageError("--length-penalty needs --beams N");
  if (f.speculate->count() && !draft) throw UsageError("--speculate needs --draft DIR (the draft model folder)");
  if (beams) return f.beam;
  if (draft) return f.spec;
  return strategy::Sample{};
}

int cmd_generate_strategy(const DecodeArgs& a) {
  auto target = load_cli_model(a.model, a.ctx, a.bf16_products);
  check_context_fits(*target, a.prompt, a.max_new);
  GenerateOptions opt;
  opt.max_new = a.max_new;
  opt.sampler = a.sampler;
  opt.kv = a.kv;
  opt.max_prefill_attn_bytes = 0;  // the attention rows of a long prompt are not printed
  const DraftLoader draft = [&](const std::string& dir) { return load_cli_model(dir, a.ctx); };
  Driver d = make_driver(a.strategy, target, draft, a.prompt, opt);
  return std::visit(
      overloaded{
          [&](std::unique_ptr<BeamGenerator>& g) { return stream_beams(*g, std::get<strategy::Beam>(a.strategy), a); },
          [&](std::unique_ptr<SpeculativeDecoder>& g) {
            return run_speculative(*g, target, std::get<strategy::Speculative>(a.strategy), a);
          },
          [](std::unique_ptr<Generator>&) -> int { throw Error("generate: sampling runs without a strategy flag"); }},
      d);
}

}  // namespace kvscope
