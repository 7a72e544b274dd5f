// Where the panels go: a left sidebar (prompt, playback, cache), a right
// sidebar (attention, Q·K·V, next token, view, model) and a bottom strip (the
// timeline, and the teaching tabs when opened). Each sidebar folds to a
// narrow strip with one click, so a teacher can give the 3D view the whole
// window without presentation mode. To add a panel: write a
// `Commands panel_xxx(const EngineState&, UiState&)` (panels.h) and list it in
// one of the three places in app/gui/layout.cpp.
#pragma once

#include "app/session/commands.h"
#include "app/session/state.h"

namespace kvscope {

// The 3D view's rectangle (window units) left free by the panels.
struct ViewRect {
  float x = 0, y = 0, w = 1, h = 1;
};

// Draws the panels for a W x H window; appends their commands to `cmds`.
// Returns the rectangle left for the 3D view.
ViewRect layout_panels(const EngineState& engine, UiState& ui, float W, float H, Commands& cmds);

}  // namespace kvscope
