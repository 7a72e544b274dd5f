// The Serving view's scene (render/scene/scene_serve.h), presets
// (app/lessons/serve_presets.h) and engine thread (app/worker/serve_runner.h),
// on the embedded model run by the real Server. The view's numbers are
// checked against what the Server and its scheduler account on their own
// (results, totals) and against the records' raw block tables.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "app/lessons/serve_presets.h"
#include "app/session/session.h"
#include "app/worker/serve_runner.h"
#include "model/arch/model.h"
#include "render/scene/scene_serve.h"
#include "session_clock.h"

namespace kvscope {
namespace {

std::shared_ptr<const Model> tiny() {
  static auto m = load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
  return m;
}

struct Served {
  std::unique_ptr<Server> server;
  std::vector<std::shared_ptr<const ServeStep>> steps;
};

Served serve(int preset, size_t run = 0) {
  std::vector<ServeRunSpec> runs = serve_preset_runs(preset, *tiny());
  Served s;
  s.server = std::make_unique<Server>(tiny(), runs.at(run).requests, runs.at(run).options);
  while (auto r = s.server->step()) s.steps.push_back(r);
  return s;
}

// A fixed-width font: every character (byte) 0.5 line wide.
ServeViewOptions options(float w, float h, float line_h) {
  ServeViewOptions o;
  o.width = w;
  o.height = h;
  o.line_h = line_h;
  o.text_width = [line_h](const std::string& s) { return 0.5f * line_h * static_cast<float>(s.size()); };
  o.palette = &palette_for(false);
  return o;
}

ServeSceneInput input(const Served& s, int shown) {
  ServeSceneInput in;
  in.requests = &s.server->requests();
  in.config = s.server->scheduler().config();
  in.block = s.server->scheduler().block();
  in.steps = &s.steps;
  in.shown = shown;
  in.token_text = [](int t) { return tiny()->tokenizer.display_piece(t); };
  return in;
}

TEST(ServeView, PresetsRunOnTheEmbeddedModel) {
  ASSERT_EQ(serve_presets().size(), 4u);
  for (int p = 0; p < 4; ++p) {
    const std::vector<ServeRunSpec> runs = serve_preset_runs(p, *tiny());
    ASSERT_EQ(runs.size(), p == 3 ? 2u : 1u) << p;
    EXPECT_GE(runs[0].requests.size(), 4u);
  }
  EXPECT_TRUE(serve_preset_runs(1, *tiny())[0].options.sched.prefix_caching);
  const auto both = serve_preset_runs(3, *tiny());
  EXPECT_EQ(both[0].options.sched.policy, ServePolicy::kStatic);
  EXPECT_EQ(both[1].options.sched.policy, ServePolicy::kContinuous);
}

// Each preset shows what it is named for, on the real engine: prefix hits,
// preemptions, and static batching taking more steps than continuous.
TEST(ServeView, PresetsShowTheirPoint) {
  const Served prefix = serve(1), small = serve(2), stat = serve(3, 0), cont = serve(3, 1);
  EXPECT_GT(prefix.server->scheduler().prefix_hit_blocks_total(), 0);
  EXPECT_GT(small.server->scheduler().preemptions_total(), 0);
  EXPECT_GT(stat.steps.size(), cont.steps.size());
}

TEST(ServeView, SharedBlockIsDrawnSharedAndInBothLanes) {
  const Served s = serve(1);
  bool seen = false;
  for (int k = 0; k < static_cast<int>(s.steps.size()) && !seen; ++k) {
    std::map<int, int> owners;  // from the record's tables directly
    for (const auto& t : s.steps[static_cast<size_t>(k)]->tables)
      for (int b : t) owners[b]++;
    for (const auto& [block, n] : owners) {
      if (n < 2) continue;
      seen = true;
      const ServeScene sc = build_serve_scene(input(s, k), options(900, 700, 16));
      EXPECT_EQ(sc.blocks.at(static_cast<size_t>(block)), BlockLook::kShared);
      int lanes_with = 0;
      for (const ServeLane& l : sc.lanes) lanes_with += std::count(l.blocks.begin(), l.blocks.end(), block) > 0;
      EXPECT_EQ(lanes_with, n) << "step " << k << " block " << block;
      bool drawn = false;
      for (const ServeRect& r : sc.rects)
        if (r.block == block) {
          drawn = true;
          EXPECT_EQ(r.fill, palette_for(false).shared);
        }
      EXPECT_TRUE(drawn);
    }
  }
  EXPECT_TRUE(seen) << "no block was shared in the prefix preset";
}

TEST(ServeView, PreemptedLaneSaysPreempted) {
  const Served s = serve(2);
  int k = 0;
  while (k < static_cast<int>(s.steps.size()) && s.steps[static_cast<size_t>(k)]->preempted.empty()) ++k;
  ASSERT_LT(k, static_cast<int>(s.steps.size()));
  const int victim = s.steps[static_cast<size_t>(k)]->preempted[0];
  const ServeScene sc = build_serve_scene(input(s, k), options(900, 700, 16));
  EXPECT_EQ(sc.lanes.at(static_cast<size_t>(victim)).state, LaneState::kPreempted);
  // The lane's label says so, inside the lane's rows.
  float top = -1, bottom = -1;
  for (const ServeRect& r : sc.rects)
    if (r.lane == victim && r.block < 0 && top < 0) {
      top = r.pos.y;
      bottom = r.pos.y + r.size.y;
    }
  bool said = false;
  for (const ServeText& t : sc.texts) said = said || (t.text == "preempted" && t.pos.y >= top && t.pos.y < bottom);
  EXPECT_TRUE(said);
  // The step before, it was running.
  if (k > 0) {
    const ServeScene before = build_serve_scene(input(s, k - 1), options(900, 700, 16));
    const LaneState st = before.lanes.at(static_cast<size_t>(victim)).state;
    EXPECT_TRUE(st == LaneState::kDecoding || st == LaneState::kPrefill || st == LaneState::kIdle) << to_string(st);
  }
}

TEST(ServeView, PoolLooksCountWhatTheRecordCounts) {
  for (int preset : {0, 1, 2}) {
    const Served s = serve(preset);
    for (int k = 0; k < static_cast<int>(s.steps.size()); ++k) {
      const ServeStep& r = *s.steps[static_cast<size_t>(k)];
      const ServeScene sc = build_serve_scene(input(s, k), options(900, 700, 16));
      std::map<BlockLook, int> n;
      for (BlockLook b : sc.blocks) n[b]++;
      EXPECT_EQ(n[BlockLook::kOwned] + n[BlockLook::kShared], r.blocks_used) << preset << " step " << k;
      EXPECT_EQ(n[BlockLook::kCached], r.blocks_cached) << preset << " step " << k;
      EXPECT_EQ(n[BlockLook::kFree], r.blocks_free - r.blocks_cached) << preset << " step " << k;
      int drawn = 0;
      for (const ServeRect& rect : sc.rects) drawn += rect.block >= 0;
      EXPECT_EQ(drawn, s.server->scheduler().config().pool_blocks);
      EXPECT_EQ(sc.counters.blocks_used, r.blocks_used);
    }
  }
}

// At the last step the lanes hold what the Server wrote for each request,
// and the counters agree with its own totals and the CLI's TTFT formula.
TEST(ServeView, CountersAgreeWithTheServer) {
  for (int preset : {0, 1, 2}) {
    const Served s = serve(preset);
    const int last = static_cast<int>(s.steps.size()) - 1;
    const ServeSceneInput in = input(s, last);
    const std::vector<ServeLane> lanes = serve_lanes(in);
    const ServeCounters c = serve_counters(in);
    int generated = 0;
    double ttft = 0;
    const auto& reqs = s.server->requests();
    for (size_t i = 0; i < reqs.size(); ++i) {
      const ServeResult& res = s.server->result(static_cast<int>(i));
      EXPECT_EQ(lanes[i].generated, res.tokens) << reqs[i].id;
      EXPECT_EQ(lanes[i].state, LaneState::kDone);
      EXPECT_EQ(lanes[i].preemptions, res.preemptions);
      generated += static_cast<int>(res.tokens.size());
      ttft += res.first_token_step - reqs[i].arrive + 1;
    }
    EXPECT_EQ(c.generated, generated);
    EXPECT_EQ(c.ttft_count, static_cast<int>(reqs.size()));
    EXPECT_NEAR(c.ttft_steps_mean, ttft / static_cast<double>(reqs.size()), 1e-9);
    EXPECT_EQ(c.preemptions, s.server->scheduler().preemptions_total());
    EXPECT_EQ(c.prefix_hit_blocks, s.server->scheduler().prefix_hit_blocks_total());
    double ms = 0;
    for (const auto& r : s.steps) ms += r->ms;
    EXPECT_NEAR(c.tokens_per_s, generated / (ms / 1000.0), 1e-6 * c.tokens_per_s);
  }
}

// Everything in `sc` is drawn inside [0, w] x [0, bottom].
void expect_inside(const ServeScene& sc, const ServeViewOptions& o, float bottom, const std::string& what) {
  ASSERT_FALSE(sc.rects.empty()) << what;
  for (const ServeRect& r : sc.rects) {
    EXPECT_GE(r.pos.x, -0.01f) << what;
    EXPECT_GE(r.pos.y, -0.01f) << what;
    EXPECT_LE(r.pos.x + r.size.x, o.width + 0.01f) << what;
    EXPECT_LE(r.pos.y + r.size.y, bottom + 0.01f) << what;
  }
  for (const ServeText& t : sc.texts) {
    EXPECT_LE(t.pos.x + o.text_width(t.text), o.width + 0.01f) << t.text << " " << what;
    EXPECT_LE(t.pos.y + o.line_h, bottom + 0.01f) << t.text << " " << what;
  }
}

// Everything drawn stays inside the canvas at a projector's text size too:
// eight lanes, and six under the static vs continuous caption; the sizes
// include the window's canvas at 1280x720 (text scale 1: 16-pixel lines;
// 2.5: 40). With a lane selected, its 3D view (the attention rays) gets a
// usable part of the canvas at every size: its whole width, at least 8
// lines and 45 % of the height, under everything else drawn; the selected
// lane stays in sight and every other request keeps a rect to click.
TEST(ServeView, LayoutStaysInsideTheCanvas) {
  const Served eight = serve(0), six = serve(3, 1);
  for (const Served* s : {&eight, &six}) {
    for (const auto& [w, h, line] : {std::tuple{980.0f, 700.0f, 17.0f}, std::tuple{996.0f, 704.0f, 16.0f},
                                     std::tuple{820.0f, 700.0f, 42.0f}, std::tuple{785.0f, 680.0f, 40.0f}}) {
      ServeViewOptions o = options(w, h, line);
      for (int k : {0, static_cast<int>(s->steps.size()) / 2})
        for (int selected : {-1, 1}) {
          ServeSceneInput in = input(*s, k);
          if (s == &six) in.caption = {"static: 28 steps", "continuous: 16 steps so far"};
          o.selected = selected;
          o.request_3d = selected >= 0;
          const ServeScene sc = build_serve_scene(in, o);
          const std::string what = "line " + std::to_string(line) + " lanes " + std::to_string(sc.lanes.size()) +
                                   " step " + std::to_string(k) + " selected " + std::to_string(selected);
          if (selected < 0) {
            EXPECT_EQ(sc.view_size.y, 0.0f) << what;
            expect_inside(sc, o, h, what);
            // The plot's two curves (one point per step) are there at both text scales.
            int curves = 0;
            for (const ServeLine& l : sc.lines) curves += l.points.size() == s->steps.size() ? 1 : 0;
            EXPECT_EQ(curves, 2) << what;
            continue;
          }
          EXPECT_NEAR(sc.view_pos.x, 0.0f, 0.01f) << what;
          EXPECT_NEAR(sc.view_size.x, w, 0.01f) << what;
          EXPECT_GE(sc.view_size.y, std::max(8 * line, 0.45f * h) - 0.01f) << what;
          EXPECT_LE(sc.view_pos.y + sc.view_size.y, h + 0.01f) << what;
          expect_inside(sc, o, sc.view_pos.y, what);
          std::vector<int> clickable(sc.lanes.size(), 0);
          for (const ServeRect& r : sc.rects)
            if (r.lane >= 0 && r.block < 0) clickable.at(static_cast<size_t>(r.lane))++;
          for (size_t i = 0; i < clickable.size(); ++i) EXPECT_GT(clickable[i], 0) << "request " << i << " " << what;
          // The selected lane is drawn whole (the canvas's width), its state written in it.
          float top = -1, bottom = -1;
          for (const ServeRect& r : sc.rects)
            if (r.lane == 1 && r.block < 0 && !r.tile && r.size.x > w - 0.01f) top = r.pos.y, bottom = top + r.size.y;
          bool said = false;
          for (const ServeText& t : sc.texts)
            said = said || (t.text.rfind(to_string(sc.lanes[1].state), 0) == 0 && t.pos.y >= top && t.pos.y < bottom);
          EXPECT_TRUE(said) << what;
        }
    }
  }
}

// At a projector's text size with a lane selected (the lanes folded), the
// pool's cells stay in the picture, every block once, above the 3D view,
// which keeps its 45 % of the canvas (1280x720 at text scale 2.5).
TEST(ServeView, FoldedViewKeepsThePool) {
  const Served eight = serve(0);
  ServeViewOptions o = options(785.0f, 680.0f, 40.0f);
  o.selected = 1;
  o.request_3d = true;
  for (int k : {0, static_cast<int>(eight.steps.size()) / 2}) {
    const ServeScene sc = build_serve_scene(input(eight, k), o);
    ASSERT_TRUE(sc.folded) << "step " << k;
    std::vector<int> drawn(sc.blocks.size(), 0);
    for (const ServeRect& r : sc.rects) {
      if (r.block < 0) continue;
      drawn.at(static_cast<size_t>(r.block))++;
      EXPECT_LE(r.pos.y + r.size.y, sc.view_pos.y) << "block " << r.block << " step " << k;
    }
    for (size_t b = 0; b < drawn.size(); ++b) EXPECT_EQ(drawn[b], 1) << "block " << b << " step " << k;
    EXPECT_GE(sc.view_size.y, 0.45f * 680.0f - 0.01f) << "step " << k;
  }
}

// Folded at other heights: the pool's row only where the 3D view keeps its
// share (45 % of the canvas, at least 8 lines); where it would not, the lanes
// fold without it and the view keeps 8 lines (the fallback), which some of
// these heights reach.
TEST(ServeView, FoldedViewDropsThePoolBeforeTheViewsShare) {
  const Served eight = serve(0);
  const float line = 40.0f;
  int with_pool = 0, without = 0;
  for (float h = 520.0f; h <= 1000.0f; h += 10.0f) {
    ServeViewOptions o = options(785.0f, h, line);
    o.selected = 1;
    o.request_3d = true;
    const ServeScene sc = build_serve_scene(input(eight, static_cast<int>(eight.steps.size()) / 2), o);
    if (!sc.folded) continue;
    int blocks = 0;
    for (const ServeRect& r : sc.rects) blocks += r.block >= 0;
    const std::string what = "height " + std::to_string(h);
    if (blocks > 0) {
      EXPECT_EQ(blocks, static_cast<int>(sc.blocks.size())) << what;
      EXPECT_GE(sc.view_size.y, 0.45f * h - 0.01f) << what;
      ++with_pool;
    } else {
      EXPECT_GE(sc.view_size.y, 8 * line - 0.01f) << what;
      ++without;
    }
  }
  EXPECT_GT(with_pool, 0);
  EXPECT_GT(without, 0);
}

// The engine thread computes the steps asked for, and the same records as a
// Server run directly.
TEST(ServeView, RunnerStepsOnRequest) {
  std::vector<std::unique_ptr<Server>> servers;
  for (ServeRunSpec& r : serve_preset_runs(3, *tiny()))
    servers.push_back(std::make_unique<Server>(tiny(), r.requests, r.options));
  ServeRunner runner;
  runner.start(tiny(), std::move(servers));
  ServeRuns got;
  runner.request_steps(2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto wait_for = [&](int steps) {
    do {
      runner.read(got);
      if (got.steps() >= steps && !got.busy) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } while (std::chrono::steady_clock::now() < deadline);
  };
  wait_for(2);
  ASSERT_EQ(got.runs.size(), 2u);
  EXPECT_EQ(got.steps(), 2);  // no more than asked
  runner.request_steps(1000);
  wait_for(1);
  const Served stat = serve(3, 0), cont = serve(3, 1);
  EXPECT_TRUE(got.runs[0].done && got.runs[1].done);
  EXPECT_EQ(got.runs[0].steps.size(), stat.steps.size());
  EXPECT_EQ(got.runs[1].steps.size(), cont.steps.size());
  for (size_t k = 0; k < cont.steps.size() && k < got.runs[1].steps.size(); ++k)
    EXPECT_EQ(got.runs[1].steps[k]->positions, cont.steps[k]->positions) << k;
  EXPECT_TRUE(got.error.empty()) << got.error;
}

// The window's controller drives the view headless: opening it runs the
// selected preset's first step and pauses the generation, the playback keys
// step and scrub it, Play runs it to the end.
TEST(ServeView, SessionDrivesTheView) {
  Session s;
  SessionClock clock{s};
  auto now = [&] { return clock.now(); };
  auto wait = [&](const std::function<bool()>& ok) { return clock.wait(ok); };
  ASSERT_TRUE(clock.serve_tiny());
  EXPECT_FALSE(s.ui.playing);
  EXPECT_EQ(s.engine.serving.steps(), 1);
  s.execute(Commands{cmd::Step{}}, now());  // → ServeStep{1}
  ASSERT_TRUE(wait([&] { return s.engine.serving.steps() >= 2 && !s.engine.serving.busy; }));
  EXPECT_EQ(s.engine.serving.steps(), 2);
  s.execute(Commands{cmd::Scrub{-1}}, now());
  EXPECT_EQ(s.ui.serving.view_step, 0);
  s.execute(Commands{cmd::Scrub{1}}, now());  // back to the newest: nothing computed
  EXPECT_EQ(s.ui.serving.view_step, -1);
  EXPECT_EQ(s.engine.serving.steps(), 2);
  s.ui.serving.speed = 1000;
  s.execute(Commands{cmd::PlayPause{}}, now());  // → ServePlay
  EXPECT_TRUE(s.ui.serving.playing);
  ASSERT_TRUE(wait([&] { return !s.ui.serving.playing; }));
  EXPECT_EQ(static_cast<size_t>(s.engine.serving.steps()), serve(0).steps.size());
  EXPECT_TRUE(s.engine.serving.runs.at(0).done);
  s.execute(Commands{cmd::ServeOpen{false}}, now());
  s.execute(Commands{cmd::PlayPause{}}, now());  // the generation's again
  EXPECT_TRUE(s.ui.playing);
}

}  // namespace
}  // namespace kvscope
