// `kvscope bench --serve FILE`: what serving adds around the batched forward.
// Rounds interleave the three measurements, so a machine whose memory speed
// drifts within minutes shows as spread instead of a wrong ratio:
//  - together: every request of FILE served at once; each decode step in
//    which all R requests decode (R positions) is timed by the server;
//  - bare: the engine's forward over the same R decode positions, one per
//    sequence, on a cache holding the prompts (rolled back after each);
//  - alone: the same requests served one at a time (--max-running 1).
// Each is reported as the median and range over the rounds.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_out.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "model/serving/requests.h"
#include "model/serving/server.h"

namespace kvscope {
namespace {

using Clock = std::chrono::steady_clock;

struct Spread {
  double median = 0, lo = 0, hi = 0;
};

Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// One run of the requests: the median ms of its full decode steps (every one
// of `r` running requests decoding; 0 when none) and its wall ms.
std::pair<double, double> serve_run(const std::shared_ptr<const Model>& m, const std::vector<ServeRequest>& reqs,
                                    ServeOptions opt, int max_running, int r) {
  opt.sched.max_running = max_running;
  Server server(m, reqs, opt);
  std::vector<double> full;
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    // The whole step as a caller pays it: scheduling, the forward, sampling, the record.
    const Clock::time_point ts = Clock::now();
    const auto s = server.step();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - ts).count();
    if (!s) break;
    const bool all_decode =
        std::none_of(s->entries.begin(), s->entries.end(), [](const ServeEntry& e) { return e.prefill; });
    if (all_decode && static_cast<int>(s->entries.size()) == r) full.push_back(ms);
  }
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return {full.empty() ? 0.0 : spread(full).median, wall};
}

// The forward of one decode position per request, after the prompts: median of 5.
double bare_forward_ms(Engine& engine, KVCache& cache, const std::vector<ServeRequest>& reqs) {
  cache.clear();
  std::vector<BatchEntry> decode;
  for (const ServeRequest& q : reqs) {
    const SeqId s = cache.add_sequence();
    std::vector<BatchEntry> prompt;
    const int n = static_cast<int>(q.prompt.size());
    for (int i = 0; i < n; ++i) prompt.push_back(BatchEntry{s, i, q.prompt[static_cast<size_t>(i)], i + 1 == n, false});
    ForwardTaps none{false, false, false};
    engine.forward(prompt, cache, none);
    decode.push_back(BatchEntry{s, n, q.prompt.back(), true, false});
  }
  std::vector<double> ms;
  for (int k = 0; k < 5; ++k) {
    const Clock::time_point t0 = Clock::now();
    engine.forward(decode, cache, ForwardTaps{false, false, false});
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    for (const BatchEntry& e : decode) cache.truncate(e.seq, e.pos);
  }
  cache.clear();
  return spread(ms).median;
}

nlohmann::json spread_json(const Spread& s) {
  return {{"median", s.median}, {"min", s.lo}, {"max", s.hi}};
}

}  // namespace

int bench_serve(const BenchCommand& c, const KVLayout& kv) {
  auto m = load_cli_model(c.model, c.ctx, c.bf16_products);
  ServeOptions opt;
  opt.kv.dtype = kv.dtype;
  if (kv.block) opt.kv.block = kv.block;
  check_kv_block(opt.kv.block, m->config);
  std::vector<ServeRequest> reqs = read_requests(c.serve, *m, opt.sched.pool_blocks, opt.kv.block);
  for (ServeRequest& q : reqs) q.arrive = 0;  // together means at once
  const int r = static_cast<int>(reqs.size());
  if (r > opt.sched.pool_blocks || r > 4096)
    throw UsageError("--serve " + c.serve + ": " + std::to_string(r) + " requests; expected at most 4096");
  Engine engine(*m);
  KVCache cache(opt.kv.on_model(m->config));
  std::vector<double> step, bare, ratio, speedup;
  for (int round = 0; round < c.reps; ++round) {
    // Alternating which goes first, so a drift within a round favours neither.
    const bool alone_first = round % 2 == 1;
    double alone_wall = 0;
    if (alone_first) alone_wall = serve_run(m, reqs, opt, 1, 1).second;
    const auto [step_ms, together_wall] = serve_run(m, reqs, opt, r, r);
    const double bare_ms = bare_forward_ms(engine, cache, reqs);
    if (!alone_first) alone_wall = serve_run(m, reqs, opt, 1, 1).second;
    if (step_ms <= 0)
      throw UsageError("--serve " + c.serve + ": no step had all " + std::to_string(r) +
                       " requests decoding together (expected requests arriving together with max_new >= 2)");
    step.push_back(step_ms);
    bare.push_back(bare_ms);
    ratio.push_back(step_ms / bare_ms);
    speedup.push_back(alone_wall / together_wall);
  }
  const Spread s = spread(step), b = spread(bare), q = spread(ratio), x = spread(speedup);
  if (c.json) {
    out_line(nlohmann::json{{"model", m->name},
                            {"requests", r},
                            {"rounds", c.reps},
                            {"threads", engine_threads()},
                            {"serve_decode_step_ms", spread_json(s)},
                            {"bare_forward_ms", spread_json(b)},
                            {"step_over_forward", spread_json(q)},
                            {"together_over_alone", spread_json(x)}}
                 .dump());
    return 0;
  }
  out_printf("%s: %d requests served together, %d interleaved rounds, %d threads (median [min - max])\n",
             m->name.c_str(), r, c.reps, engine_threads());
  out_printf("  serve decode step, %d positions   %8.2f ms [%.2f - %.2f]\n", r, s.median, s.lo, s.hi);
  out_printf("  bare forward, %d positions        %8.2f ms [%.2f - %.2f]\n", r, b.median, b.lo, b.hi);
  out_printf("  step / forward                   %8.2f    [%.2f - %.2f]  (what serving adds: 1 is nothing)\n", q.median,
             q.lo, q.hi);
  out_printf("  together vs one at a time        %8.2fx   [%.2f - %.2f]  (wall time of all the requests)\n", x.median,
             x.lo, x.hi);
  return 0;
}

}  // namespace kvscope
