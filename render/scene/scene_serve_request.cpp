// One served request drawn by the plain generation view's builder: the step
// records of a Server (model/serving/server.h) turned into a StepRecord of
// that request alone, at its newest step that kept attention.
#include <string>
#include <vector>

#include "render/scene/scene_serve.h"

namespace kvscope {

namespace {

// The newest record in [0, shown] whose batch computed positions for `req`
// with its attention kept; -1 when none.
int newest_entry(const ServeSceneInput& in, int req, const ServeEntry** found) {
  for (int k = in.shown; k >= 0; --k)
    for (const ServeEntry& e : (*in.steps)[static_cast<size_t>(k)]->entries)
      if (e.req == req && !e.attn.empty()) {
        *found = &e;
        return k;
      }
  return -1;
}

// The request's tokens as step k saw them: its prompt and what steps [0, k) chose.
std::vector<int> tokens_before(const ServeSceneInput& in, int req, int k) {
  std::vector<int> toks = (*in.requests)[static_cast<size_t>(req)].prompt;
  for (int j = 0; j < k; ++j)
    for (const ServeEntry& e : (*in.steps)[static_cast<size_t>(j)]->entries)
      if (e.req == req && e.token >= 0) toks.push_back(e.token);
  return toks;
}

// Where the request stands in the drawn step: what its batch computed for it.
void set_banner(const ServeSceneInput& in, int req, int k, const ServeEntry& e, ServeRequestView& v) {
  const ServeStep& s = *(*in.steps)[static_cast<size_t>(k)];
  const std::string id = (*in.requests)[static_cast<size_t>(req)].id;
  const std::string batch = s.entries.size() == 1
                                ? " in a forward of its own (" + std::to_string(s.positions) +
                                      (s.positions == 1 ? " position)" : " positions)")
                                : " in one batched forward with " + std::to_string(s.entries.size() - 1) +
                                      (s.entries.size() == 2 ? " other request" : " other requests") + " (" +
                                      std::to_string(s.positions) + " positions)";
  if (e.prefill) {
    v.banner = "REQUEST " + id + " \xC2\xB7 PREFILL";
    v.banner_sub = (e.n == 1 ? "position " : "positions ") + position_range(e.first, e.n) + batch;
    if (e.first > 0) v.banner_sub += " \xC2\xB7 reads " + std::to_string(e.first) + " cached K/V rows";
  } else {
    v.banner = "REQUEST " + id + " \xC2\xB7 DECODE";
    v.banner_sub = "1 new position" + batch + " \xC2\xB7 reads " + std::to_string(e.first) + " cached K/V rows";
  }
  if (k != in.shown)
    v.banner_sub = "not in step " + std::to_string((*in.steps)[static_cast<size_t>(in.shown)]->step) +
                   "'s batch \xC2\xB7 its newest step, " + std::to_string(s.step) + ": " + v.banner_sub;
}

}  // namespace

ServeRequestView serve_request_view(const ServeSceneInput& in, int req, const Config& c) {
  ServeRequestView v;
  if (!in.steps || !in.requests || req < 0 || req >= static_cast<int>(in.requests->size()) || in.shown < 0 ||
      in.shown >= static_cast<int>(in.steps->size()))
    return v;
  const ServeEntry* e = nullptr;
  const int k = newest_entry(in, req, &e);
  if (k < 0) return v;
  const std::vector<int> toks = tokens_before(in, req, k);
  const int end = e->first + e->n;
  if (end > static_cast<int>(toks.size()) || (e->token < 0 && end >= static_cast<int>(toks.size()))) return v;
  auto rec = std::make_shared<StepRecord>();
  rec->index = k;
  const bool now = k == in.shown;  // else nothing flashes: it was computed in an earlier step
  rec->prefill = now && e->prefill && e->first == 0;
  rec->first = now ? e->first : end;
  rec->n_new = now ? e->n : 0;
  rec->seq_len = end;
  const int n_prompt = static_cast<int>((*in.requests)[static_cast<size_t>(req)].prompt.size());
  rec->n_prompt = n_prompt;
  for (int p = 0; p < end; ++p) {
    rec->prompt_tokens.push_back(toks[static_cast<size_t>(p)]);
    rec->prompt_pieces.push_back(in.token_text ? in.token_text(toks[static_cast<size_t>(p)]) : std::string());
  }
  rec->token = e->token >= 0 ? e->token : toks[static_cast<size_t>(end)];
  rec->piece = in.token_text ? in.token_text(rec->token) : std::string();
  rec->prob = e->token >= 0 ? e->prob : -1.0f;
  rec->n_layer = c.n_layer;
  rec->n_head = c.n_head;
  rec->n_embd = c.n_embd;
  rec->n_kv_head = c.kv_heads();
  rec->head_dim = c.head_dim();
  rec->n_rows = 1;
  rec->attn = e->attn;  // (layer, head, 1, end)
  v.seq = build_sequence({rec}, 1);
  // Every position before `end` went in as a "prompt" of the one record: the
  // generated ones get their own look back (the slot's too, mid-prompt).
  for (size_t p = 0; p < v.seq.tokens.size(); ++p) v.seq.tokens[p].prompt = static_cast<int>(p) < n_prompt;
  v.seq.n_prompt = n_prompt;
  v.record = k;
  set_banner(in, req, k, *e, v);
  return v;
}

}  // namespace kvscope
