#include "cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "assets.h"
#include "cli_decode.h"
#include "cli_flags.h"
#include "cli_json.h"
#include "cli_kv.h"
#include "engine.h"
#include "error.h"
#include "generator.h"
#include "model.h"
#include "model_context.h"
#include "tokenizer.h"
#include "units.h"

namespace kvscope {
namespace {

using nlohmann::json;

json top_json(const StepRecord& r, const Tokenizer& tok) {
  json top = json::array();
  for (const Candidate& c : r.top) {
    top.push_back({{"token", c.token},
                   {"piece", tok.display_piece(c.token)},
                   {"bytes", bytes_json(tok.token_bytes(c.token))},
                   {"prob", c.prob}});
  }
  return top;
}

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int max_new = 64;
  int ctx = 0;  // --ctx (0 = the default context)
  bool greedy = false;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool no_cache = false;
  bool json = false;
  KVSettings kv;
};

int cmd_generate(const GenerateArgs& a, bool sampling_requested) {
  if (a.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
  auto model = load_cli_model(a.model, a.ctx);
  check_context_fits(*model, a.prompt, a.max_new);
  GenerateOptions opt;
  opt.max_new = a.max_new;
  opt.stop = a.stop;
  opt.mode = a.no_cache ? CacheMode::kNoCache : CacheMode::kKV;
  opt.kv = a.kv;
  opt.keep_history = false;
  opt.sampler.greedy = !sampling_requested;
  opt.sampler.temperature = a.temperature;
  opt.sampler.top_k = a.top_k;
  opt.sampler.top_p = a.top_p;
  opt.sampler.repetition_penalty = a.repetition_penalty;
  opt.sampler.seed = a.seed;
  // The attention rows of a long prompt are not printed by the CLI.
  opt.max_prefill_attn_bytes = 0;

  Generator gen(model);
  gen.start(a.prompt, opt);
  const Tokenizer& tok = model->tokenizer;
  size_t hold = 0;
  for (const auto& s : a.stop) hold = std::max(hold, s.size());
  size_t printed = 0;
  while (RecordPtr r = gen.step()) {
    if (a.json) {
      json j;
      if (r->prefill) {
        j["event"] = "prefill";
        j["tokens"] = r->prompt_tokens;
        j["pieces"] = r->prompt_pieces;
        json pb = json::array();
        for (int t : r->prompt_tokens) pb.push_back(bytes_json(tok.token_bytes(t)));
        j["pieces_bytes"] = pb;
      } else {
        j["event"] = "step";
        j["index"] = r->index;
      }
      j["mode"] = to_string(r->mode);
      j["token"] = r->token;
      j["piece"] = r->piece;
      j["bytes"] = bytes_json(r->raw_piece);
      j["prob"] = r->prob;
      j["top"] = top_json(*r, tok);
      j["flops"] = r->flops;
      j["flops_total"] = r->flops_total;
      j["kv_bytes"] = r->kv_bytes;
      j["kv_positions"] = r->kv_positions;
      j["evicted"] = r->evicted;
      if (r->kv_layout.paged()) {
        j["kv_blocks"] = r->kv_blocks;
        j["kv_slots_wasted"] = r->kv_slots_wasted;
      }
      j["recomputed"] = r->recomputed;
      j["ms"] = r->ms;
      std::cout << j.dump() << '\n' << std::flush;
    } else {
      // Stream the text, holding back what a stop string could still cut.
      const std::string t = gen.text();
      const size_t end = gen.done() ? t.size() : (t.size() > hold ? t.size() - hold : 0);
      if (end > printed) {
        std::cout << t.substr(printed, end - printed) << std::flush;
        printed = end;
      }
    }
  }
  const double tps = gen.ms_total() > 0 ? gen.n_generated() / (gen.ms_total() / 1000.0) : 0.0;
  if (a.json) {
    json j = {{"event", "done"},
              {"reason", to_string(gen.reason())},
              {"text", escape_invalid_utf8(gen.text())},
              {"text_bytes", bytes_json(gen.text())},
              {"new_tokens", gen.n_generated()},
              {"flops_total", gen.flops_total()},
              {"ms_total", gen.ms_total()},
              {"tokens_per_s", tps}};
    std::cout << j.dump() << '\n';
  } else {
    std::cout << '\n';
    std::fprintf(stderr, "[%s] %d new tokens, stop: %s, %.1f tokens/s, %s total, mode %s\n", model->name.c_str(),
                 gen.n_generated(), to_string(gen.reason()), tps,
                 format_flops(static_cast<double>(gen.flops_total())).c_str(),
                 gen.mode() == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
  }
  return 0;
}

int cmd_tokenize(const std::string& dir, const std::string& text, bool as_json) {
  const Tokenizer tok = Tokenizer::load(dir.empty() ? default_model_dir() : dir);
  const std::vector<int> ids = tok.encode(text);
  std::vector<std::string> pieces;
  json bytes = json::array();
  for (int id : ids) {
    pieces.push_back(tok.display_piece(id));
    bytes.push_back(bytes_json(tok.token_bytes(id)));
  }
  // The ids read back as a whole text, as the tokenizer's decoder does (a
  // SentencePiece-style file strips the space its normalizer put in front).
  const std::string decoded = escape_invalid_utf8(tok.decode_text(ids));
  if (as_json) {
    std::cout << json{{"ids", ids}, {"pieces", pieces}, {"bytes", bytes}, {"decoded", decoded}}.dump() << '\n';
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%6d  %s\n", ids[i], json(pieces[i]).dump().c_str());
    std::printf("%zu tokens, decoded: %s\n", ids.size(), json(decoded).dump().c_str());
  }
  return 0;
}

int cmd_inspect(const std::string& dir, bool as_json, int ctx) {
  auto m = load_cli_model(dir, ctx);
  const Config& c = m->config;
  const int T = c.n_positions;
  const uint64_t kv1 = forward_flops(c, 1, 1), kvT = forward_flops(c, 1, T);
  const uint64_t nc1 = forward_flops(c, 1, 1), ncT = forward_flops(c, T, T);
  if (as_json) {
    std::cout << json{{"name", m->name},
                      {"dir", m->dir},
                      {"n_layer", c.n_layer},
                      {"model_type", c.model_type},
                      {"n_head", c.n_head},
                      {"n_kv_head", c.kv_heads()},
                      {"n_embd", c.n_embd},
                      {"head_dim", c.head_dim()},
                      {"n_positions", c.n_positions},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"vocab_size", c.vocab_size},
                      {"n_params", m->n_params},
                      {"dtype", m->stored_dtype},
                      {"kv_bytes_per_token", kv_bytes_per_position(c)},
                      {"kv_bytes_full_context", kv_bytes_per_position(c) * static_cast<uint64_t>(T)},
                      {"decode_flops",
                       {{"kv_cache", {{"T1", kv1}, {"Tmax", kvT}}}, {"no_cache", {{"T1", nc1}, {"Tmax", ncT}}}}},
                      {"load_seconds", m->load_seconds}}
                     .dump(2)
              << '\n';
    return 0;
  }
  std::printf("model          %s (%s)\n", m->name.c_str(), m->dir.c_str());
  std::printf("architecture   %s: %d layers, %d heads x %d (%d K/V heads), width %d, vocab %d\n",
              c.is_llama() ? c.model_type.c_str() : "GPT-2", c.n_layer, c.n_head, c.head_dim(), c.kv_heads(), c.n_embd,
              c.vocab_size);
  std::printf(
      "parameters     %" PRIu64 " (%s, stored %s)\n", m->n_params,
      format_bytes(c.is_llama() ? static_cast<double>(m->llama.bytes()) : static_cast<double>(m->n_params) * 4).c_str(),
      m->stored_dtype.c_str());
  if (c.n_positions < c.max_position_embeddings) {
    std::printf("context        %d positions (the model allows %d; --ctx N reserves for N)\n", c.n_positions,
                c.max_position_embeddings);
  } else {
    std::printf("context        %d positions\n", c.n_positions);
  }
  std::printf("KV cache       %s per token (2 x %d layers x %d x 4 B), %s at full context\n",
              format_bytes(static_cast<double>(kv_bytes_per_position(c))).c_str(), c.n_layer,
              c.kv_heads() * c.head_dim(), format_bytes(static_cast<double>(kv_bytes_per_position(c)) * T).c_str());
  std::printf("decode FLOPs   %-10s %18s %18s\n", "", "T = 1", ("T = " + std::to_string(T)).c_str());
  std::printf("               %-10s %18s %18s\n", "KV CACHE", format_flops(static_cast<double>(kv1)).c_str(),
              format_flops(static_cast<double>(kvT)).c_str());
  std::printf("               %-10s %18s %18s\n", "NO CACHE", format_flops(static_cast<double>(nc1)).c_str(),
              format_flops(static_cast<double>(ncT)).c_str());
  std::printf("load time      %.3f s\n", m->load_seconds);
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What this machine's memory can feed `threads` readers: the ceiling for a
// decode step, which reads every weight once. Best of 5 passes over 256 MiB
// (far past any cache), summed with Eigen's vectorised reduction.
double read_bandwidth_gb_per_s(int threads) {
  const size_t n = (size_t{256} << 20) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  std::vector<float> sums(static_cast<size_t>(threads));
  double best_s = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> readers;
    for (int t = 0; t < threads; ++t) {
      readers.emplace_back([&, t] {
        const size_t b = n * static_cast<size_t>(t) / threads, e = n * static_cast<size_t>(t + 1) / threads;
        sums[static_cast<size_t>(t)] =
            Eigen::Map<const Eigen::ArrayXf>(a.data() + b, static_cast<Eigen::Index>(e - b)).sum();
      });
    }
    for (auto& r : readers) r.join();
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // The sums feed the result (by a zero-weight term) so the reads cannot be optimised away.
  float total = 0;
  for (float v : sums) total += v;
  return static_cast<double>(n * sizeof(float)) / best_s / 1e9 + 0.0 * total;
}

int cmd_bench(const std::string& dir, int ctx, std::vector<int> lengths, int reps, bool as_json,
              const std::function<double(int)>& read_bandwidth, const KVSettings& kv_settings) {
  auto m = load_cli_model(dir, ctx);
  const Config& c = m->config;
  if (lengths.empty()) {
    for (int T : {16, 64, 128, 256, 512, 1024}) {
      if (T <= c.n_positions) lengths.push_back(T);
    }
    // A context shorter than every default: bench the whole context.
    if (lengths.empty() && c.n_positions >= 2) lengths.push_back(c.n_positions);
    if (lengths.empty()) {
      throw Error(m->name + ": the context is " + std::to_string(c.n_positions) +
                  " position, too short to bench (a decode step needs at least 2)");
    }
  }
  for (int T : lengths) {
    if (T < 2 || T > c.n_positions) {
      throw UsageError("--lengths: " + std::to_string(T) + " is outside 2.." + std::to_string(c.n_positions));
    }
  }
  Engine engine(*m);
  const KVLayout layout = kv_settings.layout_for(c);
  KVCache cache(layout);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, c.vocab_size - 1);
  std::vector<int> all(static_cast<size_t>(c.n_positions));
  for (int& t : all) t = pick(rng);
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };

  json rows = json::array();
  if (!as_json) {
    std::printf("%s: %d layers, width %d, %d threads, KV cache %s\n", m->name.c_str(), c.n_layer, c.n_embd,
                engine_threads(), layout.describe().c_str());
    std::printf("%6s %14s %16s %14s %16s %12s %12s\n", "T", "prefill tok/s", "KV decode tok/s", "decode GB/s",
                "NO CACHE tok/s", "time ratio", "FLOP ratio");
  }
  for (int T : lengths) {
    std::vector<int> seq(all.begin(), all.begin() + T);
    std::vector<double> pre, kv, nc;
    for (int r = 0; r < reps; ++r) {
      cache.clear();
      auto t0 = clock::now();
      engine.forward(seq, 0, &cache, false);
      pre.push_back(ms_since(t0));
    }
    std::vector<int> prefix(seq.begin(), seq.end() - 1);
    cache.clear();
    engine.forward(prefix, 0, &cache, false);
    for (int r = 0; r < std::max(reps * 4, 16); ++r) {
      cache.truncate(0, T - 1);
      auto t0 = clock::now();
      engine.forward(seq, T - 1, &cache, false);
      kv.push_back(ms_since(t0));
    }
    for (int r = 0; r < reps; ++r) {
      auto t0 = clock::now();
      engine.forward(seq, 0, nullptr, false, false, &layout);
      nc.push_back(ms_since(t0));
    }
    const double pre_ms = median(pre), kv_ms = median(kv), nc_ms = median(nc);
    const double flop_ratio = static_cast<double>(forward_flops(c, T, T)) / static_cast<double>(forward_flops(c, 1, T));
    // The cache's bytes a decode step at length T reads (its layout's rows of every visible position).
    const uint64_t decode_bytes =
        forward_read_bytes(*m, layout.bytes_per_position() * static_cast<uint64_t>(layout.visible_count(T - 1)));
    const double decode_gbps = static_cast<double>(decode_bytes) / (kv_ms / 1000) / 1e9;
    rows.push_back({{"T", T},
                    {"prefill_tokens_per_s", T / (pre_ms / 1000)},
                    {"kv_decode_tokens_per_s", 1000 / kv_ms},
                    {"no_cache_tokens_per_s", 1000 / nc_ms},
                    {"kv_decode_ms", kv_ms},
                    {"no_cache_ms", nc_ms},
                    {"time_ratio", nc_ms / kv_ms},
                    {"decode_read_bytes", decode_bytes},
                    {"decode_gb_per_s", decode_gbps},
                    {"kv_flops", forward_flops(c, 1, T)},
                    {"no_cache_flops", forward_flops(c, T, T)},
                    {"flop_ratio", flop_ratio}});
    if (!as_json) {
      std::printf("%6d %14.0f %16.1f %14.1f %16.1f %12.1f %12.1f\n", T, T / (pre_ms / 1000), 1000 / kv_ms, decode_gbps,
                  1000 / nc_ms, nc_ms / kv_ms, flop_ratio);
      std::fflush(stdout);
    }
  }
  if (!as_json) {
    std::printf(
        "memory read bandwidth with %d threads: %.1f GB/s (the ceiling for decode GB/s when the weights do "
        "not fit in the CPU caches)\n",
        engine_threads(), read_bandwidth(engine_threads()));
  } else {
    std::cout << json{{"model", m->name},
                      {"threads", engine_threads()},
                      {"kv_layout", layout.describe()},
                      {"read_bandwidth_gb_per_s", read_bandwidth(engine_threads())},
                      {"rows", rows}}
                     .dump(2)
              << '\n';
  }
  return 0;
}

// Beam search is deterministic and runs on the cache; speculative decoding
// needs a draft. Combinations without a defined meaning are usage errors.
void check_decode_flags(const CLI::App& gen, bool beams, bool draft, bool lpen, bool spec) {
  auto given = [&](const char* flag) { return gen.get_option(flag)->count() > 0; };
  if (beams) {
    if (draft || spec) throw UsageError("--beams cannot be combined with --draft/--speculate (choose one strategy)");
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
  if (lpen) throw UsageError("--length-penalty needs --beams N");
  if (spec && !draft) throw UsageError("--speculate needs --draft DIR (the draft model folder)");
  for (const char* f : {"--no-cache", "--stop"}) {
    if (given(f)) throw UsageError(std::string("--draft cannot be combined with ") + f);
  }
}

}  // namespace

std::string default_model_dir() {
  if (const char* env = std::getenv("KVSCOPE_MODEL"); env && *env) return env;
  return asset_path("models/kvscope-tiny");
}

std::shared_ptr<const Model> load_cli_model(const std::string& dir, int ctx) {
  LoadControl control;
  control.context = ctx;
  return load_model(dir.empty() ? default_model_dir() : dir, control);
}

void check_window_context(const std::string& dir, int ctx) {
  const std::string d = dir.empty() ? default_model_dir() : dir;
  Config c = load_config((std::filesystem::path(d) / "config.json").string());
  apply_context(c, ctx, d);
}

void check_context_fits(const Model& m, const std::string& prompt, int max_new, const char* flag) {
  const Config& c = m.config;
  const long long need = static_cast<long long>(m.tokenizer.encode_prompt(prompt).size()) + max_new - 1;
  if (need <= c.n_positions || c.n_positions >= c.max_position_embeddings) return;
  const long long fit = std::min<long long>(need, c.max_position_embeddings);
  const double mib = static_cast<double>(kv_bytes_per_position(c)) * static_cast<double>(fit) / (1 << 20);
  char kv[64];
  std::snprintf(kv, sizeof kv, "%.0f MiB", mib);
  throw UsageError("the prompt (" + std::to_string(need - max_new + 1) + " tokens) plus " + flag + " " +
                   std::to_string(max_new) + " needs " + std::to_string(need) + " positions, more than the " +
                   std::to_string(c.n_positions) + " kvscope reserves the KV cache for (" + m.name + " allows " +
                   std::to_string(c.max_position_embeddings) + "): pass --ctx " + std::to_string(fit) +
                   " (its f32 KV cache takes " + kv + ") or a smaller " + flag);
}

// Row format and pages combine with beam search and speculative decoding; a
// window cannot: the beams' forks and the draft's rollbacks need positions it
// would evict.
namespace {
void refuse_window(const KVSettings& kv, const char* strategy) {
  if (kv.window > 0 || kv.sinks > 0)
    throw UsageError(std::string(kv.window > 0 ? "--kv-window" : "--kv-sinks") + ": not available with " + strategy +
                     " (forks and rollbacks need positions a sliding window evicts; --kv-dtype and --kv-block "
                     "combine)");
}
}  // namespace

int run_cli(int argc, char** argv, const AppHooks& hooks) {
  CLI::App app{"kvscope: watch a real GPT-2 write text, token by token, with its KV cache"};
  app.set_version_flag("--version", "kvscope 0.1");
  app.require_subcommand(0, 1);

  const char* ctx_help =
      "Llama family: positions to reserve the KV cache for (default: max_position_embeddings, at most 8192)";
  // Bare `kvscope`: the window.
  GuiOptions gui;
  app.add_option("--model", gui.model_dir,
                 "Model folder: GPT-2 (config.json, model.safetensors, vocab.json, merges.txt) or Llama/Mistral/Qwen2 "
                 "(config.json, model.safetensors or shards, tokenizer.json)")
      ->check(non_empty("a model folder"));
  app.add_option("--prompt", gui.prompt, "Prompt to start with (default: the first preset)")
      ->check(non_empty("some text to continue"));
  app.add_flag("--no-cache", gui.no_cache, "Start in NO CACHE mode");
  app.add_option("--max-new", gui.max_new, "New tokens per generation")->check(int_in(1, 1 << 20));
  app.add_option("--ctx", gui.ctx, ctx_help)->check(int_in(2, 1 << 24));
  app.add_option("--demo-frames", gui.demo_frames, "Run a scripted demo for N frames, then exit (smoke tests)")
      ->check(int_in(0, 1 << 24));
  app.add_option("--screenshot", gui.screenshot, "With --demo-frames: save the last frame to this PNG")
      ->check(non_empty("a PNG file name"));
  app.add_option("--soak-rounds", gui.soak_rounds,
                 "Generate to the full context, switch the cache mode and reset, N times; report resident memory "
                 "and GL objects, exit 1 on growth (scripts/soak.sh)")
      ->check(int_in(0, 1 << 20));

  GenerateArgs g;
  auto* gen = app.add_subcommand("generate", "Generate text (no display needed)");
  gen->add_option("--model", g.model, "Model folder, GPT-2 or Llama/Mistral/Qwen2 (default: the embedded model)")
      ->check(non_empty("a model folder"));
  gen->add_option("--prompt", g.prompt, "Text to continue")->required()->check(non_empty("some text to continue"));
  gen->add_option("--max-new", g.max_new, "Maximum new tokens")->check(int_in(1, 1 << 20));
  gen->add_option("--ctx", g.ctx, ctx_help)->check(int_in(2, 1 << 24));
  auto* greedy = gen->add_flag("--greedy", g.greedy, "Pick the most likely token (default)");
  auto* temp =
      gen->add_option("--temperature", g.temperature, "Sample with this temperature")->check(real_in(0.001, 1000));
  auto* topk =
      gen->add_option("--top-k", g.top_k, "Keep the k most likely tokens (0 = off)")->check(int_in(0, 1 << 24));
  auto* topp =
      gen->add_option("--top-p", g.top_p, "Keep the smallest set reaching probability p")->check(real_in(0, 1, true));
  greedy->excludes(temp)->excludes(topk)->excludes(topp);
  gen->add_option("--repetition-penalty", g.repetition_penalty,
                  "Divide (multiply) positive (negative) logits of seen tokens (1 = off)")
      ->check(real_in(0.01, 100));
  gen->add_option("--seed", g.seed, "Sampling seed")->check(any_u64());
  gen->add_option("--stop", g.stop, "Stop when this string is generated (repeatable)")
      ->check(non_empty("the text to stop at"));
  gen->add_flag("--no-cache", g.no_cache, "Recompute the whole sequence every step");
  gen->add_flag("--json", g.json, "JSON Lines: prefill, steps, done");
  KVFlags gen_kv;
  add_kv_flags(gen, gen_kv);
  DecodeArgs dec;
  auto* beams = gen->add_option("--beams", dec.beams, "Beam search with N beams (1-8; Hugging Face conventions)")
                    ->check(int_in(1, 8));
  auto* lpen = gen->add_option("--length-penalty", dec.length_penalty,
                               "Beam score = sum log p / (generated length)^L (default 1.0)")
                   ->check(real_in(-100, 100));
  auto* draft = gen->add_option("--draft", dec.draft, "Speculative decoding with this draft model folder")
                    ->check(non_empty("a draft model folder"));
  auto* spec =
      gen->add_option("--speculate", dec.speculate, "Tokens the draft proposes per iteration (1-16, default 4)")
          ->check(int_in(1, 16));

  std::string tok_model, tok_text;
  bool tok_json = false;
  auto* tokc = app.add_subcommand("tokenize", "Show the token ids and pieces of a text");
  tokc->add_option("--model", tok_model, "Folder with tokenizer.json, or vocab.json and merges.txt")
      ->check(non_empty("a model folder"));
  tokc->add_option("--text", tok_text, "Text to tokenize")->required();
  tokc->add_flag("--json", tok_json, "Print {\"ids\":[...],\"pieces\":[...]}");

  std::string ins_model;
  bool ins_json = false;
  auto* ins = app.add_subcommand("inspect", "Architecture, parameters, KV bytes per token, FLOPs per step");
  ins->add_option("--model", ins_model, "Model folder (GPT-2, Llama, Mistral, Qwen2)")
      ->check(non_empty("a model folder"));
  ins->add_flag("--json", ins_json, "Print JSON");
  int ins_ctx = 0;
  ins->add_option("--ctx", ins_ctx, ctx_help)->check(int_in(2, 1 << 24));

  std::string bench_model;
  std::vector<int> bench_lengths;
  int bench_reps = 3;
  bool bench_json = false;
  auto* bench = app.add_subcommand("bench", "Prefill and decode speed in both modes at several lengths");
  bench->add_option("--model", bench_model, "Model folder (GPT-2, Llama, Mistral, Qwen2)")
      ->check(non_empty("a model folder"));
  bench
      ->add_option("--lengths", bench_lengths,
                   "Sequence lengths, each 2..the model's context (default 16 64 128 256 512 1024, those that fit)")
      ->check(int_in(2, 1 << 20));
  bench->add_option("--reps", bench_reps, "Repetitions (median)")->check(int_in(1, 1000));
  bench->add_flag("--json", bench_json, "Print JSON");
  int bench_ctx = 0;
  bench->add_option("--ctx", bench_ctx, ctx_help)->check(int_in(2, 1 << 24));
  KVFlags bench_kv;
  add_kv_flags(bench, bench_kv);

  EvalArgs ev;
  KVFlags ev_kv;
  auto* evc = app.add_subcommand(
      "eval", "Score a UTF-8 text: NLL/token, perplexity, bits/byte (vs dense f32 for other KV layouts)");
  evc->add_option("--file", ev.file, "UTF-8 text to score (documents separated by <|endoftext|>)")
      ->required()
      ->check(non_empty("a text file"));
  evc->add_option("--model", ev.model, "GPT-2 folder (default: the embedded model)")
      ->check(non_empty("a model folder"));
  evc->add_flag("--json", ev.json, "Print JSON");
  add_kv_flags(evc, ev_kv);

  RenderOptions ro;
  std::string layer = "mean", head = "mean";
  auto* render = app.add_subcommand("render", "Render the 3D view to PNG without a window");
  render->add_option("--model", ro.model_dir, "Model folder (GPT-2, Llama, Mistral, Qwen2)")
      ->check(non_empty("a model folder"));
  render->add_option("--prompt", ro.prompt, "Prompt")->required()->check(non_empty("some text to continue"));
  render->add_option("--steps", ro.steps, "Forwards to run (the prefill is the first)")->check(int_in(1, 1 << 20));
  render->add_option("--ctx", ro.ctx, ctx_help)->check(int_in(2, 1 << 24));
  render->add_option("--out", ro.out, "PNG of the last step")->check(non_empty("a PNG file name"));
  render->add_option("--frames", ro.frames_dir, "Write one PNG per step into this folder")
      ->check(non_empty("a folder"));
  render->add_option("--width", ro.width, "Image width (also at most what the OpenGL driver allows)")
      ->check(int_in(64, 8192));
  render->add_option("--height", ro.height, "Image height (also at most what the OpenGL driver allows)")
      ->check(int_in(64, 8192));
  render->add_option("--camera", ro.camera, "front|top|side|follow")
      ->check(CLI::IsMember({"front", "top", "side", "follow"}));
  render->add_flag("--no-cache", ro.no_cache, "NO CACHE mode");
  render->add_option("--layer", layer, "Layer whose attention the beams show (0..layers-1), or mean");
  render->add_option("--head", head, "Head whose attention the beams show (0..heads-1), or mean");
  render->add_flag("--bench", ro.bench, "Report frame times at full context with every beam (no PNG)");
  render->add_option("--video", ro.video, "Write an MP4 of the generation (pipes frames to ffmpeg)")
      ->check(non_empty("an MP4 file name"))
      ->check(not_an_option());
  render->add_flag("--presentation", ro.presentation, "Presentation mode: compact HUD");
  render->add_flag("--heatmaps", ro.heatmaps, "Draw the attention heatmap grid (one per layer and head)");
  KVFlags render_kv;
  add_kv_flags(render, render_kv);
  auto* rbeams = render->add_option("--beams", ro.beams, "Draw beam search with N beams as a tree (--steps = max new)")
                     ->check(int_in(1, 8));
  auto* rdraft = render->add_option("--draft", ro.draft, "Draw speculative decoding with this draft model folder")
                     ->check(non_empty("a draft model folder"));
  render->add_option("--speculate", ro.speculate, "Tokens drafted per iteration with --draft (1-16)")
      ->check(int_in(1, 16));
  float rtemp = 0;
  auto* rtemperature = render->add_option("--temperature", rtemp, "With --draft: sample at this temperature")
                           ->check(real_in(0, 100, true));
  rbeams->excludes(rdraft);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kvscope: error: %s (run kvscope --help)\n", e.what());
    return 2;
  }

