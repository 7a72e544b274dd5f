// The orbit camera and its presets (FRONT, TOP, SIDE, FOLLOW). Pure math on
// GLM, no GL: the window, the headless renderer and the tests share it.
#pragma once

#include <glm/glm.hpp>
#include <string>

#include "render/scene/scene.h"

namespace kvscope {

enum class CameraPreset { kFront, kTop, kSide, kFollow };
const char* to_string(CameraPreset p);  // "front" / "top" / "side" / "follow"
// Parses a preset name; returns false when unknown.
bool parse_camera(const std::string& name, CameraPreset& out);

struct Camera {
  glm::vec3 target{0.0f};
  float distance = 20.0f;
  float yaw = 0.0f;     // radians; 0 = looking down -z (the sequence runs left to right)
  float pitch = 0.25f;  // radians; positive = looking down from above
  float fov_y = 0.70f;  // radians
  // Vertical exaggeration: the camera sees the world with y multiplied by
  // this (target and eye live in that stretched space). The FRONT preset uses
  // it so a long sequence's KV stacks stay tall enough to read.
  float stretch_y = 1.0f;

  glm::vec3 eye() const;        // in the stretched space
  glm::vec3 world_eye() const;  // in world space
  glm::vec3 forward() const;    // unit, from the eye to the target
  glm::vec3 right() const;      // unit, screen right
  glm::vec3 up() const;         // unit, screen up
  glm::mat4 view() const;       // includes the stretch: world -> eye space
  glm::mat4 proj(float aspect) const;

  // Mouse controls. Deltas in pixels; `viewport_h` in pixels.
  void orbit(float dx_px, float dy_px);
  void pan(float dx_px, float dy_px, float viewport_h);
  void zoom(float wheel_steps);  // positive = closer
};

// The preset's camera fitted to the scene (FOLLOW frames the last tokens and
// the write head).
Camera preset_camera(CameraPreset p, const Scene& scene, float aspect);
// A step of a smooth move from `a` towards `b` (t in [0, 1]).
Camera blend(const Camera& a, const Camera& b, float t);

// World -> screen pixels (origin top-left, y down). Returns false when the
// point is behind the camera.
bool project(const glm::mat4& view_proj, const glm::vec3& p, float vw, float vh, glm::vec2& out);
// The world-space ray under a pixel (stretch undone).
void screen_ray(const Camera& cam, float aspect, float px, float py, float vw, float vh, glm::vec3& origin,
                glm::vec3& dir);

}  // namespace kvscope
