#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/cli/cli_flags.h"
#include "app/cli/cli_kv.h"
#include "app/cli/cli_out.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
#include "model/engine/engine.h"
#include "model/kv/kv_eval.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

namespace {

void add_kv_evict_flags(CLI::App* cmd, KVFlags& f) {
  f.evict_opt = cmd->add_option("--kv-evict", f.evict,
                                "Evict by attention score, each layer down to --kv-budget after every forward: "
                                "tova|h2o, or snapkv: once after the prefill, per K/V head (default none)")
                    ->check(CLI::IsMember({"none", "tova", "h2o", "snapkv"}));
  f.budget_opt = cmd->add_option("--kv-budget", f.budget, "With --kv-evict: positions each layer keeps (N >= 1)")
                     ->check(int_in(1, 1 << 20));
  // Ranges are checked with the budget (kv_snap_from_flags): their messages name what was expected.
  f.snap_window_opt = cmd->add_option("--kv-snap-window", f.snap_window,
                                      "With --kv-evict snapkv: the observation window W, 1 <= W < N (default 32; "
                                      "max(1, N/4) when N <= 32)");
  f.snap_pool_opt =
      cmd->add_option("--kv-snap-pool", f.snap_pool, "With --kv-evict snapkv: the pooling kernel K, odd (default 7)");
  f.snap_pooling_opt = cmd->add_option("--kv-snap-pooling", f.snap_pooling,
                                       "With --kv-evict snapkv: max|avg pooling of the scores (default max)");
}

// SnapKV's window, kernel and pooling: only with --kv-evict snapkv, and in range.
bool kv_snap_from_flags(const KVFlags& f, KVSettings* s, std::string* problem) {
  const bool given = f.snap_window_opt && (*f.snap_window_opt || *f.snap_pool_opt || *f.snap_pooling_opt);
  if (s->evict != KVEvict::kSnapKV) {
    if (!given) return true;
    *problem = std::string(*f.snap_window_opt ? "--kv-snap-window"
                           : *f.snap_pool_opt ? "--kv-snap-pool"
                                              : "--kv-snap-pooling") +
               ": needs --kv-evict snapkv";
    return false;
  }
  if (!parse_kv_pooling(f.snap_pooling, &s->snap_pooling)) {
    *problem = "--kv-snap-pooling: \"" + f.snap_pooling + "\" is not one of max, avg";
    return false;
  }
  const bool window_given = f.snap_window_opt && *f.snap_window_opt;
  const int W = window_given ? f.snap_window : snap_default_window(f.budget);
  if (W < 1 || W >= f.budget) {
    *problem = window_given ? "--kv-snap-window: expected 1 <= W < N = " + std::to_string(f.budget) +
                                  " (--kv-budget), got " + std::to_string(W)
                            : "--kv-budget: SnapKV needs N >= 2 (its observation window W is at least 1 and below N), "
                              "got " +
                                  std::to_string(f.budget);
    return false;
  }
  if (f.snap_pool_opt && *f.snap_pool_opt && (f.snap_pool < 1 || f.snap_pool % 2 == 0)) {
    *problem = "--kv-snap-pool: expected an odd kernel K >= 1, got " + std::to_string(f.snap_pool);
    return false;
  }
  s->snap_window = W;
  s->snap_pool = f.snap_pool_opt && *f.snap_pool_opt ? f.snap_pool : kSnapPoolDefault;
  return true;
}

// --kv-evict and --kv-budget come together, and not with a window (one eviction rule at a time).
bool kv_evict_from_flags(const KVFlags& f, KVSettings* s, std::string* problem) {
  if (!parse_kv_evict(f.evict, &s->evict)) {
    *problem = "--kv-evict: \"" + f.evict + "\" is not one of none, tova, h2o, snapkv";
    return false;
  }
  s->budget = s->evict == KVEvict::kNone ? 0 : f.budget;
  if (s->evict != KVEvict::kNone && f.budget < 1) {
    *problem = "--kv-evict " + f.evict + ": needs --kv-budget N (positions each layer keeps, N >= 1)";
    return false;
  }
  if (s->evict == KVEvict::kNone && f.budget > 0) {
    *problem = "--kv-budget: needs --kv-evict tova|h2o|snapkv (the rule that decides which positions each layer keeps)";
    return false;
  }
  if (s->evict != KVEvict::kNone && (f.window > 0 || f.sinks > 0)) {
    *problem = std::string("--kv-evict and ") + (f.window > 0 ? "--kv-window" : "--kv-sinks") +
               ": one eviction rule at a time (drop the window, or the eviction by score)";
    return false;
  }
  return true;
}

}  // namespace

