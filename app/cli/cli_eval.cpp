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
#include "model/decoding/kv_eval.h"
#include "model/engine/engine.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

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
  const KVLayout variant = a.kv.on_model(c);
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
