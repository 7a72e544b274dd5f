// build_serve_scene: where the Serving view's lanes, pool grid, counters and
// plot go in the canvas, from what scene_serve.cpp derives from the records.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "render/scene/scene_format.h"
#include "render/scene/scene_serve.h"

namespace kvscope {

namespace {

const glm::vec3 kText{0.92f, 0.93f, 0.96f};
const glm::vec3 kDark{0.05f, 0.05f, 0.07f};

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), f, a, b, c);
  return buf;
}

bool contains_block(const ServeStep& s, int req, int block) {
  for (size_t j = 0; j < s.tables.size() && j < s.running_after.size(); ++j)
    if (s.running_after[j] == req) return std::find(s.tables[j].begin(), s.tables[j].end(), block) != s.tables[j].end();
  return false;
}

struct Builder {
  const ServeSceneInput& in;
  const ServeViewOptions& opt;
  const Palette& pal;
  ServeScene& sc;
  float y = 0;
  float plot_top_ = 0;
  float bottom_ = 0;  // where the lanes, pool and plot end (above the 3D view, if any)
  // The column the pool, its legend and the plot go in: the canvas's width,
  // or (side by side, where stacked they leave the plot no room) a part of it.
  float x0_ = 0, w_ = 0;

  float tw(const std::string& s) const { return opt.text_width(s); }
  float pad() const { return opt.line_h * 0.3f; }
  void text(float x, float ty, const std::string& s, const glm::vec3& c) { sc.texts.push_back({{x, ty}, s, c}); }
  ServeRect& rect(float x, float ry, float w, float h, const glm::vec3& fill) {
    ServeRect r;
    r.pos = {x, ry};
    r.size = {w, h};
    r.fill = fill;
    sc.rects.push_back(r);
    return sc.rects.back();
  }
  // `parts` joined by " · ", wrapped to the width.
  void sentence(const std::vector<std::string>& parts, const glm::vec3& c) {
    std::vector<std::string> seps;
    for (size_t i = 0; i < parts.size(); ++i) seps.push_back(parts[i] + (i + 1 < parts.size() ? " \xC2\xB7 " : ""));
    for (const std::string& line : balanced_lines(seps, opt.text_width, opt.width)) {
      text(0, y, line, c);
      y += opt.line_h;
    }
  }
  void header();
  void folded_header();
  float lane_label_width() const;
  float state_width() const;
  void lane(const ServeLane& l, float ly, float h, float label_w, float state_w);
  void lanes(float lane_h);
  // The pool's cells `cell` wide in a column `w` wide: the gap between them,
  // how many a row holds and how many rows they take.
  struct Grid {
    float gap;
    int cols, rows;
  };
  Grid grid(float cell, float w) const {
    const float gap = std::max(2.0f, cell * 0.1f);
    const int cols = std::max(1, static_cast<int>((w + gap) / (cell + gap)));
    return {gap, cols, (static_cast<int>(sc.blocks.size()) + cols - 1) / cols};
  }
  void pool(float cell);
  void cells(float cell);
  bool pool_rows();
  float legend_rows(bool brief) const;
  void legend();
  std::vector<std::pair<std::string, glm::vec3>> plot_keys(bool brief) const;
  float plot_key_lines(bool brief) const;
  void plot(float h);
  float grid_h(float cell) const;
  bool fits_above(float bottom) const;
  void body();
  std::vector<std::pair<std::string, std::vector<const ServeLane*>>> strip_groups() const;
  float strip(bool draw, bool labels);
  void folded(bool with_pool);
  void place_3d();
};

