// `kvscope eval --needle`: needle in a haystack, for each eviction rule at
// each budget and depth (model/decoding/needle.h runs one probe).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/cli_kv.h"
#include "app/cli/cli_out.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/core/units.h"
#include "model/decoding/needle.h"
#include "model/engine/engine.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

// The haystack's sentences: the text cut after each '.', '?', '!' or newline,
// each piece keeping the whitespace in front of it (so pieces encode as the
// whole text does); <|endoftext|> marks become newlines.
std::vector<std::string> sentences(std::string text) {
  for (size_t at; (at = text.find("<|endoftext|>")) != std::string::npos;) text.replace(at, 13, "\n");
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const bool space = ch == ' ' || ch == '\n';
    const bool ends =
        !cur.empty() && (cur.back() == '.' || cur.back() == '?' || cur.back() == '!' || cur.back() == '\n');
    if (space && ends && cur.find_first_not_of(" \n") != std::string::npos) out.push_back(std::move(cur)), cur.clear();
    cur += ch;
  }
  if (cur.find_first_not_of(" \n\r\t") != std::string::npos) out.push_back(cur);
  return out;
}

// The layouts compared at budget N, each holding N positions a layer, with
// short names for the table.
std::vector<std::pair<std::string, KVLayout>> needle_layouts(int n) {
  std::vector<std::pair<std::string, KVLayout>> out;
  const std::string N = std::to_string(n);
  KVLayout w;
  w.window = n;
  out.emplace_back("window " + N, w);
  if (n >= 3) {
    // The same N positions: the first S (up to 4, fewer than the window) and N - S recent ones.
    w.sinks = std::min(4, (n - 1) / 2);
    w.window = n - w.sinks;
    out.emplace_back("window " + std::to_string(w.window) + " + " + std::to_string(w.sinks) + " sinks", w);
  }
  for (KVEvict e : {KVEvict::kTova, KVEvict::kH2O, KVEvict::kSnapKV}) {
    KVLayout l;
    l.evict = e;
    l.budget = n;
    out.emplace_back(std::string(evict_name(e)) + " " + N, l);
  }
  return out;
}

struct NeedleRow {
  double depth = 0;
  int budget = 0;  // 0: dense
  std::string layout;
  NeedleOutcome o;
};

double product(const std::vector<double>& v) {
  double p = 1;
  for (double x : v) p *= x;
  return p;
}

nlohmann::json row_json(const NeedleRow& r) {
  return {{"depth", r.depth},
          {"budget", r.budget},
          {"layout", r.layout},
          {"correct", r.o.correct},
          {"answer_prob", r.o.answer_prob},
          {"answer_held", r.o.answer_held},
          {"needle_held", r.o.needle_held},
          {"predicted", r.o.predicted},
          {"kv_bytes", r.o.kv_bytes}};
}

// A grid: one line per layout (dense first, then each budget's), one column
// per depth; a cell is whether greedy decoding writes the answer, the
// answer's probability and the share of its positions held after the prefill.
void print_text(const Model& m, const NeedleArgs& a, const NeedleProbe& p0, const std::vector<NeedleRow>& rows) {
  out_printf("%s: needle %s, question ends %s, answer %s (%zu tokens), prompt %zu tokens\n", m.name.c_str(),
             terminal_safe(nlohmann::json(a.needle).dump()).c_str(),
             terminal_safe(nlohmann::json(a.question).dump()).c_str(),
             terminal_safe(nlohmann::json(a.answer).dump()).c_str(), p0.answer.size(), p0.prompt.size());
  out_printf("each cell: answer right/WRONG, p(answer), share of the answer's positions held after the prefill\n");
  std::vector<double> depths;
  std::vector<std::pair<int, std::string>> layouts;  // (budget, name), in order
  for (const NeedleRow& r : rows) {
    if (std::find(depths.begin(), depths.end(), r.depth) == depths.end()) depths.push_back(r.depth);
    if (std::find(layouts.begin(), layouts.end(), std::make_pair(r.budget, r.layout)) == layouts.end())
      layouts.emplace_back(r.budget, r.layout);
  }
  std::string head = "  " + std::string(20, ' ');
  for (double d : depths) head += "  depth " + std::to_string(d).substr(0, 4) + std::string(7, ' ');
  out_line(head);
  for (const auto& [budget, name] : layouts) {
    std::string line = "  " + name + std::string(name.size() < 20 ? 20 - name.size() : 0, ' ');
    for (double d : depths)
      for (const NeedleRow& r : rows)
        if (r.depth == d && r.budget == budget && r.layout == name) {
          char cell[64];
          std::snprintf(cell, sizeof cell, "  %-5s %.3f %3d %%", r.o.correct ? "right" : "WRONG",
                        product(r.o.answer_prob), static_cast<int>(100 * r.o.answer_held + 0.5));
          line += cell;
        }
    out_line(line);
  }
}

}  // namespace

int cmd_needle(const EvalArgs& a, const std::string& default_model) {
  const NeedleArgs& na = a.needle;
  if (!a.kv.is_default())
    throw UsageError(
        "--needle compares its own layouts (dense, window, window + 4 sinks, TOVA, H2O, SnapKV at each "
        "--budgets value): expected no --kv-* flag with it");
  const std::string text = read_regular_file(a.file, "a UTF-8 text file for the haystack");
  if (const size_t at = first_invalid_utf8(text); at != std::string::npos)
    throw Error(a.file + ": byte " + std::to_string(at) + " is not valid UTF-8 (expected UTF-8 text for the haystack)");
  NeedleText t{sentences(text), na.needle, na.answer, na.question};
  if (t.haystack.empty()) throw Error(a.file + ": no sentence in it (expected UTF-8 text for the haystack)");
  auto m = load_model(a.model.empty() ? default_model : a.model);
  const Config& c = m->config;
  const int tokens = na.tokens;
  if (tokens + static_cast<int>(m->tokenizer.encode(na.answer).size()) > c.n_positions)
    throw UsageError("--needle-tokens " + std::to_string(tokens) +
                     ": the prompt and the answer must fit the context of " + std::to_string(c.n_positions) +
                     " positions");
  for (int n : na.budgets)
    if (n >= tokens)
      throw UsageError("--budgets " + std::to_string(n) + ": expected fewer positions than the prompt's " +
                       std::to_string(tokens) + " (--needle-tokens), or nothing is evicted");
  Engine engine(*m);
  std::vector<NeedleRow> rows;
  NeedleProbe first;
  for (double depth : na.depths) {
    const NeedleProbe p = make_needle_probe(m->tokenizer, t, depth, tokens);
    if (rows.empty()) {
      first = p;
    } else if (p.needle_first == first.needle_first || p.depth == rows.back().depth) {
      continue;  // the sentence boundaries put it where an earlier depth did
    }
    KVCache dense(KVLayout::for_model(c));
    rows.push_back({p.depth, 0, "dense", run_needle(engine, dense, p)});
    for (int n : na.budgets)
      for (const auto& [name, l] : needle_layouts(n)) {
        KVCache cache(l.on_model(c));
        rows.push_back({p.depth, n, name, run_needle(engine, cache, p)});
      }
  }
  if (a.json) {
    for (const NeedleRow& r : rows) out_line(row_json(r).dump());
  } else {
    print_text(*m, na, first, rows);
  }
  return 0;
}

}  // namespace kvscope
