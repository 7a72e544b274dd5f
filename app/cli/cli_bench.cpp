// `kvscope bench`: prefill, KV-cache decode and NO CACHE speed at several
// sequence lengths on random tokens, with the memory read bandwidth that
// bounds a decode step.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "app/cli/cli.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/engine/engine.h"
#include "model/engine/kernel_peaks.h"

namespace kvscope {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// What this machine's memory can feed `threads` readers: the ceiling for a
// decode step, which reads every weight once. Best of 5 passes over 256 MiB
// (far past any cache), summed with Eigen's vectorised reduction.
double read_bandwidth_gb_per_s(int threads) {
  const size_t n = (size_t{256} << 20) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  std::vector<float> sums(static_cast<size_t>(threads));
  const double bytes_per_s = best_rate(5, static_cast<double>(n * sizeof(float)), [&] {
    std::vector<std::thread> readers;
    for (int t = 0; t < threads; ++t) {
      readers.emplace_back([&, t] {
        const size_t b = n * static_cast<size_t>(t) / threads, e = n * static_cast<size_t>(t + 1) / threads;
        sums[static_cast<size_t>(t)] =
            Eigen::Map<const Eigen::ArrayXf>(a.data() + b, static_cast<Eigen::Index>(e - b)).sum();
      });
    }
    for (auto& r : readers) r.join();
  });
  // The sums feed the result (by a zero-weight term) so the reads cannot be optimised away.
  float total = 0;
  for (float v : sums) total += v;
  return bytes_per_s / 1e9 + 0.0 * total;
}

// --lengths as given (each within 2..context), or the defaults that fit.
std::vector<int> bench_lengths(const Model& m, std::vector<int> lengths) {
  const Config& c = m.config;
  if (lengths.empty()) {
    for (int T : {16, 64, 128, 256, 512, 1024}) {
      if (T <= c.n_positions) lengths.push_back(T);
    }
    // A context shorter than every default: bench the whole context.
    if (lengths.empty() && c.n_positions >= 2) lengths.push_back(c.n_positions);
    if (lengths.empty()) {
      throw Error(m.name + ": the context is " + std::to_string(c.n_positions) +
                  " position, too short to bench (a decode step needs at least 2)");
    }
  }
  for (int T : lengths) {
    if (T < 2 || T > c.n_positions) {
      throw UsageError("--lengths: " + std::to_string(T) + " is outside 2.." + std::to_string(c.n_positions));
    }
  }
  return lengths;
}

// Median milliseconds of one length's prefill, KV-cache decode step (the last
// position, on a cache holding the others) and NO CACHE step.
struct LengthTimes {
  double prefill_ms = 0, kv_ms = 0, no_cache_ms = 0;
};

LengthTimes time_length(Engine& engine, KVCache& cache, const KVLayout& layout, const std::vector<int>& seq, int reps) {
  const int T = static_cast<int>(seq.size());
  std::vector<double> pre, kv, nc;
  for (int r = 0; r < reps; ++r) {
    cache.clear();
    auto t0 = Clock::now();
    engine.forward(seq, 0, &cache, false);
    pre.push_back(ms_since(t0));
  }
  std::vector<int> prefix(seq.begin(), seq.end() - 1);
  cache.clear();
  engine.forward(prefix, 0, &cache, false);
  for (int r = 0; r < std::max(reps * 4, 16); ++r) {
    cache.truncate(0, T - 1);
    auto t0 = Clock::now();
    engine.forward(seq, T - 1, &cache, false);
    kv.push_back(ms_since(t0));
  }
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    engine.forward(seq, 0, nullptr, false, false, &layout);
    nc.push_back(ms_since(t0));
  }
  return {median(pre), median(kv), median(nc)};
}

// One row of the table (JSON), printed too unless `as_json`.
json bench_row(const Model& m, const KVLayout& layout, int T, const LengthTimes& t, bool as_json) {
  const Config& c = m.config;
  const double flop_ratio = static_cast<double>(forward_flops(c, T, T)) / static_cast<double>(forward_flops(c, 1, T));
  // The cache's bytes a decode step at length T reads (its layout's rows of every visible position).
  const uint64_t decode_bytes =
      forward_read_bytes(m, layout.bytes_per_position() * static_cast<uint64_t>(layout.visible_count(T - 1)));
  const double decode_gbps = static_cast<double>(decode_bytes) / (t.kv_ms / 1000) / 1e9;
  if (!as_json) {
    out_printf("%6d %14.0f %16.1f %14.1f %16.1f %12.1f %12.1f\n", T, T / (t.prefill_ms / 1000), 1000 / t.kv_ms,
               decode_gbps, 1000 / t.no_cache_ms, t.no_cache_ms / t.kv_ms, flop_ratio);
    std::fflush(stdout);
  }
  return {{"T", T},
          {"prefill_tokens_per_s", T / (t.prefill_ms / 1000)},
          {"kv_decode_tokens_per_s", 1000 / t.kv_ms},
          {"no_cache_tokens_per_s", 1000 / t.no_cache_ms},
          {"kv_decode_ms", t.kv_ms},
          {"no_cache_ms", t.no_cache_ms},
          {"time_ratio", t.no_cache_ms / t.kv_ms},
          {"decode_read_bytes", decode_bytes},
          {"decode_gb_per_s", decode_gbps},
          {"kv_flops", forward_flops(c, 1, T)},
          {"no_cache_flops", forward_flops(c, T, T)},
          {"flop_ratio", flop_ratio}};
}

