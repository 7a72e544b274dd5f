// `kvscope serve`: many requests from one paged KV pool, continuous (or
// static) batching, prefix caching, preemption by recompute; one batched
// forward per engine step, streamed as text or JSON Lines (step, done, summary).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/cli/cli.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_json.h"
#include "app/cli/cli_out.h"
#include "app/cli/line_stream.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/kv/kv_cache.h"
#include "model/serving/requests.h"
#include "model/serving/server.h"
#include "model/serving/trace.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;

json ids_json(const Server& s, const std::vector<int>& reqs) {
  json a = json::array();
  for (int r : reqs) a.push_back(s.requests()[static_cast<size_t>(r)].id);
  return a;
}

json step_json(const Server& s, const ServeStep& r) {
  json batch = json::array();
  for (const ServeEntry& e : r.entries) {
    json j = {{"id", s.requests()[static_cast<size_t>(e.req)].id},
              {"kind", e.prefill ? "prefill" : "decode"},
              {"positions", {e.first, e.first + e.n}}};
    if (e.token >= 0) j["token"] = e.token;
    batch.push_back(j);
  }
  return {{"event", "step"},
          {"step", r.step},
          {"running", ids_json(s, r.running)},
          {"waiting", ids_json(s, r.waiting)},
          {"batch", batch},
          {"admitted", ids_json(s, r.admitted)},
          {"preempted", ids_json(s, r.preempted)},
          {"finished", ids_json(s, r.finished)},
          {"blocks_used", r.blocks_used},
          {"blocks_free", r.blocks_free},
          {"blocks_cached", r.blocks_cached},
          {"prefix_hit_blocks", r.prefix_hit_blocks},
          {"positions_computed", r.positions},
          {"slots_live", r.slots.live},
          {"flops", r.flops},
          {"ms", r.ms}};
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

// The share of `held` slots holding no token; none held wastes none (one-token
// requests finish in the step that admits them and hold nothing after it).
double wasted_frac(double live, double held) {
  return held > 0 ? 1.0 - live / held : 0.0;
}

json done_json(const Server& s, int req) {
  const ServeRequest& q = s.requests()[static_cast<size_t>(req)];
  const ServeResult& r = s.result(req);
  const std::string text = s.text(req);
  return {{"event", "done"},
          {"id", q.id},
          {"text", escape_invalid_utf8(text)},
          {"text_bytes", bytes_json(text)},
          {"tokens", r.tokens},
          {"reason", to_string(r.reason)},
          {"prompt_tokens", q.prompt.size()},
          {"arrive", q.arrive},
          {"first_token_step", r.first_token_step},
          {"finish_step", r.finish_step},
          {"ttft_steps", r.first_token_step - q.arrive + 1},
          {"latency_steps", r.finish_step - q.arrive + 1},
          {"ttft_ms", r.first_token_ms - r.arrive_ms},
          {"latency_ms", r.finish_ms - r.arrive_ms},
          {"preemptions", r.preemptions}};
}

json summary_json(const Server& s, const ServeTotals& t) {
  const SchedulerConfig& c = s.scheduler().config();
  double ttft = 0, latency = 0;
  const size_t n = s.requests().size();
  for (size_t i = 0; i < n; ++i) {
    const ServeResult& r = s.result(static_cast<int>(i));
    ttft += (r.first_token_ms - r.arrive_ms) / static_cast<double>(n);
    latency += (r.finish_ms - r.arrive_ms) / static_cast<double>(n);
  }
  const double live = static_cast<double>(t.slots_sum.live);
  return {{"event", "summary"},
          {"requests", n},
          {"policy", to_string(c.policy)},
          {"max_running", c.max_running},
          {"max_batch_tokens", c.max_batch_tokens},
          {"prefix_caching", c.prefix_caching},
          {"pool_blocks", c.pool_blocks},
          {"block", s.scheduler().block()},
          {"steps", t.steps},
          {"generated", t.generated},
          {"positions_computed", t.positions},
          {"prefill_positions", t.prefill_positions},
          {"decode_positions", t.decode_positions},
          {"ms_total", t.last_end_ms},
          {"tokens_per_s", ratio(static_cast<double>(t.generated), t.last_end_ms / 1000.0)},
          {"ttft_ms_mean", ttft},
          {"latency_ms_mean", latency},
          {"preemptions", t.preemptions},
          {"prefix_hit_blocks", t.prefix_hit_blocks},
          {"prefix_hit_positions", static_cast<int64_t>(t.prefix_hit_blocks) * s.scheduler().block()},
          {"pool_occupancy_mean",
           ratio(static_cast<double>(t.blocks_used_sum), static_cast<double>(t.steps) * c.pool_blocks)},
          {"pool_occupancy_peak", ratio(t.blocks_used_peak, c.pool_blocks)},
          {"slots_live_mean", ratio(live, t.steps)},
          {"slots_paged_mean", ratio(static_cast<double>(t.slots_sum.paged), t.steps)},
          {"slots_contiguous_mean", ratio(static_cast<double>(t.slots_sum.contiguous), t.steps)},
          {"paged_wasted_frac", wasted_frac(live, static_cast<double>(t.slots_sum.paged))},
          {"contiguous_wasted_frac", wasted_frac(live, static_cast<double>(t.slots_sum.contiguous))},
          {"flops_total", t.flops}};
}

std::string ids_text(const Server& s, const std::vector<int>& reqs) {
  std::string out;
  for (int r : reqs) out += (out.empty() ? "" : ",") + terminal_safe(s.requests()[static_cast<size_t>(r)].id);
  return out.empty() ? "-" : out;
}

void print_step_text(const Server& s, const ServeStep& r) {
  std::string batch;
  for (const ServeEntry& e : r.entries) {
    batch += " " + terminal_safe(s.requests()[static_cast<size_t>(e.req)].id) +
             (e.prefill ? ":prefill[" + std::to_string(e.first) + "," + std::to_string(e.first + e.n) + ")"
                        : ":decode@" + std::to_string(e.first));
  }
  out_printf("step %d |%s | run %zu wait %zu | blocks %d used %d cached %d free | hits %d | preempted %s | %.2f ms\n",
             r.step, batch.c_str(), r.running.size(), r.waiting.size(), r.blocks_used, r.blocks_cached,
             r.blocks_free - r.blocks_cached, r.prefix_hit_blocks, ids_text(s, r.preempted).c_str(), r.ms);
}

// "1 step", "2 steps".
std::string counted(long long n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

void print_done_text(const Server& s, int req) {
  const json d = done_json(s, req);
  out_printf("done %s (%s, %s, TTFT %s / %.1f ms, latency %s / %.1f ms, %s): %s\n",
             terminal_safe(s.requests()[static_cast<size_t>(req)].id).c_str(), d["reason"].get<std::string>().c_str(),
             counted(static_cast<long long>(s.result(req).tokens.size()), "token").c_str(),
             counted(d["ttft_steps"].get<int>(), "step").c_str(), d["ttft_ms"].get<double>(),
             counted(d["latency_steps"].get<int>(), "step").c_str(), d["latency_ms"].get<double>(),
             counted(s.result(req).preemptions, "preemption").c_str(), terminal_safe(s.text(req)).c_str());
}

void print_summary_text(const json& j) {
  // (no slot held at a step's end, one-token requests: no share to speak of)
  char slots[160] = "no slots held at a step's end";
  if (j["slots_paged_mean"].get<double>() > 0)
    std::snprintf(slots, sizeof slots,
                  "slots holding tokens: %.0f%% of the paged pool's, %.0f%% of one contiguous context per request",
                  100 * (1 - j["paged_wasted_frac"].get<double>()),
                  100 * (1 - j["contiguous_wasted_frac"].get<double>()));
  out_printf(
      "summary: %s, %s, %s in %.1f ms = %.1f tokens/s; mean TTFT %.1f ms, latency %.1f ms; "
      "%s, %s; pool %.0f%% used on average (peak %.0f%%); %s\n",
      counted(j["requests"].get<int>(), "request").c_str(), counted(j["steps"].get<int>(), "step").c_str(),
      counted(j["generated"].get<int64_t>(), "token").c_str(), j["ms_total"].get<double>(),
      j["tokens_per_s"].get<double>(), j["ttft_ms_mean"].get<double>(), j["latency_ms_mean"].get<double>(),
      counted(j["preemptions"].get<int>(), "preemption").c_str(),
      counted(j["prefix_hit_blocks"].get<int>(), "prefix-hit block").c_str(),
      100 * j["pool_occupancy_mean"].get<double>(), 100 * j["pool_occupancy_peak"].get<double>(), slots);
}

ServeOptions serve_options(const ServeCommand& c) {
  ServeOptions o;
  o.kv = c.kv;
  check_kv_flags(*c.cmd, o.kv);
  if (!o.kv.paged()) o.kv.block = kDefaultKvBlock;
  o.sched.pool_blocks = c.pool_blocks;
  o.sched.max_batch_tokens = c.max_batch_tokens;
  o.sched.max_running = c.max_running;
  o.sched.policy = c.policy == "static" ? ServePolicy::kStatic : ServePolicy::kContinuous;
  o.sched.prefix_caching = c.prefix_caching;
  return o;
}

// --trace's own flags without --trace.
void refuse_trace_flags(const ServeCommand& c) {
  for (const char* f : {"--trace-ms-per-step", "--trace-limit", "--trace-block"})
    if (c.cmd->get_option(f)->count()) throw UsageError(std::string(f) + ": only with --trace FILE");
}

// The requests: --requests' file, or --trace's lines replayed (then `trace` holds its sharing).
std::vector<ServeRequest> load_requests(const ServeCommand& c, const Model& model, const ServeOptions& opt,
                                        std::optional<TraceRequests>& trace) {
  if (c.trace.empty()) {
    refuse_trace_flags(c);
    // A malformed line is a usage error (exit 2), a file that cannot be read a runtime one (exit 1).
    return read_requests(c.requests, model, opt.sched.pool_blocks, opt.kv.block);
  }
  TraceOptions o;
  o.block = opt.kv.block;
  o.trace_block = c.trace_block;
  o.ms_per_step = c.trace_ms_per_step;
  o.limit = c.trace_limit;
  o.pool_blocks = opt.sched.pool_blocks;
  trace = read_trace(c.trace, model, o);
  return trace->requests;
}

// The trace's own prefix sharing beside what the pool hit.
json trace_json(const TraceRequests& t, const ServeTotals& totals) {
  return {{"requests", t.requests.size()},
          {"truncated", t.truncated},
          {"full_blocks", t.full_blocks},
          {"shared_blocks", t.shared_blocks},
          {"trace_prefix_hit_rate", ratio(static_cast<double>(t.shared_blocks), static_cast<double>(t.full_blocks))},
          {"measured_prefix_hit_rate",
           ratio(static_cast<double>(totals.prefix_hit_blocks), static_cast<double>(t.full_blocks))}};
}

}  // namespace

void add_serve_command(CLI::App& app, ServeCommand& c) {
  auto* s = c.cmd = app.add_subcommand("serve", "Serve many requests from one paged KV pool (continuous batching)");
  auto* requests =
      s->add_option("--requests", c.requests,
                    "JSON Lines: {\"id\", \"prompt\", \"max_new\", \"arrive\", sampling...}; - (standard input) or a "
                    "FIFO is served as its lines arrive")
          ->check(non_empty("a requests file"));
  s->add_option("--trace", c.trace,
                "A production trace in place of --requests: Mooncake's JSON Lines {\"timestamp\", \"input_length\", "
                "\"output_length\", \"hash_ids\"} (docs/serving.md)")
      ->check(non_empty("a trace file"))
      ->excludes(requests);
  s->add_option("--trace-ms-per-step", c.trace_ms_per_step, "With --trace: trace milliseconds per engine step")
      ->capture_default_str()
      ->check(real_in(0, 1e9, true));
  s->add_option("--trace-limit", c.trace_limit, "With --trace: replay its first N requests (default: all)")
      ->check(int_in(1, 1 << 24));
  s->add_option("--trace-block", c.trace_block, "With --trace: the trace's tokens per hash")
      ->capture_default_str()
      ->check(int_in(1, 1 << 20));
  s->add_option("--model", c.model, "Model folder or GGUF file (default: the embedded model)")
      ->check(non_empty("a model folder"));
  s->add_option("--ctx", c.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  s->add_flag("--bf16-products", c.bf16_products, kBf16ProductsHelp);
  s->add_option("--pool-blocks", c.pool_blocks, "KV pool size in blocks")
      ->capture_default_str()
      ->check(int_in(1, 1 << 20));
  s->add_option("--max-batch-tokens", c.max_batch_tokens, "Token budget T of one engine step")
      ->capture_default_str()
      ->check(int_in(1, 1 << 20));
  s->add_option("--max-running", c.max_running, "Requests running at once, R (1 = one at a time)")
      ->capture_default_str()
      ->check(int_in(1, 4096));
  s->add_option("--policy", c.policy, "continuous or static batching")
      ->capture_default_str()
      ->check(CLI::IsMember({"continuous", "static"}));
  s->add_flag("--prefix-caching", c.prefix_caching, "Share cached full blocks of common prompt prefixes");
  s->add_flag("--json", c.json, "JSON Lines: step, done, summary");
  add_kv_storage_flags(s, c.kv)->description("Positions per pool block B (serve always pages; default " +
                                             std::to_string(kDefaultKvBlock) + ")");
}

namespace {

void print_step(const ServeCommand& c, const Server& server, const ServeStep& r) {
  if (c.json) {
    out_line(step_json(server, r).dump());
    for (int f : r.finished) out_line(done_json(server, f).dump());
  } else {
    print_step_text(server, r);
    for (int f : r.finished) print_done_text(server, f);
  }
}

// `trace`: --trace's sharing, stated beside what the pool hit.
void print_summary(const ServeCommand& c, const Server& server, const ServeTotals& totals,
                   const std::optional<TraceRequests>& trace = std::nullopt) {
  json sum = summary_json(server, totals);
  if (trace) sum["trace"] = trace_json(*trace, totals);
  if (c.json) {
    out_line(sum.dump());
  } else {
    print_summary_text(sum);
    if (trace)
      out_printf(
          "trace: %zu requests (%d cut to the context); prefix-hit rate over %lld full blocks: the trace's own "
          "%.1f%% (a cache that never evicts), measured %.1f%%\n",
          trace->requests.size(), trace->truncated, trace->full_blocks,
          100 * sum["trace"]["trace_prefix_hit_rate"].get<double>(),
          100 * sum["trace"]["measured_prefix_hit_rate"].get<double>());
  }
}

// Requests from a pipe, a FIFO or standard input: each joins the queue at the
// step after its line arrives, and serving waits for lines only when it has
// nothing left to run. The run ends when the stream does and every request is done.
int serve_stream(const ServeCommand& c, std::shared_ptr<const Model> model, const ServeOptions& opt) {
  LineStream in(c.requests);
  RequestLines lines(in.name(), *model, opt.sched.pool_blocks, opt.kv.block);
  Server server(model, {}, opt);
  ServeTotals totals;
  for (;;) {
    for (const std::string& line : in.read(server.done() ? -1 : 0))
      if (auto r = lines.next(line)) server.add(std::move(*r));
    if (server.done()) {
      if (in.ended()) break;
      continue;
    }
    const auto r = server.step();
    totals.add(*r);
    print_step(c, server, *r);
  }
  lines.finish();
  print_summary(c, server, totals);
  return 0;
}

}  // namespace

int run_serve_command(const ServeCommand& c) {
  if (c.requests.empty() && c.trace.empty())
    throw UsageError("serve: give --requests FILE.jsonl (or --trace FILE.jsonl, a production trace)");
  const ServeOptions opt = serve_options(c);
  auto model = load_cli_model(c.model, c.ctx, c.bf16_products);
  check_kv_block(opt.kv.block, model->config);  // the one range, before the requests are sized or the pool built
  if (c.trace.empty() && is_line_stream(c.requests)) {
    refuse_trace_flags(c);
    return serve_stream(c, model, opt);
  }
  std::optional<TraceRequests> trace;
  Server server(model, load_requests(c, *model, opt, trace), opt);
  ServeTotals totals;
  while (auto r = server.step()) {
    totals.add(*r);
    print_step(c, server, *r);
  }
  print_summary(c, server, totals, trace);
  return 0;
}

}  // namespace kvscope