// The counters as two sentences, or (`brief`, where those would take more
// than two lines) as short labels.
std::vector<std::vector<std::string>> header_parts(const ServeCounters& c, int shown, size_t n, bool brief) {
  const std::string step = fmt("step %.0f of %.0f", shown + 1, static_cast<double>(n));
  const std::string cached = c.blocks_cached > 0 ? fmt(", %.0f cached", c.blocks_cached) : std::string();
  if (brief)
    return {{step, fmt("%.0f tok/s", c.tokens_per_s),
             c.ttft_count == 0 ? "TTFT -" : fmt("TTFT %.1f steps", c.ttft_steps_mean)},
            {fmt("pool %.0f/%.0f", c.blocks_used, c.pool_blocks) + cached, fmt("hits %.0f", c.prefix_hit_blocks),
             fmt("preempted %.0f", c.preemptions)}};
  const std::string ttft = c.ttft_count == 0 ? "TTFT: no first token yet"
                                             : fmt("mean TTFT %.1f steps (%.1f ms", c.ttft_steps_mean, c.ttft_ms_mean) +
                                                   fmt(", %.0f requests)", c.ttft_count);
  return {{step, fmt("%.0f tokens in %.1f ms of engine time = %.0f tokens/s", c.generated, c.ms, c.tokens_per_s), ttft},
          {fmt("pool %.0f/%.0f blocks used", c.blocks_used, c.pool_blocks) + cached,
           fmt("prefix hits %.0f blocks", c.prefix_hit_blocks), fmt("preemptions %.0f", c.preemptions),
           fmt("batch: %.0f running, %.0f waiting, %.0f positions", c.running, c.waiting, c.positions)}};
}

void Builder::header() {
  const auto lines = [&](const std::vector<std::string>& parts) {
    std::vector<std::string> seps;
    for (size_t i = 0; i < parts.size(); ++i) seps.push_back(parts[i] + (i + 1 < parts.size() ? " \xC2\xB7 " : ""));
    return balanced_lines(seps, opt.text_width, opt.width).size();
  };
  auto parts = header_parts(sc.counters, in.shown, in.steps->size(), false);
  if (lines(parts[0]) + lines(parts[1]) > 2) parts = header_parts(sc.counters, in.shown, in.steps->size(), true);
  if (!in.caption.empty()) sentence(in.caption, pal.new_token);
  for (const auto& p : parts) sentence(p, kText);
  y += opt.line_h * 0.3f;
}

float Builder::lane_label_width() const {
  float w = 0;
  for (const ServeRequest& q : *in.requests) w = std::max(w, tw(q.id));
  return w + opt.line_h * 0.8f + pad();  // and the owner swatch
}

// One request's lane: its colour, id, state, and its tokens as chips (the
// newest that fit; the positions the shown step computed outlined, the
// token it chose bright).
void Builder::lane(const ServeLane& l, float ly, float h, float label_w, float state_w) {
  const ServeRequest& q = (*in.requests)[static_cast<size_t>(l.req)];
  const bool sel = opt.selected == l.req;
  ServeRect& bg = rect(0, ly, opt.width, h - 2, sel ? glm::vec3(0.16f, 0.18f, 0.26f) : glm::vec3(0.09f, 0.10f, 0.13f));
  bg.lane = l.req;
  if (sel) {
    bg.border = pal.shared;
    bg.border_w = 2;
  }
  const float ty = ly + (h - 2 - opt.line_h) * 0.5f;
  rect(pad(), ly + h * 0.2f, opt.line_h * 0.4f, h * 0.6f - 2, serve_owner_colour(l.req, opt.colour_blind));
  text(opt.line_h * 0.8f, ty, q.id, kText);
  std::string state = to_string(l.state);
  if (l.state == LaneState::kPrefill) state += " " + position_range(l.batch_first, l.batch_n);
  ServeRect& badge = rect(label_w, ly + 2, state_w - pad(), h - 6, serve_state_colour(l.state, pal) * 0.35f);
  badge.border = serve_state_colour(l.state, pal);
  badge.border_w = 1.5f;
  text(label_w + pad(), ty, state, kText);
  // The chips, newest first from the right edge; a word's pieces touch, words
  // stand apart, and a leading space is a '·' as on the 3D view's labels (the
  // chips' own padding alone read "te ac her" as three words).
  const int n_prompt = static_cast<int>(q.prompt.size());
  const int n = n_prompt + static_cast<int>(l.generated.size());
  const float x0 = label_w + state_w + pad();
  float x = opt.width - pad();
  const float fade = l.state == LaneState::kNotArrived ? 0.35f : l.state == LaneState::kWaiting ? 0.6f : 1.0f;
  for (int p = n - 1; p >= 0; --p) {
    const int tok = p < n_prompt ? q.prompt[static_cast<size_t>(p)] : l.generated[static_cast<size_t>(p - n_prompt)];
    std::string piece = in.token_text ? in.token_text(tok) : std::to_string(tok);
    const bool word = !piece.empty() && piece[0] == ' ';
    piece = visible_piece(piece);
    const float w = std::max(tw(piece), opt.line_h * 0.4f) + 2 * pad();
    if (x - w < x0 + (p > 0 ? tw("\xE2\x80\xA6") + pad() : 0)) {
      text(x0, ty, "\xE2\x80\xA6", kText);
      break;
    }
    x -= w;
    const bool newest = l.sampled && p == n - 1 && l.state != LaneState::kPreempted;
    const bool lit = p >= l.batch_first && p < l.batch_first + l.batch_n && l.state != LaneState::kPreempted;
    glm::vec3 fill = (p < n_prompt ? pal.prompt_token : pal.generated_token) * (lit ? 0.75f : 0.4f) * fade;
    if (newest) fill = pal.new_token;
    ServeRect& chip = rect(x, ly + 3, w - 1, h - 8, fill);
    chip.lane = l.req;
    if (lit && !newest) {
      chip.border = pal.new_token;
      chip.border_w = 2;
    }
    text(x + pad() - 1, ty, piece, newest ? kDark : kText * (0.55f + 0.45f * fade));
    if (word) x -= pad() * 1.5f;
  }
}

