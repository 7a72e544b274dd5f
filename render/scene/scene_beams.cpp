#include "render/scene/scene_beams.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "model/core/units.h"

namespace kvscope {
namespace {

glm::vec4 with_alpha(const glm::vec3& c, float a) {
  return glm::vec4(c, a);
}

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Ids of the nodes on the paths of the record's running beams and finished
// hypotheses (their ancestors included).
std::set<int> alive_ids(const BeamStepRecord& r, const std::map<int, BeamNode>& nodes) {
  std::set<int> out;
  auto walk = [&](int id) {
    while (nodes.count(id) && out.insert(id).second) id = nodes.at(id).parent_id;
  };
  for (const Beam& b : r.running) walk(b.id);
  for (const Hypothesis& h : r.finished) walk(h.beam_id);
  return out;
}

}  // namespace

std::vector<BeamNode> beam_tree(const std::vector<BeamRecordPtr>& records, size_t count) {
  count = std::min(count, records.size());
  if (count == 0) return {};
  std::map<int, BeamNode> nodes;
  const BeamStepRecord& r0 = *records[0];
  const std::vector<int>& prompt = r0.expanded.front().tokens;
  const int P = static_cast<int>(prompt.size());
  for (int p = 0; p < P; ++p) {
    BeamNode n;
    n.id = -1 - p;
    n.parent_id = p == 0 ? 1 << 30 : -p;
    n.pos = p;
    n.token = prompt[static_cast<size_t>(p)];
    n.piece = p < static_cast<int>(r0.prompt_pieces.size()) ? r0.prompt_pieces[static_cast<size_t>(p)] : "";
    n.prompt = true;
    n.fed = true;
    nodes[n.id] = n;
  }
  // The prompt beam has id 0: its children hang under the last prompt position.
  auto parent_of = [&](int beam_id) { return beam_id == 0 ? -P : beam_id; };
  for (size_t ri = 0; ri < count; ++ri) {
    const BeamStepRecord& r = *records[ri];
    // Everything an expanded beam holds was input to this record's forward.
    if (ri > 0) {
      for (const Beam& b : r.expanded) {
        for (int id = b.id; nodes.count(id) && !nodes[id].fed; id = nodes[id].parent_id) nodes[id].fed = true;
      }
    }
    for (size_t ci = 0; ci < r.candidates.size(); ++ci) {
      const BeamCandidate& c = r.candidates[ci];
      if (!c.running && !c.finished) continue;
      BeamNode n;
      n.id = c.beam_id;
      n.parent_id = parent_of(r.expanded[static_cast<size_t>(c.parent)].id);
      n.pos = P + static_cast<int>(ri);
      n.token = c.token;
      n.piece = ci < r.candidate_pieces.size() ? r.candidate_pieces[ci] : "";
      n.logprob = c.logprob;
      n.born = static_cast<int>(ri);
      n.finished = c.finished;
      nodes[n.id] = n;
    }
    for (const Hypothesis& h : r.finished) {
      if (nodes.count(h.beam_id)) nodes[h.beam_id].score = h.score;
    }
    // Lanes: running beams in rank order; a node takes the best lane through it.
    std::set<int> placed;
    for (size_t j = 0; j < r.running.size(); ++j) {
      for (int id = r.running[j].id; nodes.count(id) && placed.insert(id).second; id = nodes[id].parent_id)
        nodes[id].lane = static_cast<int>(j);
    }
    for (auto& [id, n] : nodes) {
      if (n.finished && n.born == static_cast<int>(ri) && nodes.count(n.parent_id)) n.lane = nodes[n.parent_id].lane;
    }
  }
  const BeamStepRecord& last = *records[count - 1];
  const std::set<int> alive = alive_ids(last, nodes);
  std::set<int> before;
  if (count >= 2) before = alive_ids(*records[count - 2], nodes);
  for (auto& [id, n] : nodes) {
    n.alive = n.prompt || alive.count(id) > 0;
    n.pruned_now = !n.alive && before.count(id) > 0;
  }
  for (const Beam& b : last.running) {
    if (nodes.count(b.id)) nodes[b.id].running_tip = true;
  }
  std::vector<BeamNode> out;
  for (auto& [id, n] : nodes) out.push_back(n);
  std::sort(out.begin(), out.end(),
            [](const BeamNode& a, const BeamNode& b) { return a.pos != b.pos ? a.pos < b.pos : a.lane < b.lane; });
  return out;
}

namespace {

// What drawing one node needs from the whole tree.
struct BeamDraw {
  const Layout& L;
  const BeamLayout& BL;
  int n_layer;
  int newest_pos;  // the position the shown record's forward computed K/V for
  std::map<int, const BeamNode*> by_id;