void add_kv_flags(CLI::App* cmd, KVFlags& f) {
  f.window_opt =
      cmd->add_option("--kv-window", f.window, "Sliding window: each query sees its last W positions (W >= 1)")
          ->check(int_in(1, 1 << 20));
  f.sinks_opt = cmd->add_option("--kv-sinks", f.sinks, "With --kv-window: keep the first S positions too (0 <= S < W)")
                    ->check(int_in(0, 1 << 20));
  add_kv_storage_flags(cmd, f);
  add_kv_evict_flags(cmd, f);
}

void add_kv_storage_flags(CLI::App* cmd, KVFlags& f) {
  cmd->add_option("--kv-dtype", f.dtype, "K/V row format: f32|f16|q8_0|q4_0 (default f32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
  f.block_opt = cmd->add_option("--kv-block", f.block, "Paged cache with B positions per block")
                    ->check(int_in(1, kv_block_max(nullptr), kKvBlockRangeText));
}

bool kv_settings_from_flags(const KVFlags& f, KVSettings* out, std::string* problem) {
  KVSettings s;
  if (!parse_kv_dtype(f.dtype, &s.dtype)) {
    *problem = "--kv-dtype: \"" + f.dtype + "\" is not one of f32, f16, q8_0, q4_0";
    return false;
  }
  s.window = f.window;
  s.sinks = f.sinks;
  s.block = f.block;
  if (!kv_evict_from_flags(f, &s, problem) || !kv_snap_from_flags(f, &s, problem)) return false;
  if (f.sinks > 0 && f.window == 0) {
    *problem = "--kv-sinks: needs --kv-window W (sinks are kept besides a window; expected 0 <= S < W)";
    return false;
  }
  if (f.window > 0 && f.sinks >= f.window) {
    *problem = "--kv-sinks: " + std::to_string(f.sinks) + " is outside 0.." + std::to_string(f.window - 1) +
               " (expected 0 <= S < W = " + std::to_string(f.window) + ")";
    return false;
  }
  *out = s;
  return true;
}

KVSettings kv_settings_or_throw(const KVFlags& f) {
  KVSettings k;
  std::string problem;
  if (!kv_settings_from_flags(f, &k, &problem)) throw UsageError(problem);
  return k;
}

namespace {

// The model card's stream: [eos] d1 [eos] d2 ... dN [eos].
std::vector<int> eval_stream(const Model& m, const std::string& text) {
  const int eos = m.config.eos_token_id;
  std::vector<int> stream;
  if (eos >= 0) stream.push_back(eos);
  const std::string sep = "<|endoftext|>";
  size_t at = 0;
  for (;;) {
    const size_t next = text.find(sep, at);
    const std::vector<int> ids = m.tokenizer.encode(text.substr(at, next == std::string::npos ? next : next - at));
    stream.insert(stream.end(), ids.begin(), ids.end());
    if (eos >= 0) stream.push_back(eos);
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  return stream;
}

}  // namespace

int cmd_eval(const EvalArgs& a, const std::string& default_model) {
  const std::string text = read_regular_file(a.file, "a UTF-8 text file to score");
  if (text.empty()) throw Error(a.file + ": the file is empty (expected UTF-8 text to score)");
  if (const size_t at = first_invalid_utf8(text); at != std::string::npos) {
    throw Error(a.file + ": byte " + std::to_string(at) + " is not valid UTF-8 (expected UTF-8 text to score)");
  }
  auto m = load_model(a.model.empty() ? default_model : a.model);
  const Config& c = m->config;
  const KVLayout variant = a.kv.layout_for(c);
  const bool compare = !a.kv.is_default();
  const std::vector<int> stream = eval_stream(*m, text);
  if (stream.size() < 2) throw Error(a.file + ": no token to predict (the text encodes to fewer than 2 tokens)");

  Engine engine(*m);
  KVCache vcache(variant), dcache(KVLayout::for_model(c));
  const size_t W = static_cast<size_t>(c.n_positions);
  double nats = 0, kl = 0, max_dlogit = 0;
  uint64_t predicted = 0, agree = 0, bytes = 0, kv_bytes_max = 0;
  size_t longest = 0;  // positions of the longest window scored (the file may be shorter than the context)
  for (size_t w0 = 0; w0 + 2 <= stream.size(); w0 += W) {
    const std::vector<int> window(stream.begin() + static_cast<std::ptrdiff_t>(w0),
                                  stream.begin() + static_cast<std::ptrdiff_t>(std::min(stream.size(), w0 + W)));
    const LayoutScores sc = score_layout(engine, vcache, compare ? &dcache : nullptr, window);
    kv_bytes_max = std::max(kv_bytes_max, sc.kv_bytes);
    longest = std::max(longest, window.size());
    for (size_t i = 0; i < sc.nll.size(); ++i) {
      const int next = window[i + 1];
      nats += sc.nll[i];
      bytes += next == c.eos_token_id ? 0 : m->tokenizer.token_bytes(next).size();
      ++predicted;
      if (compare) {
        kl += sc.kl[i];
        max_dlogit = std::max(max_dlogit, sc.max_dlogit[i]);
        agree += sc.top1_agree[i];
      }
    }
  }
  const double nll = nats / static_cast<double>(predicted);
  // No text bytes (the file is only end-of-text markers): bits per byte is undefined, not 0.
  const double bpb = bytes ? nats / std::log(2.0) / static_cast<double>(bytes) : NAN;
  nlohmann::json j = {{"file", a.file},
                      {"model", m->name},
                      {"layout", variant.describe()},
                      {"predicted_tokens", predicted},
                      {"nll_per_token", nll},
                      {"perplexity", std::exp(nll)},
                      {"bits_per_byte", bytes ? nlohmann::json(bpb) : nlohmann::json()},
                      {"kv_bytes_per_position", variant.bytes_per_position()},
                      {"kv_bytes_full_window", kv_bytes_max},  // after the longest window scored
                      {"kv_window_positions", longest}};
  if (compare) {
    j["kl_dense_variant"] = kl / static_cast<double>(predicted);
    j["top1_agreement"] = 100.0 * static_cast<double>(agree) / static_cast<double>(predicted);
    j["max_abs_dlogit"] = max_dlogit;
  }
  if (a.json) {
    out_line(j.dump());
    return 0;
  }
  out_printf("%s on %s, KV cache %s\n", m->name.c_str(), a.file.c_str(), variant.describe().c_str());
  out_printf("  predicted tokens   %llu\n", static_cast<unsigned long long>(predicted));
  out_printf("  NLL / token        %.4f nats\n", nll);
  out_printf("  perplexity         %.3f\n", std::exp(nll));
  if (bytes)
    out_printf("  bits / byte        %.4f\n", bpb);
  else
    out_printf("  bits / byte        - (no text bytes, only end-of-text markers)\n");
  out_printf("  KV cache           %s per position; %s held after the longest window scored (%zu of %zu positions)\n",
             format_bytes(variant.bytes_per_position()).c_str(), format_bytes(kv_bytes_max).c_str(), longest, W);
  if (compare) {
    out_printf("  vs dense f32: mean KL(dense || this) %.6f nats, top-1 agreement %.2f %%, max |dlogit| %.4f\n",
               j["kl_dense_variant"].get<double>(), j["top1_agreement"].get<double>(), max_dlogit);
  }
  return 0;
}

}  // namespace kvscope
