// One frame's picture, composed by the same code for the window and for
// `kvscope render`: the scene built from the shown step, and the text layer
// over it (token labels, legend, counters or the presentation HUD, a
// message while there is no step yet). The 3D part is Renderer::draw of
// the composed scene.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/session/session.h"
#include "model/arch/model.h"
#include "render/overlay/overlay.h"
#include "render/scene/scene.h"
#include "render/scene/scene_camera.h"
#include "render/scene/scene_chat.h"

namespace kvscope {

struct FrameSpec {
  const SequenceState* seq = nullptr;  // the shown step's state
  // Beam search / speculative decoding: the timeline's records [0,
  // decode_count) are drawn by build_beam_scene / build_spec_scene instead of
  // `seq` (null or std::monostate: sampling, `seq` is drawn).
  const StrategyTimeline* timeline = nullptr;
  size_t decode_count = 0;
  const Model* model = nullptr;  // name and tokenizer (may be null)
  ViewOptions view;
  float anim = 1.0f;  // animation phase of the newest record, 0..1
  bool labels = true, legend = true, hud = false, presentation = false;
  int step = -1, n_steps = 0;  // the timeline, for the presentation HUD
  bool live = true;            // the shown step is the newest
  int hover_pos = -1;
  std::string message;  // centred over the view while there is no step ("" = none)
  // In place of the scene's banner when not empty (the Serving view's request: its place in the batch).
  std::string banner, banner_sub;
  // Added to the banner's second line when not empty: an early training
  // checkpoint is loaded ("weights from training step 300 of 7200"), so its
  // odd text reads as the lesson, not as the model.
  std::string weights_note;
  // The chat view (tags not null): `seq` is the conversation, tinted by role (add_chat_marks).
  ChatSceneInput chat;
};

// What the window shows for the session's state.
FrameSpec frame_spec(const Session& s, float anim, int hover_pos);

// The scene of the shown step: build_scene, build_beam_scene or build_spec_scene.
Scene frame_scene(const FrameSpec& f);

struct ComposedFrame {
  Scene scene;
  OverlayOptions overlay;  // overlay.band: pixels under the view kept for the legend or the HUD's strip;
                           // overlay.top: pixels above it kept for the banner
  float right = 0;         // pixels right of the view kept for the presentation HUD's card
};

// The scene, and the overlay's options for a view `view_w` wide with
// `avail_h` pixels of height for the view and its bands together: the
// banner gets a band above the view and the legend one under it (its
// entries in rows), each at most 30 % of the height where shrinking their
// text (to a half and 45 % at most) allows, so neither covers the scene.
ComposedFrame compose_frame(const FrameSpec& f, const OverlayFonts& fonts, float view_w, float avail_h);

// The banner's band above a view `view_w` wide (ov.top) and its text's
// scale (ov.banner_scale): as large as keeps the band within 30 % of
// `avail_h` (and not under half size), so the camera frames the scene below
// it and no tag or label sits under it.
void place_banner(const Scene& scene, const OverlayFonts& fonts, float view_w, float avail_h, OverlayOptions& ov);

// The text layer onto `dl`; [origin, origin + size) is the 3D view (the
// banner's band precedes it, the legend's band and the right column follow it).
void draw_frame_text(ImDrawList* dl, const ComposedFrame& fr, const FrameSpec& f, const Camera& camera, ImVec2 origin,
                     ImVec2 size, const OverlayFonts& fonts);

}  // namespace kvscope
