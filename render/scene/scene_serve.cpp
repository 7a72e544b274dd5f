#include "render/scene/scene_serve.h"

#include <algorithm>

namespace kvscope {

namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

const ServeStep& shown_step(const ServeSceneInput& in) {
  return *in.steps->at(static_cast<size_t>(in.shown));
}

LaneState lane_state(const ServeStep& s, int req, bool finished, const ServeRequest& q) {
  if (finished) return LaneState::kDone;
  if (contains(s.preempted, req)) return LaneState::kPreempted;
  if (contains(s.running, req)) {
    for (const ServeEntry& e : s.entries)
      if (e.req == req) return e.prefill ? LaneState::kPrefill : LaneState::kDecoding;
    return LaneState::kIdle;
  }
  if (contains(s.waiting, req)) return LaneState::kWaiting;
  return q.arrive > s.step ? LaneState::kNotArrived : LaneState::kWaiting;
}

}  // namespace

const char* to_string(LaneState s) {
  switch (s) {
    case LaneState::kNotArrived:
      return "not arrived";
    case LaneState::kWaiting:
      return "waiting";
    case LaneState::kPrefill:
      return "prefill";
    case LaneState::kDecoding:
      return "decoding";
    case LaneState::kIdle:
      return "running, no budget";
    case LaneState::kPreempted:
      return "preempted";
    case LaneState::kDone:
      return "done";
  }
  return "?";
}

std::string position_range(int first, int n) {
  return n == 1 ? std::to_string(first) : std::to_string(first) + "\xE2\x80\x93" + std::to_string(first + n - 1);
}

std::vector<ServeLane> serve_lanes(const ServeSceneInput& in) {
  const size_t n = in.requests->size();
  std::vector<ServeLane> lanes(n);
  std::vector<bool> finished(n, false);
  for (size_t i = 0; i < n; ++i) lanes[i].req = static_cast<int>(i);
  for (int k = 0; k <= in.shown; ++k) {
    const ServeStep& s = *in.steps->at(static_cast<size_t>(k));
    for (const ServeEntry& e : s.entries) {
      if (e.token < 0) continue;
      ServeLane& l = lanes.at(static_cast<size_t>(e.req));
      l.generated.push_back(e.token);
      if (l.first_token_step < 0) l.first_token_step = k;
    }
    for (int r : s.preempted) lanes.at(static_cast<size_t>(r)).preemptions++;
    for (int r : s.finished) finished.at(static_cast<size_t>(r)) = true;
  }
  const ServeStep& s = shown_step(in);
  for (size_t i = 0; i < n; ++i) lanes[i].state = lane_state(s, static_cast<int>(i), finished[i], (*in.requests)[i]);
  for (const ServeEntry& e : s.entries) {
    ServeLane& l = lanes.at(static_cast<size_t>(e.req));
    l.batch_first = e.first;
    l.batch_n = e.n;
    l.sampled = e.token >= 0;
  }
  for (size_t j = 0; j < s.running_after.size() && j < s.tables.size(); ++j)
    lanes.at(static_cast<size_t>(s.running_after[j])).blocks = s.tables[j];
  return lanes;
}