float Builder::state_width() const {
  float w = 0;
  for (LaneState s : {LaneState::kNotArrived, LaneState::kPreempted, LaneState::kDecoding})
    w = std::max(w, tw(to_string(s)));
  return std::max(w, tw("prefill 00-00")) + 3 * pad();
}

void Builder::lanes(float lane_h) {
  const float label_w = lane_label_width(), state_w = state_width();
  for (const ServeLane& l : sc.lanes) {
    lane(l, y, lane_h, label_w, state_w);
    y += lane_h;
  }
  y += opt.line_h * 0.3f;
}

// The pool: one cell per block, by owner (the owner's id in it where it
// fits), shared blocks white with their number of owners, cached-but-free
// dim with an outline, free dark.
void Builder::pool(float cell) {
  const std::string title = fmt("KV pool: %.0f blocks of %.0f positions", in.config.pool_blocks, in.block);
  text(x0_, y, tw(title) <= w_ ? title : fmt("KV pool: %.0f blocks", in.config.pool_blocks), kText);
  y += opt.line_h * 1.1f;
  cells(cell);
}

// The pool's cells, `cell` wide, wrapped in the column from x0_, w_ wide.
void Builder::cells(float cell) {
  const ServeStep& s = *in.steps->at(static_cast<size_t>(in.shown));
  std::vector<int> owner(sc.blocks.size(), -1), count(sc.blocks.size(), 0);
  for (size_t j = 0; j < s.tables.size() && j < s.running_after.size(); ++j)
    for (int b : s.tables[j])
      if (b >= 0 && b < static_cast<int>(owner.size())) {
        owner[static_cast<size_t>(b)] = s.running_after[j];
        count[static_cast<size_t>(b)]++;
      }
  const Grid g = grid(cell, w_);
  const size_t cols = static_cast<size_t>(g.cols);
  for (size_t b = 0; b < sc.blocks.size(); ++b) {
    const float x = x0_ + static_cast<float>(b % cols) * (cell + g.gap);
    const float by = y + static_cast<float>(b / cols) * (cell + g.gap);
    const BlockLook look = sc.blocks[b];
    ServeRect& r = rect(x, by, cell, cell, serve_block_colour(look, owner[b], pal, opt.colour_blind));
    r.block = static_cast<int>(b);
    r.lane = look == BlockLook::kOwned ? owner[b] : -1;
    r.border = look == BlockLook::kCached ? pal.page : pal.empty * 0.6f;
    r.border_w = look == BlockLook::kCached ? 2.0f : 1.0f;
    if (opt.selected >= 0 && look != BlockLook::kFree && look != BlockLook::kCached &&
        contains_block(s, opt.selected, static_cast<int>(b))) {
      r.border = kText;
      r.border_w = 3;
    }
    std::string label = look == BlockLook::kShared  ? fmt("x%.0f", count[b])
                        : look == BlockLook::kOwned ? (*in.requests)[static_cast<size_t>(owner[b])].id
                                                    : std::string();
    if (!label.empty() && tw(label) <= cell - 2 && opt.line_h <= cell)
      text(x + (cell - tw(label)) * 0.5f, by + (cell - opt.line_h) * 0.5f, label, kDark);
  }
  y += static_cast<float>(g.rows) * (cell + g.gap) + g.gap;
}