// A forward of n new positions (all their logits, as a speculative verify
// or a batch of decoding requests needs) after a cached prefix of
// kPositionsPrefix tokens; its median time over that of n = 1. Each weight
// is read once per forward, so while the machine is memory-bound the ratio
// stays near 1; it grows once the multiply-adds take longer than the reads.
constexpr int kPositionsPrefix = 64;

// Each --positions n fits after the prefix; checked before anything is printed.
void check_positions(const Model& m, const std::vector<int>& positions, const KVLayout& kv) {
  const int ctx = m.config.n_positions;
  // Else the range below would read 1..0 (or less), naming no reason.
  if (ctx <= kPositionsPrefix)
    throw UsageError("--positions: " + m.name + "'s context is " + std::to_string(ctx) +
                     " positions, too short for bench's cached prefix of " + std::to_string(kPositionsPrefix) +
                     " tokens plus 1 new position (expected a context of at least " +
                     std::to_string(kPositionsPrefix + 1) + "; --ctx where the model allows more)");
  for (int n : positions) {
    if (n < 1 || kPositionsPrefix + n > ctx) {
      throw UsageError("--positions: " + std::to_string(n) + " is outside 1.." +
                       std::to_string(ctx - kPositionsPrefix) + " (the context less a prefix of " +
                       std::to_string(kPositionsPrefix) + ")");
    }
  }
  // Each timing rolls the cache back to the prefix; a window has dropped
  // positions by then, and a rollback cannot bring them back.
  const int most = kPositionsPrefix + *std::max_element(positions.begin(), positions.end());
  if (kv.window > 0 && kv.window < most)
    throw UsageError("--kv-window " + std::to_string(kv.window) + ": bench --positions rolls the cache back to its " +
                     std::to_string(kPositionsPrefix) +
                     "-token prefix after each forward, which needs every position (" + std::to_string(most) +
                     " here) held (expected --kv-window " + std::to_string(most) + " or more, or no window)");
}

json bench_positions(Engine& engine, KVCache& cache, const std::vector<int>& all, const std::vector<int>& positions,
                     int reps, bool as_json) {
  std::vector<int> ns{1};
  ns.insert(ns.end(), positions.begin(), positions.end());
  const int n_max = *std::max_element(ns.begin(), ns.end());
  // The prefix is the same for every n: computed once (also the warm-up).
  cache.clear();
  engine.forward(std::vector<int>(all.begin(), all.begin() + kPositionsPrefix + n_max), 0, &cache, false);
  // Every n once per round, so a slow spell of a shared machine falls on all
  // of them alike rather than on whichever n ran then.
  std::vector<std::vector<int>> seqs;
  for (int n : ns) seqs.emplace_back(all.begin(), all.begin() + kPositionsPrefix + n);
  std::vector<std::vector<double>> t(ns.size());
  for (int r = 0; r < std::max(reps * 4, 16); ++r) {
    for (size_t i = 0; i < ns.size(); ++i) {
      cache.truncate(0, kPositionsPrefix);
      const auto t0 = Clock::now();
      engine.forward(seqs[i], kPositionsPrefix, &cache, false, true);
      t[i].push_back(ms_since(t0));
    }
  }
  std::vector<double> ms;
  for (auto& ti : t) ms.push_back(median(ti));
  if (!as_json) out_printf("%10s %12s %14s\n", "positions", "forward ms", "decode steps");
  json rows = json::array();
  for (size_t i = 1; i < ns.size(); ++i) {
    if (!as_json) out_printf("%10d %12.2f %14.2f\n", ns[i], ms[i], ms[i] / ms[0]);
    rows.push_back({{"n", ns[i]}, {"forward_ms", ms[i]}, {"decode_steps", ms[i] / ms[0]}});
  }
  return rows;
}

