#include "app/gui/input.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <cmath>

#include "app/gui/panels/panels.h"

namespace kvscope {

Commands shortcuts() {
  Commands cmds;
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsKeyPressed(GLFW_KEY_F11, false)) cmds.push_back(cmd::Fullscreen{});
  if (ImGui::IsKeyPressed(GLFW_KEY_F12, false)) cmds.push_back(cmd::Screenshot{});
  if (io.WantCaptureKeyboard) return cmds;
  if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) cmds.push_back(cmd::PlayPause{});
  // Timeline: arrows (Shift: 10 steps); a presenter clicker sends PageDown / PageUp.
  const int stride = io.KeyShift ? 10 : 1;
  if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT, true) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN, true))
    cmds.push_back(cmd::Scrub{stride});
  if (ImGui::IsKeyPressed(GLFW_KEY_LEFT, true) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP, true))
    cmds.push_back(cmd::Scrub{-stride});
  if (ImGui::IsKeyPressed(GLFW_KEY_F5, false)) cmds.push_back(cmd::Presentation{});
  if (ImGui::IsKeyPressed(GLFW_KEY_P, false)) cmds.push_back(cmd::Predict{});
  if (ImGui::IsKeyPressed(GLFW_KEY_ENTER, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_ENTER, false))
    cmds.push_back(cmd::Reveal{});
  if (ImGui::IsKeyPressed(GLFW_KEY_R, false)) cmds.push_back(cmd::Reset{});
  if (ImGui::IsKeyPressed(GLFW_KEY_C, false)) cmds.push_back(cmd::ToggleCache{});
  if (ImGui::IsKeyPressed(GLFW_KEY_TAB, false)) cmds.push_back(cmd::TogglePanels{});
  const CameraPreset presets[] = {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow};
  for (int i = 0; i < 4; ++i)
    if (ImGui::IsKeyPressed(GLFW_KEY_1 + i, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_1 + i, false))
      cmds.push_back(cmd::SetCamera{presets[i]});
  return cmds;
}

int view_mouse(Session& s, const Scene& scene, const ViewRect& r, bool newest_hidden) {
  const ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  const bool inside = mouse.x >= r.x && mouse.x < r.x + r.w && mouse.y >= r.y && mouse.y < r.y + r.h;
  // The Serving view is one ImGui window over the whole window: its 3D view
  // is a button the panel reports as hovered (or held in a drag).
  const bool serving = s.ui.serving.open;
  if (serving ? !s.ui.serving.view_hovered : io.WantCaptureMouse || !inside) return -1;
  Camera& cam = s.view.camera;
  const ImVec2 d = io.MouseDelta;
  if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f) && !io.KeyShift) {
    cam.orbit(d.x, d.y);
    s.ui.auto_camera = false;
  } else if (ImGui::IsMouseDragging(ImGuiMouseButton_Right, 1.0f) ||
             ImGui::IsMouseDragging(ImGuiMouseButton_Middle, 1.0f) ||
             (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f) && io.KeyShift)) {
    cam.pan(d.x, d.y, r.h);
    s.ui.auto_camera = false;
  }
  if (io.MouseWheel != 0.0f) {
    cam.zoom(io.MouseWheel);
    s.ui.auto_camera = false;
  }
  // (the strategies' scenes are not one sequence, and the served request's
  // is not the engine's: no per-position tooltip)
  if (serving || !is_sampling(s.engine.strategy)) return -1;
  glm::vec3 origin, dir;
  screen_ray(cam, r.w / r.h, mouse.x - r.x, mouse.y - r.y, r.w, r.h, origin, dir);
  const Pick p = pick(scene, origin, dir);
  if (s.ui.chat.open) {  // the conversation's positions, not the timeline's
    if (p.kind == Pick::kNothing || p.span > 1) return -1;
    chat_tooltip(s.engine.chat, p.pos);
    return p.pos;
  }
  if (p.kind == Pick::kNothing || (newest_hidden && p.pos == s.engine.seq.seq_len())) return -1;
  hover_tooltip(s.engine, p, s.ui.layer, s.ui.head, newest_hidden);
  return p.pos;
}

void follow_camera(SessionView& view, const UiState& ui, const Scene& scene, float aspect, float dt) {
  if (ui.auto_camera) view.goal = preset_camera(ui.camera, scene, aspect);
  if (!view.camera_init) {
    view.camera = view.goal;
    view.camera_init = true;
  }
  if (ui.auto_camera)
    view.camera = blend(view.camera, view.goal, 1.0f - std::exp(-dt * 8.0f));
  else
    view.goal = view.camera;
}

}  // namespace kvscope
