// The Serving view's selected request drawn by the plain view's builder
// (serve_request_view + build_scene): its attention rays are the attention
// of that request's newest query in the batched forward, checked against
// what `generate` records for the request alone at the same position
// (Generator's attention equals the NumPy float64 reference's:
// test_reference.cpp), on the embedded model's serving presets (prefix
// hits, preemption and recompute, batches of several requests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "app/lessons/serve_presets.h"
#include "model/arch/model.h"
#include "model/decoding/generator.h"
#include "render/scene/scene_serve.h"

namespace kvscope {
namespace {

std::shared_ptr<const Model> tiny() {
  static auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  return m;
}

// Every record of request `q` generated alone (greedy, as the presets are).
std::vector<RecordPtr> alone(const ServeRequest& q) {
  GenerateOptions opt;
  opt.max_new = q.max_new;
  opt.sampler = q.sampler;
  Generator g(tiny());
  g.start_tokens(q.prompt, opt);
  std::vector<RecordPtr> recs;
  while (RecordPtr r = g.step()) recs.push_back(r);
  return recs;
}

// The record of `recs` whose attention rows include the query at `pos`, and that row.
const StepRecord* row_for(const std::vector<RecordPtr>& recs, int pos, int* row) {
  for (const RecordPtr& r : recs)
    if (pos < r->seq_len && pos >= r->seq_len - r->n_rows) {
      *row = pos - (r->seq_len - r->n_rows);
      return r.get();
    }
  return nullptr;
}

struct Checked {
  int rows = 0, rays = 0, batched = 0;
};

// At every step of the preset's run, every request the step computed: the
// rays of its view (mean over layers and heads, and one layer and head) and
// its kept row (every layer, head and key) against the request alone.
Checked check_preset(int preset) {
  const ServeRunSpec run = serve_preset_runs(preset, *tiny()).front();
  Server server(tiny(), run.requests, run.options);
  std::vector<std::shared_ptr<const ServeStep>> steps;
  while (auto s = server.step()) steps.push_back(s);
  const Config& c = tiny()->config;
  std::vector<std::vector<RecordPtr>> gen;
  for (size_t r = 0; r < run.requests.size(); ++r) {
    gen.push_back(alone(run.requests[r]));
    EXPECT_EQ(server.result(static_cast<int>(r)).tokens.size(), gen.back().size()) << "request " << r;
  }
  ServeSceneInput in;
  in.requests = &server.requests();
  in.steps = &steps;
  in.token_text = [](int t) { return tiny()->tokenizer.display_piece(t); };
  Checked n;
  for (size_t k = 0; k < steps.size(); ++k) {
    in.shown = static_cast<int>(k);
    for (const ServeEntry& e : steps[k]->entries) {
      const int end = e.first + e.n, q = end - 1;
      SCOPED_TRACE("preset " + std::to_string(preset) + " step " + std::to_string(k) + " request " +
                   std::to_string(e.req) + " query " + std::to_string(q));
      EXPECT_EQ(e.attn.size(), static_cast<size_t>(c.n_layer) * c.n_head * end);
      int row = 0;
      const StepRecord* ref = row_for(gen[static_cast<size_t>(e.req)], q, &row);
      if (!ref) {
        ADD_FAILURE() << "generate alone never ran this query";
        continue;
      }
      double worst = 0;
      for (int l = 0; l < c.n_layer; ++l)
        for (int h = 0; h < c.n_head; ++h)
          for (int key = 0; key < end; ++key)
            worst = std::max(worst, std::abs(static_cast<double>(e.attention(c.n_head, l, h, key)) -
                                             ref->attention(l, h, row, key)));
      EXPECT_LE(worst, 1e-5);
      ++n.rows;
      n.batched += steps[k]->entries.size() > 1 ? 1 : 0;

      const ServeRequestView v = serve_request_view(in, e.req, c);
      if (!v.seq.current) {
        ADD_FAILURE() << "no view of a request the step computed";
        continue;
      }
      EXPECT_EQ(v.record, static_cast<int>(k));
      EXPECT_EQ(v.seq.seq_len(), end);
      // The mean over layers and heads (the default), and the last layer's last head.
      for (const int lh : {-1, (c.n_layer - 1) * c.n_head + c.n_head - 1}) {
        ViewOptions view;
        view.layer = lh < 0 ? -1 : lh / c.n_head;
        view.head = lh < 0 ? -1 : lh % c.n_head;
        view.min_weight = 0;
        view.max_columns = 0;  // one ray per key
        const Scene s = build_scene(v.seq, view);
        EXPECT_EQ(s.rays.size(), static_cast<size_t>(end));
        for (const RayInstance& ray : s.rays) {
          double want = 0;
          for (int l = 0; l < c.n_layer; ++l)
            for (int h = 0; h < c.n_head; ++h)
              if (lh < 0 || l * c.n_head + h == lh) want += ref->attention(l, h, row, ray.key);
          want /= lh < 0 ? c.n_layer * c.n_head : 1;
          EXPECT_NEAR(ray.weight, want, 1e-5) << "key " << ray.key << " view " << lh;
          ++n.rays;
        }
      }
    }
  }
  return n;
}

TEST(ServeRays, SelectedRequestsRaysAreItsAttentionAloneUnderPrefixHits) {
  const Checked n = check_preset(1);
  EXPECT_GT(n.rows, 20);
  EXPECT_GT(n.batched, 10);  // most rows came from forwards of several requests
}

TEST(ServeRays, SelectedRequestsRaysAreItsAttentionAloneUnderPreemption) {
  const Checked n = check_preset(2);
  EXPECT_GT(n.rows, 20);
  EXPECT_GT(n.batched, 10);
}

// The rows are kept while the run's budget lasts, a step all or none, and
// keeping them changes nothing the server writes; none without a budget.
TEST(ServeRays, AttentionKeptWithinItsBudget) {
  ServeRunSpec run = serve_preset_runs(0, *tiny()).front();
  const Config& c = tiny()->config;
  std::vector<std::vector<std::shared_ptr<const ServeStep>>> runs;
  for (const int64_t budget : {int64_t{0}, int64_t{-1}}) {
    ServeOptions opt = run.options;
    if (budget == 0) opt.attention_budget = 0;
    if (budget < 0) {  // exactly the first step's rows (layer * head * keys floats per entry)
      Server probe(tiny(), run.requests, run.options);
      int64_t bytes = 0;
      const std::shared_ptr<const ServeStep> first = probe.step();
      for (const ServeEntry& e : first->entries) bytes += int64_t{4} * c.n_layer * c.n_head * (e.first + e.n);
      opt.attention_budget = bytes;
    }
    Server s(tiny(), run.requests, opt);
    runs.emplace_back();
    while (auto r = s.step()) runs.back().push_back(r);
  }
  Server full(tiny(), run.requests, run.options);
  std::vector<std::shared_ptr<const ServeStep>> all;
  while (auto r = full.step()) all.push_back(r);
  ASSERT_GT(all.size(), 2u);
  for (const auto& steps : runs) {
    ASSERT_EQ(steps.size(), all.size());
    for (size_t k = 0; k < all.size(); ++k) {
      ASSERT_EQ(steps[k]->entries.size(), all[k]->entries.size());
      for (size_t i = 0; i < all[k]->entries.size(); ++i) {
        EXPECT_EQ(steps[k]->entries[i].token, all[k]->entries[i].token);
        EXPECT_FALSE(all[k]->entries[i].attn.empty());
        const bool kept = !steps[k]->entries[i].attn.empty();
        EXPECT_EQ(kept, &steps == &runs[1] && k == 0) << "step " << k << " run " << (&steps - &runs[0]);
      }
    }
  }
  ServeSceneInput in;
  in.requests = &full.requests();
  in.steps = &runs[0];
  in.shown = static_cast<int>(runs[0].size()) - 1;
  EXPECT_FALSE(serve_request_view(in, 0, c).seq.current);  // nothing kept: nothing to draw
}

}  // namespace
}  // namespace kvscope
