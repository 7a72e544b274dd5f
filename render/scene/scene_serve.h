// The Serving view's picture, pure: ServeStep records (model/serving/server.h)
// and view options in, rectangles, text and plot lines in pixels out, tested
// without GL or ImGui; the Serving panel (app/gui/panels/serving.cpp) only
// draws them. One lane per request (its tokens as chips, its state), the
// pool as a grid of blocks coloured by owner, counters, and a plot over the
// steps. Everything is read from the records of steps [0, shown].
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <glm/glm.hpp>

#include "model/serving/server.h"
#include "render/scene/scene.h"

namespace kvscope {

enum class LaneState { kNotArrived, kWaiting, kPrefill, kDecoding, kIdle, kPreempted, kDone };
const char* to_string(LaneState s);  // "not arrived", "waiting", "prefill", ...
// Positions [first, first + n) as the lane and the banner both write them:
// "32–45" (inclusive, an en dash), or "32" for one.
std::string position_range(int first, int n);

// One request at the shown step.
struct ServeLane {
  int req = 0;
  LaneState state = LaneState::kNotArrived;
  std::vector<int> generated;        // tokens chosen in steps [0, shown]
  int batch_first = 0, batch_n = 0;  // positions the shown step computed for it
  bool sampled = false;              // the shown step chose its newest token
  std::vector<int> blocks;           // its pool blocks after the shown step
  int preemptions = 0;               // so far
  int first_token_step = -1;         // index of the record that chose its first token, -1: none yet
};

// The counters at the shown step, over records [0, shown].
struct ServeCounters {
  int step = 0;                // the record's engine step
  int generated = 0;           // tokens chosen so far
  double ms = 0;               // engine time: the steps' ms summed over [0, shown]
  double tokens_per_s = 0;     // generated / ms
  int ttft_count = 0;          // requests with a first token
  double ttft_steps_mean = 0;  // first token's step - arrival + 1
  double ttft_ms_mean = 0;     // engine ms from the arrival step to the first token's, both included
  int blocks_used = 0, blocks_cached = 0, blocks_free = 0, pool_blocks = 0;
  int prefix_hit_blocks = 0;                    // so far
  int preemptions = 0;                          // so far
  int running = 0, waiting = 0, positions = 0;  // the shown step's
};

// What the view serves (a run's requests and scheduler configuration) and
// the records so far.
struct ServeSceneInput {
  const std::vector<ServeRequest>* requests = nullptr;
  SchedulerConfig config;
  int block = 0;  // positions per pool block
  const std::vector<std::shared_ptr<const ServeStep>>* steps = nullptr;
  int shown = 0;                               // index into *steps
  std::function<std::string(int)> token_text;  // a token's display-safe piece
  std::vector<std::string> caption;            // a first line's parts (e.g. both runs' step counts); none: no line
};

// A pool block's look at the shown step.
enum class BlockLook { kFree, kCached, kOwned, kShared };

struct ServeViewOptions {
  float width = 800, height = 600;                      // the canvas, pixels
  float line_h = 16;                                    // the font's line height
  std::function<float(const std::string&)> text_width;  // the font's width of a text
  const Palette* palette = nullptr;
  bool colour_blind = false;
  int selected = -1;  // a lane to highlight (-1: none)
  // The selected request has a 3D view to show (serve_request_view found a
  // step to draw): the canvas leaves it a part (ServeScene::view_pos/size).
  bool request_3d = false;
};

struct ServeRect {
  glm::vec2 pos{0}, size{0};
  glm::vec3 fill{0};
  float alpha = 1;
  glm::vec3 border{0};
  float border_w = 0;  // 0: none
  int lane = -1;       // the request whose lane this is (hit-testing)
  int block = -1;      // the pool block it draws
  bool tile = false;   // a folded lane's tile in the strip (its state is in its tooltip)
};
struct ServeText {
  glm::vec2 pos{0};  // top-left
  std::string text;
  glm::vec3 colour{1};
};
struct ServeLine {
  std::vector<glm::vec2> points;
  glm::vec3 colour{1};
  float width = 1;
};

struct ServeScene {
  std::vector<ServeLane> lanes;  // (request)
  ServeCounters counters;
  std::vector<BlockLook> blocks;  // (pool block)
  std::vector<ServeRect> rects;   // drawn in order
  std::vector<ServeText> texts;   // drawn after the rects
  std::vector<ServeLine> lines;
  // The part of the canvas left to the selected request's 3D view (the
  // window's renderer draws it there, under the panel); size 0: none. Where
  // the lanes, pool and plot leave it too little, the lanes fold to the
  // selected one and a strip of tiles for the others (`folded`), and the
  // pool and plot give way.
  glm::vec2 view_pos{0}, view_size{0};
  bool folded = false;
};

// The lanes, counters and pool looks alone (what build_serve_scene draws).
std::vector<ServeLane> serve_lanes(const ServeSceneInput& in);
ServeCounters serve_counters(const ServeSceneInput& in);
std::vector<BlockLook> serve_block_looks(const ServeStep& s, int pool_blocks);

// The request's colour in lanes and the pool (a set of distinguishable hues).
glm::vec3 serve_owner_colour(int req, bool colour_blind);
glm::vec3 serve_state_colour(LaneState s, const Palette& pal);
glm::vec3 serve_block_colour(BlockLook look, int owner, const Palette& pal, bool colour_blind);

ServeScene build_serve_scene(const ServeSceneInput& in, const ServeViewOptions& opt);

// One request in the plain generation view's terms, for build_scene to draw
// (its tokens, K/V stacks, write head and attention rays; one builder for
// both views): the newest step at or before the shown one whose batch
// computed positions for `req` and kept their attention (ServeEntry::attn),
// as a StepRecord of that request alone. Its rays' weights are the attention
// of the request's newest query in that batched forward. K norms are not
// kept by serving: the stacks are drawn at the unknown height.
struct ServeRequestView {
  SequenceState seq;               // seq.current null: nothing to draw (not computed yet, or no attention kept)
  int record = -1;                 // index into *in.steps of the step drawn
  std::string banner, banner_sub;  // in place of the scene's own: the request's place in the batch
};
ServeRequestView serve_request_view(const ServeSceneInput& in, int req, const Config& c);

}  // namespace kvscope