// Folded, the pool in at most two rows beside its name, its cells at most a
// line and at least 0.45 lines wide (a projector's text scale keeps the
// picture of paging: whose blocks, shared, cached, free). False, drawing
// nothing, where they would be narrower.
bool Builder::pool_rows() {
  const float L = opt.line_h, name_w = tw("KV pool") + 2 * pad();
  const float w = opt.width - name_w;
  for (float cell = L; cell >= L * 0.45f; cell -= 1.0f) {
    if (grid(cell, w).rows > 2) continue;
    y += pad();
    text(0, y + (cell - L) * 0.5f, "KV pool", kText);
    x0_ = name_w, w_ = w;
    cells(cell);
    x0_ = 0, w_ = opt.width;
    return true;
  }
  return false;
}

// What the pool's colours mean, as swatches with their names, wrapped
// (brief names where the full ones would take more than two rows).
struct LegendItem {
  BlockLook look;
  const char* name;
  const char* brief;
};
constexpr LegendItem kLegend[] = {{BlockLook::kOwned, "held by one request (its colour)", "one owner"},
                                  {BlockLook::kShared, "shared prefix (xN: its owners)", "shared (xN)"},
                                  {BlockLook::kCached, "free, still cached", "cached"},
                                  {BlockLook::kFree, "free", "free"}};

float Builder::legend_rows(bool brief) const {
  float x = 0, rows = 1;
  for (const LegendItem& it : kLegend) {
    const float w = opt.line_h * 0.8f + 3 * pad() + tw(brief ? it.brief : it.name);
    if (x > 0 && x + w > w_) {
      x = 0;
      rows++;
    }
    x += w;
  }
  return rows;
}

void Builder::legend() {
  const float sw = opt.line_h * 0.8f;
  const bool brief = legend_rows(false) > 2;
  float x = 0;
  for (const LegendItem& it : kLegend) {
    const char* name = brief ? it.brief : it.name;
    const float w = sw + 3 * pad() + tw(name);
    if (x > 0 && x + w > w_) {
      x = 0;
      y += opt.line_h * 1.15f;
    }
    ServeRect& r =
        rect(x0_ + x, y + (opt.line_h - sw) * 0.5f, sw, sw, serve_block_colour(it.look, 0, pal, opt.colour_blind));
    r.border = it.look == BlockLook::kCached ? pal.page : pal.empty * 0.6f;
    r.border_w = it.look == BlockLook::kCached ? 2.0f : 1.0f;
    text(x0_ + x + sw + pad(), y, name, kText);
    x += w;
  }
  y += opt.line_h * 1.3f;
}

// Over every step so far: pool blocks used (of the pool) and positions
// computed (of the step's budget), preemptions as red ticks, prefix hits
// as white ones, and the shown step as a vertical line.
// The plot's key: what each line and tick is (brief where the full names
// would take more than two lines).
std::vector<std::pair<std::string, glm::vec3>> Builder::plot_keys(bool brief) const {
  if (brief)
    return {{"pool used", pal.cache_high},
            {"positions", pal.generated_token},
            {"preempted", pal.recomputed},
            {"prefix hit", pal.shared}};
  return {{fmt("pool used (of %.0f blocks)", in.config.pool_blocks), pal.cache_high},
          {fmt("positions computed (of budget %.0f)", in.config.max_batch_tokens), pal.generated_token},
          {"preemption", pal.recomputed},
          {"prefix hit", pal.shared}};
}

float Builder::plot_key_lines(bool brief) const {
  float x = 0, lines = 1;
  for (const auto& [s, c] : plot_keys(brief)) {
    if (x > 0 && x + tw(s) > w_) {
      x = 0;
      lines++;
    }
    x += tw(s) + opt.line_h * 0.5f;
  }
  return lines;
}

