// Defaults of the view that both the scene (render/) and the app's saved
// views and settings (app/session/) start from; no GLM, so the headless
// saved-view code can include it.
#pragma once

namespace kvscope {

// Attention rays below this weight are hidden unless the user asks for them
// (the window's default and `kvscope render`'s).
inline constexpr float kDefaultMinWeight = 0.005f;

}  // namespace kvscope
