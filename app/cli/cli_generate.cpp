// `kvscope generate`: its flags, the checks of their combinations, and plain
// decoding (one token a step) streamed as text or JSON Lines. Beam search and
// speculative decoding run in cli_decode.cpp.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/cli_chat.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_json.h"
#include "app/cli/cli_out.h"
#include "app/cli/record_json.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/core/units.h"
#include "model/decoding/generator.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;

// Greedy unless --temperature, --top-k or --top-p asked for sampling.
SamplerSettings sampler_settings(const GenerateArgs& a, bool sampling_requested) {
  SamplerSettings s;
  s.greedy = !sampling_requested;
  s.temperature = a.temperature;
  s.top_k = a.top_k;
  s.top_p = a.top_p;
  s.repetition_penalty = a.repetition_penalty;
  s.seed = a.seed;
  return s;
}

}  // namespace

GenerateOptions generate_options(const GenerateArgs& a, bool sampling_requested) {
  GenerateOptions opt;
  opt.max_new = a.max_new;
  opt.stop = a.stop;
  opt.mode = a.no_cache ? CacheMode::kNoCache : CacheMode::kKV;
  opt.kv = a.kv;
  opt.sampler = sampler_settings(a, sampling_requested);
  // The attention rows of a long prompt are not printed by the CLI.
  opt.max_prefill_attn_bytes = 0;
  return opt;
}

