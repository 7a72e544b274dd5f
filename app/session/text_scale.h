// The text scales the app accepts: the View panel, saved views and settings,
// the scripted window and `kvscope render --text-scale`.
#pragma once

namespace kvscope {

inline constexpr float kMinTextScale = 0.75f, kMaxTextScale = 2.5f;

}  // namespace kvscope