  float z_of(const BeamNode& n) const {
    return -(static_cast<float>(n.lane) + (n.finished ? 0.5f : 0.0f)) * BL.lane_pitch;
  }
};

// The node's token block and its label; a running tip or a finished
// hypothesis gets its token and score in one tag beside it instead (its
// label and a tag of its own would crowd each other at a large text scale).
// Returns the block.
// `hidden` (predict mode, a token the shown record chose): "?", no score.
BlockInstance add_node_token(Scene& s, const BeamDraw& d, const BeamNode& n, float vis, bool hidden) {
  const Palette& pal = s.palette;
  const Layout& L = d.L;
  BlockInstance t;
  t.pos = n.pos;
  t.center = L.token_center(n.pos, d.n_layer) + glm::vec3(0.0f, 0.0f, d.z_of(n));
  t.size = {L.block_w, L.token_h, L.block_w};
  glm::vec3 c = n.prompt ? pal.prompt_token : pal.generated_token;
  if (n.finished) c = pal.new_kv;
  if (n.running_tip) c = pal.new_token;
  if (hidden) c = pal.empty;
  t.colour = with_alpha(c, vis);
  t.glow = n.running_tip ? 0.35f : 0.0f;
  s.tokens.push_back(t);

  Label lab;
  lab.kind = LabelKind::kToken;
  lab.pos = n.pos;
  lab.text = hidden ? std::string("?") : visible_piece(n.piece);
  lab.anchor = t.center + glm::vec3(0.0f, L.token_h * 0.5f + 0.12f, 0.0f);
  lab.colour = glm::vec4(n.prompt ? glm::vec3(0.70f, 0.76f, 0.88f) : glm::vec3(1.0f, 0.80f, 0.45f), vis);
  if (n.running_tip || (n.finished && n.alive)) {
    Label sc;
    sc.kind = LabelKind::kHead;
    sc.pos = n.pos;
    sc.text = hidden ? lab.text : lab.text + "  " + (n.finished ? fmt("done %.3f", n.score) : fmt("%.3f", n.logprob));
    sc.anchor = t.center + glm::vec3(L.block_w * 0.5f + 0.4f, 0.0f, 0.0f);  // right of the tip: nothing drawn there
    sc.beside = true;
    sc.colour = glm::vec4(n.finished ? pal.new_kv : pal.new_token, 1.0f);
    s.labels.push_back(sc);
  } else if (vis >= 0.5f) {
    // A pruned branch's text goes before its blocks have faded: a faint
    // label would only take the room of a living lane's.
    s.labels.push_back(lab);
  }
  return t;
}

// The K/V rows computed for this node, once, under it.
void add_node_kv(Scene& s, const BeamDraw& d, const BeamNode& n, float vis) {
  const Palette& pal = s.palette;
  if (!n.fed || n.finished) return;
  const Layout& L = d.L;
  const bool newest = n.pos == d.newest_pos && !n.prompt;
  for (int l = 0; l < d.n_layer; ++l) {
    BlockInstance b;
    b.pos = n.pos;
    b.layer = l;
    const float h = L.kv_h * 0.8f;
    b.center = L.kv_center(n.pos, l, h) + glm::vec3(0.0f, 0.0f, d.z_of(n));
    b.size = {L.block_w, h, L.block_w};
    b.colour = with_alpha(newest ? pal.new_kv : glm::mix(pal.cache_low, pal.cache_high, 0.6f), n.alive ? 1.0f : vis);
    b.state = newest ? KvState::kNew : KvState::kResident;
    s.kv.push_back(b);
  }
}

// A branch: a line from the parent when the child leaves its lane.
void add_branch(Scene& s, const BeamDraw& d, const BeamNode& n, const BlockInstance& t, float vis) {
  const Palette& pal = s.palette;
  auto pit = d.by_id.find(n.parent_id);
  if (n.prompt || pit == d.by_id.end()) return;
  const BeamNode& p = *pit->second;
  RayInstance e;
  e.from = d.L.token_center(p.pos, d.n_layer) + glm::vec3(d.L.block_w * 0.5f, 0.0f, d.z_of(p));
  e.to = t.center - glm::vec3(d.L.block_w * 0.5f, 0.0f, 0.0f);
  e.weight = n.alive ? 1.0f : 0.3f;
  e.colour = glm::vec4(pal.ray, 0.85f * vis);
  e.key = n.pos;
  s.rays.push_back(e);
}

// The banner: the step, its candidates, and the K/V bytes sharing saves.
void set_beam_banner(Scene& s, const BeamStepRecord& r) {
  int n_running = 0, n_finished = 0;
  for (const BeamCandidate& c : r.candidates) {
    n_running += c.running ? 1 : 0;
    n_finished += c.finished ? 1 : 0;
  }
  s.phase = r.index == 0 ? Phase::kPrefill : Phase::kDecodeKV;
  s.banner = "BEAM SEARCH \xC2\xB7 " + std::to_string(std::max(r.running.size(), r.expanded.size())) +
             " beams \xC2\xB7 step " + std::to_string(r.index);
  s.banner_sub = std::to_string(r.candidates.size()) + " candidates: " + std::to_string(n_running) + " keep running, " +
                 std::to_string(n_finished) + " finished \xC2\xB7 K/V held " + format_bytes(r.kv_bytes_shared) +
                 " shared vs " + format_bytes(r.kv_bytes_independent) + " as separate caches";
}

// Each token label keeps to its lane (Label::band), and the front lane's
// come last.
void keep_labels_to_lanes(Scene& s, const Layout& L) {
  // Each token label keeps to its lane: up to the near edge of the next
  // lane's blocks toward -z (a finished hypothesis sits half a lane over).
  for (Label& l : s.labels) {
    if (l.kind != LabelKind::kToken) continue;
    float next = 1e9f;
    for (const BlockInstance& b : s.tokens)
      if (b.center.z < l.anchor.z - 0.01f) next = std::min(next, l.anchor.z - b.center.z);
    if (next < 1e8f) l.band = std::max(0.01f, next - L.block_w * 0.5f);
  }
  // The front lane's (the best beam's) token labels last, so the overlay
  // places them first (it places the last labels first): seen along the
  // lanes (FRONT) they win the room over the lanes behind them.
  std::vector<Label*> tokens;
  for (Label& l : s.labels)
    if (l.kind == LabelKind::kToken) tokens.push_back(&l);
  std::vector<Label> by_lane;
  for (const Label* l : tokens) by_lane.push_back(*l);
  std::stable_sort(by_lane.begin(), by_lane.end(),
                   [](const Label& a, const Label& b) { return a.anchor.z < b.anchor.z; });
  for (size_t i = 0; i < tokens.size(); ++i) *tokens[i] = std::move(by_lane[i]);
}

}  // namespace

Scene build_beam_scene(const std::vector<BeamRecordPtr>& records, size_t count, int n_layer, float anim,
                       const ViewOptions& view, const Layout& L, const BeamLayout& BL) {
  Scene s;
  s.palette = view.palette;
  s.n_layer = n_layer;
  count = std::min(count, records.size());
  if (count == 0) return s;
  anim = std::clamp(anim, 0.0f, 1.0f);
  const BeamStepRecord& r = *records[count - 1];
  const std::vector<BeamNode> tree = beam_tree(records, count);
  const int prompt_len = static_cast<int>(records[0]->expanded.front().tokens.size());
  BeamDraw d{L, BL, n_layer, prompt_len + static_cast<int>(count) - 2, {}};
  for (const BeamNode& n : tree) d.by_id[n.id] = &n;
  const float fade_out = 1.0f - anim;  // what was pruned in this record fades out

  int max_pos = 0, max_lane = 0;
  for (const BeamNode& n : tree) {
    // Branches pruned before the shown step are gone; those pruned in it fade out.
    if (!n.alive && !n.pruned_now) continue;
    max_pos = std::max(max_pos, n.pos);
    max_lane = std::max(max_lane, n.lane);
    const float vis = n.alive ? 1.0f : 0.1f + 0.9f * fade_out;
    const bool hidden = view.hide_newest && !n.prompt && n.born == static_cast<int>(count) - 1;
    const BlockInstance t = add_node_token(s, d, n, vis, hidden);
    add_node_kv(s, d, n, vis);
    add_branch(s, d, n, t, vis);
  }
  keep_labels_to_lanes(s, L);
  set_beam_banner(s, r);
  s.seq_len = max_pos;
  s.slot = max_pos;
  add_layer_labels(s, L, n_layer);
  const float left = L.x(0) - L.pitch * 0.9f;
  s.head_pos = L.token_center(max_pos, n_layer);
  s.bounds_min = {left - L.pitch * 1.5f, -0.1f, -(static_cast<float>(max_lane) + 0.5f) * BL.lane_pitch - L.block_w};
  s.bounds_max = {L.x(max_pos) + L.pitch * 2.0f, L.token_bottom(n_layer) + L.token_h + 0.6f, L.block_w};
  return s;
}

}  // namespace kvscope