void Builder::plot(float h) {
  const std::vector<std::shared_ptr<const ServeStep>>& steps = *in.steps;
  const glm::vec3 used_c = pal.cache_high, pos_c = pal.generated_token;
  float x = 0;
  for (const auto& [s, c] : plot_keys(plot_key_lines(false) > 2)) {
    if (x > 0 && x + tw(s) > w_) {
      x = 0;
      y += opt.line_h;
    }
    text(x0_ + x, y, s, c);
    x += tw(s) + opt.line_h * 0.5f;
  }
  y += opt.line_h * 1.1f;
  const float ph = std::max(opt.line_h, h - (y - plot_top_));
  ServeRect& frame = rect(x0_, y, w_, ph, glm::vec3(0.07f, 0.08f, 0.10f));
  frame.border = pal.empty * 0.6f;
  frame.border_w = 1;
  const size_t n = steps.size();
  auto px = [&](size_t k) {
    return x0_ + (n <= 1 ? w_ * 0.5f : w_ * static_cast<float>(k) / static_cast<float>(n - 1));
  };
  ServeLine used{{}, used_c, 2}, pos{{}, pos_c, 2};
  for (size_t k = 0; k < n; ++k) {
    const ServeStep& s = *steps[k];
    used.points.push_back(
        {px(k), y + ph * (1 - static_cast<float>(s.blocks_used) / std::max(1, in.config.pool_blocks))});
    pos.points.push_back({px(k), y + ph * (1 - std::min(1.0f, static_cast<float>(s.positions) /
                                                                  std::max(1, in.config.max_batch_tokens)))});
    if (!s.preempted.empty()) sc.lines.push_back({{{px(k), y + ph}, {px(k), y + ph * 0.75f}}, pal.recomputed, 3});
    if (s.prefix_hit_blocks > 0) sc.lines.push_back({{{px(k), y}, {px(k), y + ph * 0.25f}}, pal.shared, 3});
  }
  sc.lines.push_back(used);
  sc.lines.push_back(pos);
  sc.lines.push_back(
      {{{px(static_cast<size_t>(in.shown)), y}, {px(static_cast<size_t>(in.shown)), y + ph}}, kText, 1.5f});
  y += ph;
}

// The pool's title and grid of `cell`-wide cells, in the column w_ wide.
float Builder::grid_h(float cell) const {
  const Grid g = grid(cell, w_);
  return opt.line_h * 1.1f + static_cast<float>(g.rows) * (cell + g.gap) + g.gap;
}

// Whether every lane (at its smallest, 1.1 lines) and the pool's grid (at
// its smallest cells) fit between y and `bottom`.
bool Builder::fits_above(float bottom) const {
  const float L = opt.line_h;
  return static_cast<float>(sc.lanes.size()) * L * 1.1f + L * 0.3f + grid_h(L * 0.6f) <= bottom - y;
}

// Room: the lanes get 1.6 lines each and the pool's cells 1.8 lines, both
// shrinking (cells to 0.6 lines, unlabelled) until lanes and what goes
// below them fit. Stacked, the plot gets what is left under the pool (at
// least 4.5 lines). Where that leaves it too little (a large text scale),
// the pool and the plot go side by side under the lanes, the pool's legend
// under the pool only where it fits (a cell's tooltip says what it is);
// where even that does not fit, no plot.
void Builder::body() {
  const float L = opt.line_h, left = bottom_ - y;
  const float n = static_cast<float>(sc.lanes.size());
  auto legend_h = [&] {  // in the column w_ wide
    return (std::min(legend_rows(false), std::max(2.0f, legend_rows(true))) - 1) * L * 1.15f + L * 1.3f;
  };
  float lane_h = L * 1.6f, cell = L * 1.8f;
  auto fit = [&](const std::function<float(float)>& below) {
    lane_h = L * 1.6f, cell = L * 1.8f;
    while (n * lane_h + L * 0.3f + below(cell) > left && (lane_h > L * 1.1f || cell > L * 0.6f)) {
      lane_h = std::max(L * 1.1f, lane_h - L * 0.05f);
      cell = std::max(L * 0.6f, cell - L * 0.05f);
    }
    if (n > 0 && n * lane_h + L * 0.3f + below(cell) > left) lane_h = std::max(L, (left - L * 0.3f - below(cell)) / n);
    return left - n * lane_h - L * 0.3f - below(cell);  // what is left under them
  };
  const float rest = fit([&](float c) { return grid_h(c) + legend_h(); });
  const float full_w = w_, col_w = (opt.width - L) * 0.45f;  // the pool's; the plot's is wider (its key)
  w_ = opt.width - L - col_w;
  const float plot_min = (plot_key_lines(plot_key_lines(false) > 2) + 2.5f) * L;
  bool with_legend = true;
  const bool side = rest < L * 4.5f && col_w >= L * 7.0f && [&] {
    w_ = col_w;
    if (fit([&](float c) { return std::max(grid_h(c) + legend_h(), plot_min); }) >= -0.01f) return true;
    with_legend = false;
    return fit([&](float c) { return std::max(grid_h(c), plot_min); }) >= -0.01f;
  }();
  if (side) {  // side by side: the plot beside the pool
    lanes(lane_h);
    const float top = y;
    pool(cell);
    if (with_legend) legend();
    y = top;
    x0_ = col_w + L;
    w_ = opt.width - x0_;
    plot_top_ = top;
    plot(bottom_ - top);
    return;
  }
  w_ = full_w;
  fit([&](float c) { return grid_h(c) + legend_h(); });
  lanes(lane_h);
  pool(cell);
  legend();
  if (bottom_ - y >= L * 4.5f) {
    plot_top_ = y;
    plot(std::min(bottom_ - y, std::max(L * 4.5f, bottom_ * 0.3f)));
  }
}

