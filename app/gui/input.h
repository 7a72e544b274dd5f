// Keyboard shortcuts and the mouse in the 3D view (orbit, pan, zoom, hover).
#pragma once

#include "app/gui/layout.h"
#include "app/session/commands.h"
#include "app/session/session.h"
#include "render/scene/scene.h"

namespace kvscope {

// Shortcuts pressed this frame (text fields keep their keys). docs/window.md's
// key table lists the same keys.
Commands shortcuts();

// Mouse over the 3D view: drag orbits, right/middle/Shift-drag pans, the
// wheel zooms (each leaves the automatic camera); hovering a block shows its
// tooltip. Returns the hovered token position, -1 for none.
int view_mouse(Session& s, const Scene& scene, const ViewRect& r, bool newest_hidden);

// Eases the camera towards the preset's (automatic camera) or keeps the
// user's; `dt` seconds since the last frame.
void follow_camera(SessionView& view, const UiState& ui, const Scene& scene, float aspect, float dt);

}  // namespace kvscope
