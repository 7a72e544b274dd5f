// Speculative decoding drawn: a pure function from the draft-then-verify
// iterations to the same instance lists as the single-sequence scene. The
// shown iteration plays in three stages over `anim`:
//   [0, kDraftEnd)       the draft proposes: ghost blocks in the draft colour
//                        appear one by one ahead of the committed text;
//   [kDraftEnd, kVerifyEnd) the target verifies: the K/V columns of every
//                        verified position light up at once (one forward);
//   [kVerifyEnd, 1]      accepted ghosts solidify, rejected ones fall away,
//                        the K/V written for them rolls back (red outlines),
//                        the replacement or bonus token drops in.
#pragma once

#include <vector>

#include "model/decoding/spec_record.h"
#include "render/scene/scene.h"

namespace kvscope {

struct SpecTiming {
  static constexpr float kDraftEnd = 0.35f;
  static constexpr float kVerifyEnd = 0.6f;
};

// An `anim` inside each stage, for pictures held at one: 0 draft, 1 verify,
// 2 resolve (the ghosts drafted, their K/V columns lit, the verdict).
float spec_stage_anim(int stage);

// The draft model's colour (ghost blocks).
extern const glm::vec3 kDraftColour;

// From `view`: its palette, and hide_newest (predict mode): the shown
// iteration stops at its draft stage (the drafted tokens and q), so neither
// the target's verdicts, p, nor the token it emits are named until revealed.
Scene build_spec_scene(const std::vector<SpecIterationPtr>& iterations, size_t count, float anim = 1.0f,
                       const ViewOptions& view = ViewOptions(), const Layout& layout = Layout());

}  // namespace kvscope