// Folded, the counters in one line: the step and the pool, then what fits
// of preemptions and prefix hits (where there are any), throughput and TTFT.
void Builder::folded_header() {
  const ServeCounters& c = sc.counters;
  std::vector<std::string> parts = {fmt("step %.0f of %.0f", in.shown + 1, static_cast<double>(in.steps->size())),
                                    fmt("pool %.0f/%.0f", c.blocks_used, c.pool_blocks)};
  if (c.preemptions > 0) parts.push_back(fmt("preempted %.0f", c.preemptions));
  if (c.prefix_hit_blocks > 0) parts.push_back(fmt("hits %.0f", c.prefix_hit_blocks));
  parts.push_back(fmt("%.0f tok/s", c.tokens_per_s));
  if (c.ttft_count > 0) parts.push_back(fmt("TTFT %.1f steps", c.ttft_steps_mean));
  std::string line = parts[0];
  for (size_t i = 1; i < parts.size() && tw(line + " \xC2\xB7 " + parts[i]) <= opt.width; ++i)
    line += " \xC2\xB7 " + parts[i];
  text(0, y, line, kText);
  y += opt.line_h * 1.3f;
}

// The requests other than the selected one, grouped by their state at the
// shown step (the groups in the order a request goes through them).
std::vector<std::pair<std::string, std::vector<const ServeLane*>>> Builder::strip_groups() const {
  std::vector<std::pair<std::string, std::vector<const ServeLane*>>> groups;
  for (LaneState st : {LaneState::kPrefill, LaneState::kDecoding, LaneState::kIdle, LaneState::kPreempted,
                       LaneState::kWaiting, LaneState::kNotArrived, LaneState::kDone}) {
    std::vector<const ServeLane*> ls;
    for (const ServeLane& l : sc.lanes)
      if (l.state == st && l.req != opt.selected) ls.push_back(&l);
    if (!ls.empty()) groups.emplace_back(to_string(st), std::move(ls));
  }
  return groups;
}