namespace {

// The last line: JSON's "done" event, or the text's newline and a summary on stderr.
void print_generate_summary(const Generator& gen, const Model& model, bool as_json) {
  const double tps = gen.ms_total() > 0 ? gen.n_generated() / (gen.ms_total() / 1000.0) : 0.0;
  if (as_json) {
    json j = {{"event", "done"},
              {"reason", to_string(gen.reason())},
              {"text", escape_invalid_utf8(gen.text())},
              {"text_bytes", bytes_json(gen.text())},
              {"new_tokens", gen.n_generated()},
              {"flops_total", gen.flops_total()},
              {"ms_total", gen.ms_total()},
              {"tokens_per_s", tps}};
    out_line(j.dump());
  } else {
    out_text("\n");  // the text ends before the summary on stderr, piped or not
    std::fprintf(stderr, "[%s] %d new tokens, stop: %s, %.1f tokens/s, %s total, mode %s\n", model.name.c_str(),
                 gen.n_generated(), to_string(gen.reason()), tps,
                 format_flops(static_cast<double>(gen.flops_total())).c_str(),
                 gen.mode() == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
  }
}

int cmd_generate(const GenerateArgs& a, bool sampling_requested) {
  if (a.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
  auto model = load_cli_model(a.model, a.ctx, a.bf16_products);
  check_context_fits(*model, a.prompt, a.max_new);
  Generator gen(model);
  gen.start(a.prompt, generate_options(a, sampling_requested));
  const Tokenizer& tok = model->tokenizer;
  size_t hold = 0;
  for (const auto& s : a.stop) hold = std::max(hold, s.size());
  size_t printed = 0;
  while (RecordPtr r = gen.step()) {
    if (r->index == 0 && r->kv_layout.per_head() && r->seq_len <= r->kv_layout.budget) {
      std::fprintf(stderr, "[snapkv] the prompt's %d positions fit the budget of %d: nothing compressed\n", r->seq_len,
                   r->kv_layout.budget);
    }
    if (a.json) {
      out_line(step_json(*r, tok).dump());
    } else {
      // Stream the text, holding back what a stop string could still cut.
      const std::string t = gen.text();
      const size_t end = gen.done() ? t.size() : (t.size() > hold ? t.size() - hold : 0);
      if (end > printed) {
        out_text(t.substr(printed, end - printed));
        printed = end;
      }
    }
  }
  print_generate_summary(gen, *model, a.json);
  return 0;
}

// Beam search is deterministic and runs on the cache; speculative decoding
// needs a draft. Flags without a meaning for the chosen strategy are usage errors.
void check_decode_flags(const CLI::App& gen, const Strategy& s) {
  auto given = [&](const char* flag) { return gen.get_option(flag)->count() > 0; };
  if (is_beam(s)) {
    for (const char* f : {"--temperature", "--top-k", "--top-p", "--seed", "--repetition-penalty", "--no-cache",
                          "--stop", "--greedy"}) {
      if (given(f)) {
        throw UsageError(std::string("--beams cannot be combined with ") + f +
                         " (beam search ranks beams by log-probability of the raw logits on the KV cache; "
                         "it does not sample)");
      }
    }
    return;
  }
  for (const char* f : {"--no-cache", "--stop"}) {
    if (given(f)) throw UsageError(std::string("--draft cannot be combined with ") + f);
  }
}

}  // namespace

void add_sampling_flags(CLI::App* gen, GenerateCommand& c) {
  GenerateArgs& g = c.args;
  auto* greedy = gen->add_flag("--greedy", g.greedy, "Pick the most likely token (default)");
  c.temperature = gen->add_option("--temperature", g.temperature, "Sample with this temperature")
                      ->check(in_range(setting::kTemperature));
  c.top_k =
      gen->add_option("--top-k", g.top_k, "Keep the k most likely tokens (0 = off)")->check(in_range(setting::kTopK));
  c.top_p = gen->add_option("--top-p", g.top_p, "Keep the smallest set reaching probability p")
                ->check(in_range(setting::kTopP));
  greedy->excludes(c.temperature)->excludes(c.top_k)->excludes(c.top_p);
  gen->add_option("--repetition-penalty", g.repetition_penalty,
                  "Divide (multiply) positive (negative) logits of seen tokens (1 = off)")
      ->check(in_range(setting::kRepetitionPenalty));
  gen->add_option("--seed", g.seed, "Sampling seed")->check(any_u64());
}

bool sampling_requested(const GenerateCommand& c) {
  return c.temperature->count() > 0 || c.top_k->count() > 0 || c.top_p->count() > 0;
}

void refuse_no_cache_evict(bool no_cache, const KVLayout& kv) {
  if (no_cache && kv.evict != KVEvict::kNone) {
    throw UsageError(std::string("--no-cache and --kv-evict ") + to_string(kv.evict) +
                     ": not supported together (eviction decides each layer's held positions forward by forward, "
                     "on the cache; see docs/eviction.md)");
  }
}

void add_generate_command(CLI::App& app, GenerateCommand& c) {
  GenerateArgs& g = c.args;
  auto* gen = c.cmd = app.add_subcommand("generate", "Generate text (no display needed)");
  gen->add_option("--model", g.model,
                  "Model folder (GPT-2 or Llama/Mistral/Qwen2) or GGUF file (default: the embedded model)")
      ->check(non_empty("a model folder"));
  gen->add_option("--prompt", g.prompt, "Text to continue (UTF-8)")->check(non_empty("some text to continue"));
  gen->add_option("--chat", g.chat, "A message to an instruct model, through its chat template (instead of --prompt)")
      ->check(non_empty("a message"));
  gen->add_option("--system", g.system, "With --chat: the system prompt")->check(non_empty("a system prompt"));
  add_chat_format_flag(*gen, g.chat_format);
  gen->add_option("--max-new", g.max_new, "Maximum new tokens")->check(in_range(setting::kMaxNew));
  gen->add_option("--ctx", g.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  gen->add_flag("--bf16-products", g.bf16_products, kBf16ProductsHelp);
  add_sampling_flags(gen, c);
  gen->add_option("--stop", g.stop, "Stop when this string is generated (repeatable)")
      ->check(non_empty("the text to stop at"));
  gen->add_flag("--no-cache", g.no_cache, "Recompute the whole sequence every step");
  gen->add_flag("--json", g.json, "JSON Lines: prefill, steps, done");
  add_kv_flags(gen, g.kv);
  add_strategy_flags(gen, c.strategy, "Run");
}

int run_generate_command(GenerateCommand& c) {
  GenerateArgs& g = c.args;
  check_kv_flags(*c.cmd, g.kv);
  refuse_no_cache_evict(g.no_cache, g.kv);
  // The prompt's rule: a stop string is compared with the decoded text, which is UTF-8.
  for (const std::string& s : g.stop) require_utf8(s, "--stop");
  const bool sampling = sampling_requested(c);
  const Strategy strategy = strategy_from_flags(c.strategy);
  auto given = [&](const char* flag) { return c.cmd->get_option(flag)->count() > 0; };
  if (given("--chat")) {
    if (given("--prompt")) {
      throw UsageError(
          "--chat and --prompt: give one (--chat sends a message through the model's chat template, "
          "--prompt continues raw text)");
    }
    if (!is_sampling(strategy)) throw UsageError("--chat cannot be combined with --beams or --draft");
    return run_chat_once(c, g.chat);
  }
  for (const char* f : {"--system", "--chat-format"}) {
    if (given(f)) throw UsageError(std::string(f) + " needs --chat TEXT (a message through the chat template)");
  }
  if (!given("--prompt")) throw UsageError("--prompt TEXT or --chat TEXT is required");
  if (is_sampling(strategy)) return cmd_generate(g, sampling);
  check_decode_flags(*c.cmd, strategy);
  if (const auto refused = strategy_refusal(strategy, g.kv)) throw UsageError(refused->usage);
  if (g.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
  DecodeArgs dec;
  dec.kv = g.kv;
  dec.model = g.model;
  dec.prompt = g.prompt;
  dec.max_new = g.max_new;
  dec.ctx = g.ctx;
  dec.bf16_products = g.bf16_products;
  dec.json = g.json;
  dec.strategy = strategy;
  dec.sampler = sampler_settings(g, sampling);
  return cmd_generate_strategy(dec);
}

}  // namespace kvscope