// Times are engine time: the sum of the steps' own ms (forward and
// sampling), so a view that steps on demand or plays slowly measures what
// the engine spent, not how long the class watched.
ServeCounters serve_counters(const ServeSceneInput& in) {
  ServeCounters c;
  const ServeStep& s = shown_step(in);
  std::vector<double> ms_before(static_cast<size_t>(in.shown) + 2, 0.0);  // (record) engine ms before it
  for (int k = 0; k <= in.shown; ++k) {
    const ServeStep& r = *in.steps->at(static_cast<size_t>(k));
    c.preemptions += static_cast<int>(r.preempted.size());
    c.prefix_hit_blocks += r.prefix_hit_blocks;
    for (const ServeEntry& e : r.entries) c.generated += e.token >= 0 ? 1 : 0;
    ms_before[static_cast<size_t>(k) + 1] = ms_before[static_cast<size_t>(k)] + r.ms;
  }
  c.step = s.step;
  c.ms = ms_before.back();
  c.tokens_per_s = c.ms > 0 ? c.generated / (c.ms / 1000.0) : 0;
  for (const ServeLane& l : serve_lanes(in)) {
    if (l.first_token_step < 0) continue;
    const int arrive = (*in.requests)[static_cast<size_t>(l.req)].arrive;
    // It entered the queue in the first step numbered at or after its arrival.
    int k0 = 0;
    while (k0 < l.first_token_step && (*in.steps)[static_cast<size_t>(k0)]->step < arrive) ++k0;
    c.ttft_steps_mean += (*in.steps)[static_cast<size_t>(l.first_token_step)]->step - arrive + 1;
    c.ttft_ms_mean += ms_before[static_cast<size_t>(l.first_token_step) + 1] - ms_before[static_cast<size_t>(k0)];
    c.ttft_count++;
  }
  if (c.ttft_count > 0) {
    c.ttft_steps_mean /= c.ttft_count;
    c.ttft_ms_mean /= c.ttft_count;
  }
  c.blocks_used = s.blocks_used;
  c.blocks_cached = s.blocks_cached;
  c.blocks_free = s.blocks_free;
  c.pool_blocks = in.config.pool_blocks;
  c.running = static_cast<int>(s.running.size());
  c.waiting = static_cast<int>(s.waiting.size());
  c.positions = s.positions;
  return c;
}

std::vector<BlockLook> serve_block_looks(const ServeStep& s, int pool_blocks) {
  std::vector<int> owners(static_cast<size_t>(pool_blocks), 0);
  for (const std::vector<int>& t : s.tables)
    for (int b : t)
      if (b >= 0 && b < pool_blocks) owners[static_cast<size_t>(b)]++;
  std::vector<BlockLook> looks(static_cast<size_t>(pool_blocks), BlockLook::kFree);
  for (size_t b = 0; b < looks.size(); ++b) {
    if (owners[b] > 1)
      looks[b] = BlockLook::kShared;
    else if (owners[b] == 1)
      looks[b] = BlockLook::kOwned;
    else if (b < s.block_cached.size() && s.block_cached[b])
      looks[b] = BlockLook::kCached;
  }
  return looks;
}

glm::vec3 serve_owner_colour(int req, bool colour_blind) {
  // Eight hues apart in hue and lightness (Okabe & Ito's set for the colour-blind palette).
  static const glm::vec3 standard[] = {{0.30f, 0.62f, 1.00f}, {0.98f, 0.55f, 0.20f}, {0.35f, 0.85f, 0.45f},
                                       {0.85f, 0.40f, 0.95f}, {0.95f, 0.85f, 0.30f}, {0.30f, 0.85f, 0.85f},
                                       {1.00f, 0.45f, 0.55f}, {0.65f, 0.70f, 0.40f}};
  static const glm::vec3 safe[] = {{0.90f, 0.62f, 0.00f}, {0.34f, 0.71f, 0.91f}, {0.00f, 0.62f, 0.45f},
                                   {0.94f, 0.89f, 0.26f}, {0.00f, 0.45f, 0.70f}, {0.84f, 0.37f, 0.00f},
                                   {0.80f, 0.47f, 0.65f}, {0.60f, 0.60f, 0.60f}};
  const size_t i = static_cast<size_t>(req < 0 ? 0 : req) % 8;
  return colour_blind ? safe[i] : standard[i];
}

glm::vec3 serve_state_colour(LaneState s, const Palette& pal) {
  switch (s) {
    case LaneState::kPrefill:
      return pal.prefill;
    case LaneState::kDecoding:
      return pal.new_kv;
    case LaneState::kPreempted:
      return pal.recomputed;
    case LaneState::kIdle:
      return pal.page;
    case LaneState::kDone:
      return pal.prompt_token;
    default:
      return pal.empty;
  }
}

glm::vec3 serve_block_colour(BlockLook look, int owner, const Palette& pal, bool colour_blind) {
  switch (look) {
    case BlockLook::kOwned:
      return serve_owner_colour(owner, colour_blind);
    case BlockLook::kShared:
      return pal.shared;
    case BlockLook::kCached:
      return pal.page * 0.45f;
    default:
      return pal.empty * 0.35f;
  }
}

}  // namespace kvscope
