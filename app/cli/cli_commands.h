// The subcommands run_cli parses: each family adds its flags to the app
// (bound to a struct that outlives the parse) and runs when it was given.
// Errors are thrown (UsageError: exit 2, Error: exit 1); run_cli maps them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "app/cli/cli_decode.h"
#include "app/cli/cli_kv.h"
#include "model/decoding/generator.h"
#include "model/serving/scheduler.h"

namespace kvscope {

// --ctx's help, the same for every subcommand that loads a model.
inline constexpr const char* kCtxHelp =
    "Llama family: positions to reserve the KV cache for (default: max_position_embeddings, at most 8192)";

// --bf16-products' help, the same for every subcommand that takes it.
inline constexpr const char* kBf16ProductsHelp =
    "BF16 checkpoints: round each product's inputs to bf16 (as PyTorch's bf16 path does) and multiply with the "
    "CPU's bf16 dot products (AVX512_BF16): faster prefill, slightly different logits (docs/batching.md)";

// NO CACHE with eviction by score: a usage error naming both flags.
void refuse_no_cache_evict(bool no_cache, const KVLayout& kv);

// `generate`: one token at a time, or beam search (--beams) or speculative
// decoding (--draft).
struct GenerateArgs {
  std::string model;
  std::string prompt;
  int max_new = 64;
  int ctx = 0;                 // --ctx (0 = the default context)
  bool bf16_products = false;  // --bf16-products
  bool greedy = false;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool no_cache = false;
  bool json = false;
  KVLayout kv;
  std::string chat, system, chat_format;  // --chat TEXT: one chat turn instead of --prompt
};

struct GenerateCommand {
  CLI::App* cmd = nullptr;
  GenerateArgs args;       // args.kv: the --kv-* flags
  StrategyFlags strategy;  // --beams, --length-penalty, --draft, --speculate
  CLI::Option *temperature = nullptr, *top_k = nullptr, *top_p = nullptr;
};
void add_generate_command(CLI::App& app, GenerateCommand& c);
// --greedy or --temperature/--top-k/--top-p (which exclude it),
// --repetition-penalty and --seed, bound to c.args (generate and chat).
void add_sampling_flags(CLI::App* cmd, GenerateCommand& c);
// Whether --temperature, --top-k or --top-p asked for sampling (else greedy).
bool sampling_requested(const GenerateCommand& c);
// The generator's options from the flags.
GenerateOptions generate_options(const GenerateArgs& a, bool sampling_requested);
int run_generate_command(GenerateCommand& c);

// `tokenize` and `inspect`: what a model folder holds.
struct TokenizeCommand {
  CLI::App* cmd = nullptr;
  std::string model, text;
  bool json = false;
};
void add_tokenize_command(CLI::App& app, TokenizeCommand& c);
int run_tokenize_command(const TokenizeCommand& c);

struct InspectCommand {
  CLI::App* cmd = nullptr;
  std::string model;
  bool json = false;
  int ctx = 0;
};
void add_inspect_command(CLI::App& app, InspectCommand& c);
int run_inspect_command(const InspectCommand& c);

// `quantize`: the model written as a GGUF file at one tensor type (cli_quantize.cpp).
struct QuantizeCommand {
  CLI::App* cmd = nullptr;
  std::string model, type, out;
  bool json = false;
};
void add_quantize_command(CLI::App& app, QuantizeCommand& c);
int run_quantize_command(const QuantizeCommand& c);

// `bench`: prefill and decode speed in both modes at several lengths.
struct BenchCommand {
  CLI::App* cmd = nullptr;
  std::string model;
  std::vector<int> lengths;
  std::vector<int> positions;  // --positions: forward cost of n new positions, in decode steps
  int reps = 3;
  bool json = false;
  int ctx = 0;
  bool bf16_products = false;
  bool kernels = false;  // --kernels: one core's multiply-add rates, no model
  std::string serve;     // --serve FILE: serving's decode step against the bare forward (cli_bench_serve.cpp)
  KVLayout kv;
};
void add_bench_command(CLI::App& app, BenchCommand& c);
// `bench --kernels` (cli_bench_kernels.cpp).
int bench_kernels(int reps, bool as_json);
// `bench --serve FILE` (cli_bench_serve.cpp), `kv` checked.
int bench_serve(const BenchCommand& c, const KVLayout& kv);
// `read_bandwidth`: GB/s with n threads; null = the real probe.
int run_bench_command(const BenchCommand& c, const std::function<double(int)>& read_bandwidth);

// `serve`: many requests from one paged KV pool (model/serving/).
struct ServeCommand {
  CLI::App* cmd = nullptr;
  std::string requests, model, policy = "continuous";
  std::string trace;                       // --trace: a Mooncake trace in place of --requests
  double trace_ms_per_step = 1000;         // --trace-ms-per-step
  int trace_limit = 0, trace_block = 512;  // --trace-limit (0: all), --trace-block
  int ctx = 0;
  bool bf16_products = false;
  int pool_blocks = SchedulerConfig{}.pool_blocks, max_batch_tokens = SchedulerConfig{}.max_batch_tokens,
      max_running = SchedulerConfig{}.max_running;
  bool prefix_caching = false, json = false;
  KVLayout kv;  // --kv-dtype and --kv-block only (serve's default block is kDefaultKvBlock)
};
void add_serve_command(CLI::App& app, ServeCommand& c);
int run_serve_command(const ServeCommand& c);

}  // namespace kvscope
