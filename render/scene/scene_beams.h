// Beam search drawn as a tree: a pure function from the beam-search step
// records to the same instance lists as the single-sequence scene. Every
// distinct prefix is one node, so the prompt and the prefixes beams share
// are drawn once; each running beam owns a lane (z = -lane * lane_pitch, the
// best beam in front), a node sits on the lane of the best running beam
// through it, branches pruned in the shown step fade out (earlier ones are
// gone), finished hypotheses are marked with their score. The K/V stack under a node is the
// cache rows computed for it (one stack per node: shared rows once).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/decoding/beam_record.h"
#include "render/scene/scene.h"

namespace kvscope {

struct BeamLayout {
  float lane_pitch = 2.6f;  // z distance between lanes: room for a tag and a label between them
};

// One node of the beam tree as of the shown record.
struct BeamNode {
  int id = 0;         // beam id (prompt positions: -1 - position)
  int parent_id = 0;  // -1 - position for the prompt chain
  int pos = 0;
  int token = 0;
  std::string piece;
  double logprob = 0;  // cumulative
  int lane = 0;
  int born = 0;         // record that created it
  bool prompt = false;  // a prompt position
  bool alive = false;   // on the path of a running beam or a finished hypothesis
  bool running_tip = false;
  bool finished = false;    // an EOS / maximum-length hypothesis end
  double score = 0;         // finished: the hypothesis score
  bool fed = false;         // its K/V rows were computed (it was input to a forward)
  bool pruned_now = false;  // fell out of the beam in the shown record
};

// The tree after records [0, count), for tests and the scene.
std::vector<BeamNode> beam_tree(const std::vector<BeamRecordPtr>& records, size_t count);

// The scene; `anim` in [0, 1] fades out what was pruned in the shown record.
// From `view`: its palette, and hide_newest (predict mode): the tokens the
// shown record chose are "?" and their tags carry no score.
Scene build_beam_scene(const std::vector<BeamRecordPtr>& records, size_t count, int n_layer, float anim = 1.0f,
                       const ViewOptions& view = ViewOptions(), const Layout& layout = Layout(),
                       const BeamLayout& beam_layout = BeamLayout());

}  // namespace kvscope