// The strip of the other requests under the selected lane: each state's name
// (`labels`) in its colour, then its requests as tiles (owner colour and id,
// in the state's colour as the lanes' badges are); a click on a tile selects
// it. Wraps at the canvas's width; returns its height (drawn when `draw`).
float Builder::strip(bool draw, bool labels) {
  const float L = opt.line_h, row_h = L * 1.3f, row_gap = L * 0.15f;
  float x = 0, ry = y;
  auto place = [&](float w) {
    if (x > 0 && x + w > opt.width) {
      x = 0;
      ry += row_h + row_gap;
    }
    const float at = x;
    x += w + pad();
    return at;
  };
  auto tile_w = [&](const ServeLane* l) {
    return L * 0.4f + 3 * pad() + tw((*in.requests)[static_cast<size_t>(l->req)].id);
  };
  for (const auto& [label, ls] : strip_groups()) {
    const glm::vec3 c = serve_state_colour(ls[0]->state, pal);
    const float lw = labels ? tw(label) + pad() : 0;
    for (size_t i = 0; i < ls.size(); ++i) {
      const float w = tile_w(ls[i]);
      float at = place(i == 0 ? lw + w : w);  // a state's name stays with its first tile
      if (!draw) continue;
      if (i == 0 && labels) {
        text(at, ry + (row_h - L) * 0.5f, label, c);
        at += lw;
      }
      ServeRect& r = rect(at, ry, w, row_h, c * 0.35f);
      r.border = c;
      r.border_w = 1.5f;
      r.lane = ls[i]->req;
      r.tile = true;
      rect(at + pad(), ry + row_h * 0.2f, L * 0.4f, row_h * 0.6f, serve_owner_colour(ls[i]->req, opt.colour_blind));
      text(at + L * 0.4f + 2 * pad(), ry + (row_h - L) * 0.5f, (*in.requests)[static_cast<size_t>(ls[i]->req)].id,
           kText);
    }
    x += pad();  // groups stand further apart than tiles
  }
  return x > 0 ? ry + row_h - y : 0;
}

// The lanes folded: the counters in a line, the selected request's lane
// whole, the others in a strip (their states named where two rows hold the
// names, else in their tiles' colours and tooltips), then (`with_pool`) the
// pool's cells in a row or two where they fit. No legend, no plot.
void Builder::folded(bool with_pool) {
  const float L = opt.line_h;
  folded_header();
  lane(sc.lanes.at(static_cast<size_t>(opt.selected)), y, L * 1.6f, lane_label_width(), state_width());
  y += L * 1.6f + pad();
  const bool labels = strip(false, true) <= L * 2.75f;
  y += strip(true, labels);
  if (with_pool && pool_rows()) y += pad();
}

}  // namespace

// The selected request's 3D view goes under the rest: the lower 45 % of the
// canvas (at least 8 lines) where every lane and the pool fit above it (the
// plot where it still fits, beside the pool at a large text scale); else the
// lanes fold (folded(), with the pool's cells where the view keeps its 45 %)
// and it takes what is left, where that is 8 lines; else there is none.
ServeScene build_serve_scene(const ServeSceneInput& in, const ServeViewOptions& opt) {
  ServeScene sc;
  if (!in.requests || !in.steps || in.steps->empty() || !opt.palette || !opt.text_width) return sc;
  ServeSceneInput at = in;
  at.shown = std::clamp(in.shown, 0, static_cast<int>(in.steps->size()) - 1);
  sc.lanes = serve_lanes(at);
  sc.counters = serve_counters(at);
  sc.blocks = serve_block_looks(*at.steps->at(static_cast<size_t>(at.shown)), at.config.pool_blocks);
  const float L = opt.line_h, gap = L * 0.3f, view_h = std::max(8 * L, std::ceil(opt.height * 0.45f));
  const bool view = opt.request_3d && opt.selected >= 0 && opt.selected < static_cast<int>(sc.lanes.size());
  if (view && !sc.lanes.empty()) {  // folded, where the full picture leaves the view too little
    ServeScene fold;
    ServeScene probe = sc;  // (the full picture's header, measured)
    Builder b{at, opt, *opt.palette, probe};
    b.w_ = opt.width;
    b.header();
    if (!b.fits_above(opt.height - view_h - gap)) {
      for (bool with_pool : {true, false}) {  // the pool's cells where the view keeps its share
        fold = sc;
        Builder f{at, opt, *opt.palette, fold};
        f.w_ = opt.width;
        f.folded(with_pool);
        if (opt.height - f.y - gap >= (with_pool ? view_h : 8 * L)) {
          fold.folded = true;
          fold.view_pos = {0, f.y + gap};
          fold.view_size = {opt.width, opt.height - f.y - gap};
          return fold;
        }
      }
    }
  }
  Builder b{at, opt, *opt.palette, sc};
  b.w_ = opt.width;
  b.bottom_ = opt.height;
  b.header();
  if (view && b.fits_above(opt.height - view_h - gap)) {
    sc.view_pos = {0, opt.height - view_h};
    sc.view_size = {opt.width, view_h};
    b.bottom_ = opt.height - view_h - gap;
  }
  b.body();
  return sc;
}

}  // namespace kvscope