  auto parse_index = [](const std::string& flag, const std::string& v) {
    if (v == "mean") return -1;
    try {
      size_t used = 0;
      const int x = std::stoi(v, &used);
      if (used == v.size() && x >= 0) return x;
    } catch (const std::exception&) {
    }
    throw UsageError(flag + ": \"" + v + "\" is not a layer/head index or \"mean\"");
  };

  auto kv_settings = [](const KVFlags& f) {
    KVSettings k;
    std::string problem;
    if (!kv_settings_from_flags(f, &k, &problem)) throw UsageError(problem);
    return k;
  };

  try {
    if (*evc) {
      ev.kv = kv_settings(ev_kv);
      return cmd_eval(ev, default_model_dir());
    }
    if (*gen) {
      g.kv = kv_settings(gen_kv);
      const bool sampling = temp->count() > 0 || topk->count() > 0 || topp->count() > 0;
      if (beams->count() || lpen->count() || draft->count() || spec->count()) {
        check_decode_flags(*gen, beams->count() > 0, draft->count() > 0, lpen->count() > 0, spec->count() > 0);
        refuse_window(g.kv, beams->count() ? "--beams" : "--draft");
        dec.kv = g.kv;
        if (g.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
        dec.model = g.model;
        dec.prompt = g.prompt;
        dec.max_new = g.max_new;
        dec.ctx = g.ctx;
        dec.json = g.json;
        dec.sampler.greedy = !sampling;
        dec.sampler.temperature = g.temperature;
        dec.sampler.top_k = g.top_k;
        dec.sampler.top_p = g.top_p;
        dec.sampler.repetition_penalty = g.repetition_penalty;
        dec.sampler.seed = g.seed;
        return beams->count() ? cmd_generate_beams(dec) : cmd_generate_speculative(dec);
      }
      return cmd_generate(g, sampling);
    }
    if (*tokc) return cmd_tokenize(tok_model, tok_text, tok_json);
    if (*ins) return cmd_inspect(ins_model, ins_json, ins_ctx);
    if (*bench)
      return cmd_bench(bench_model, bench_ctx, bench_lengths, bench_reps, bench_json,
                       hooks.read_bandwidth ? hooks.read_bandwidth : read_bandwidth_gb_per_s, kv_settings(bench_kv));
    if (*render) {
      if (!ro.bench && ro.out.empty() && ro.frames_dir.empty() && ro.video.empty()) {
        throw UsageError("render: give --out FILE.png, --frames DIR and/or --video FILE.mp4 (or --bench)");
      }
      if (ro.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
      if (rtemperature->count()) {
        ro.sampler.greedy = false;
        ro.sampler.temperature = rtemp;
      }
      ro.layer = parse_index("--layer", layer);
      ro.head = parse_index("--head", head);
      ro.kv = kv_settings(render_kv);
      if (ro.beams > 0 || !ro.draft.empty()) refuse_window(ro.kv, ro.beams > 0 ? "--beams" : "--draft");
      if (!hooks.render) throw Error("this kvscope was built without the renderer (KVSCOPE_GUI=OFF)");
      return hooks.render(ro);
    }
    if (gui.ctx > 0) check_window_context(gui.model_dir, gui.ctx);
    if (!hooks.gui)
      throw Error("this kvscope was built without the GUI (KVSCOPE_GUI=OFF); use a subcommand, see --help");
    return hooks.gui(gui);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kvscope: error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "kvscope: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvscope: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvscope: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace kvscope