int cmd_bench(const BenchCommand& b, const KVLayout& kv_settings, const std::function<double(int)>& read_bandwidth) {
  auto m = load_cli_model(b.model, b.ctx, b.bf16_products);
  const Config& c = m->config;
  const std::vector<int> lengths = bench_lengths(*m, b.lengths);
  if (!b.positions.empty()) check_positions(*m, b.positions, kv_settings);
  Engine engine(*m);
  const KVLayout layout = kv_settings.on_model(c);
  KVCache cache(layout);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, c.vocab_size - 1);
  std::vector<int> all(static_cast<size_t>(c.n_positions));
  for (int& t : all) t = pick(rng);

  if (!b.json) {
    out_printf("%s: %d layers, width %d, %d threads, KV cache %s%s\n", m->name.c_str(), c.n_layer, c.n_embd,
               engine_threads(), layout.describe().c_str(), m->bf16_products ? ", bf16 products" : "");
    if (b.positions.empty())
      out_printf("%6s %14s %16s %14s %16s %12s %12s\n", "T", "prefill tok/s", "KV decode tok/s", "decode GB/s",
                 "NO CACHE tok/s", "time ratio", "FLOP ratio");
  }
  if (!b.positions.empty()) {
    const json rows = bench_positions(engine, cache, all, b.positions, b.reps, b.json);
    if (b.json)
      out_line(json{
          {"model", m->name}, {"threads", engine_threads()}, {"bf16_products", m->bf16_products}, {"positions", rows}}
                   .dump(2));
    return 0;
  }
  json rows = json::array();
  for (int T : lengths) {
    const std::vector<int> seq(all.begin(), all.begin() + T);
    rows.push_back(bench_row(*m, layout, T, time_length(engine, cache, layout, seq, b.reps), b.json));
  }
  if (!b.json) {
    out_printf(
        "memory read bandwidth with %d threads: %.1f GB/s (the ceiling for decode GB/s when the weights do "
        "not fit in the CPU caches)\n",
        engine_threads(), read_bandwidth(engine_threads()));
  } else {
    out_line(json{
        {"model", m->name},
        {"threads", engine_threads()},
        {"bf16_products", m->bf16_products},
        {"kv_layout", layout.describe()},
        {"read_bandwidth_gb_per_s", read_bandwidth(engine_threads())},
        {"rows",
         rows}}.dump(2));
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, BenchCommand& c) {
  c.cmd = app.add_subcommand("bench", "Prefill and decode speed in both modes at several lengths");
  c.cmd->add_option("--model", c.model, "Model folder (GPT-2, Llama, Mistral, Qwen2) or GGUF file")
      ->check(non_empty("a model folder"));
  auto* lengths =
      c.cmd
          ->add_option("--lengths", c.lengths,
                       "Sequence lengths, each 2..the model's context (default 16 64 128 256 512 1024, those that fit)")
          ->check(int_in(2, 1 << 20));
  c.cmd
      ->add_option("--positions", c.positions,
                   "Instead of the lengths table: the time of a forward over each number of new positions, in "
                   "decode steps (after a cached prefix of 64 tokens)")
      ->check(int_in(1, 1 << 20))
      ->excludes(lengths);
  c.cmd->add_option("--reps", c.reps, "Repetitions (median)")->check(int_in(1, 1000));
  c.cmd->add_flag("--json", c.json, "Print JSON");
  c.cmd->add_option("--ctx", c.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  c.cmd->add_flag("--bf16-products", c.bf16_products, kBf16ProductsHelp);
  c.cmd->add_flag("--kernels", c.kernels,
                  "Instead of a model's speed: one core's multiply-add rates, the linear kernels' at 1-16 positions "
                  "(weights in the CPU's cache) against the f32 FMA and bf16 dot product peaks");
  c.cmd
      ->add_option("--serve", c.serve,
                   "Instead of the lengths table: a requests file served together, its decode step against the bare "
                   "forward of as many positions and against serving them one at a time (interleaved rounds: --reps)")
      ->check(non_empty("a requests file"))
      ->excludes(lengths);
  add_kv_flags(c.cmd, c.kv);
}

int run_bench_command(const BenchCommand& c, const std::function<double(int)>& read_bandwidth) {
  if (c.kernels) {
    for (const char* flag : {"--model", "--lengths", "--positions", "--serve", "--bf16-products", "--ctx",
                             "--kv-window", "--kv-sinks", "--kv-dtype", "--kv-block", "--kv-evict", "--kv-budget",
                             "--kv-snap-window", "--kv-snap-pool", "--kv-snap-pooling"})
      if (c.cmd && c.cmd->count(flag) > 0)
        throw UsageError(std::string("--kernels: times the kernels alone, with no model; drop ") + flag);
    return bench_kernels(c.reps, c.json);
  }
  KVLayout kv = c.kv;
  check_kv_flags(*c.cmd, kv);
  if (!c.serve.empty()) {
    for (const char* flag : {"--positions", "--kv-window", "--kv-sinks", "--kv-evict", "--kv-budget",
                             "--kv-snap-window", "--kv-snap-pool", "--kv-snap-pooling"})
      if (c.cmd && c.cmd->count(flag) > 0)
        throw UsageError(std::string("--serve: serving keeps every position in its paged pool; drop ") + flag);
    return bench_serve(c, kv);
  }
  if (kv.evict != KVEvict::kNone)
    throw UsageError("--kv-evict: not available with bench (it times NO CACHE too, which eviction by score refuses)");
  return cmd_bench(c, kv, read_bandwidth ? read_bandwidth : read_bandwidth_gb_per_s);
}

}  // namespace kvscope
