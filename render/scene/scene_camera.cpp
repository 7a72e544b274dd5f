#include "render/scene/scene_camera.h"

#include <algorithm>
#include <cmath>
#include <glm/gtc/matrix_transform.hpp>
#include <glm/gtc/type_ptr.hpp>
#include <vector>

namespace kvscope {

namespace {
constexpr float kPi = 3.14159265358979f;
constexpr float kMaxPitch = 1.55f;  // just short of straight down, so `up` stays defined
}  // namespace

const char* to_string(CameraPreset p) {
  switch (p) {
    case CameraPreset::kFront:
      return "front";
    case CameraPreset::kTop:
      return "top";
    case CameraPreset::kSide:
      return "side";
    case CameraPreset::kFollow:
      return "follow";
  }
  return "front";
}

bool parse_camera(const std::string& name, CameraPreset& out) {
  for (CameraPreset p : {CameraPreset::kFront, CameraPreset::kTop, CameraPreset::kSide, CameraPreset::kFollow}) {
    if (name == to_string(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

glm::vec3 Camera::eye() const {
  const glm::vec3 back{std::cos(pitch) * std::sin(yaw), std::sin(pitch), std::cos(pitch) * std::cos(yaw)};
  return target + distance * back;
}
glm::vec3 Camera::forward() const {
  return glm::normalize(target - eye());
}
glm::vec3 Camera::right() const {
  return {std::cos(yaw), 0.0f, -std::sin(yaw)};
}
glm::vec3 Camera::up() const {
  return glm::normalize(glm::cross(right(), forward()));
}

glm::vec3 Camera::world_eye() const {
  glm::vec3 e = eye();
  e.y /= stretch_y;
  return e;
}

glm::mat4 Camera::view() const {
  return glm::lookAt(eye(), target, up()) * glm::scale(glm::mat4(1.0f), glm::vec3(1.0f, stretch_y, 1.0f));
}

glm::mat4 Camera::proj(float aspect) const {
  const float near_z = std::max(0.02f, distance * 0.01f);
  const float far_z = distance * 20.0f + 200.0f;
  return glm::perspective(fov_y, aspect, near_z, far_z);
}

void Camera::orbit(float dx_px, float dy_px) {
  yaw -= dx_px * 0.006f;
  pitch = std::clamp(pitch + dy_px * 0.006f, -kMaxPitch, kMaxPitch);
}

void Camera::pan(float dx_px, float dy_px, float viewport_h) {
  const float world_per_px = 2.0f * distance * std::tan(fov_y * 0.5f) / std::max(1.0f, viewport_h);
  target += (-dx_px * right() + dy_px * up()) * world_per_px;
}

void Camera::zoom(float wheel_steps) {
  distance = std::clamp(distance * std::pow(0.88f, wheel_steps), 0.5f, 5000.0f);
}

bool project(const glm::mat4& vp, const glm::vec3& p, float vw, float vh, glm::vec2& out) {
  const glm::vec4 c = vp * glm::vec4(p, 1.0f);
  if (c.w <= 1e-6f) return false;
  const glm::vec3 ndc = glm::vec3(c) / c.w;
  out = {(ndc.x * 0.5f + 0.5f) * vw, (1.0f - (ndc.y * 0.5f + 0.5f)) * vh};
  return true;
}

void screen_ray(const Camera& cam, float aspect, float px, float py, float vw, float vh, glm::vec3& origin,
                glm::vec3& dir) {
  const float nx = px / vw * 2.0f - 1.0f;
  const float ny = 1.0f - py / vh * 2.0f;
  const float th = std::tan(cam.fov_y * 0.5f);
  origin = cam.world_eye();
  dir = cam.forward() + cam.right() * (nx * th * aspect) + cam.up() * (ny * th);
  dir.y /= cam.stretch_y;
  dir = glm::normalize(dir);
}

namespace {

std::vector<glm::vec3> box_corners(const glm::vec3& lo, const glm::vec3& hi) {
  std::vector<glm::vec3> pts;
  for (int i = 0; i < 8; ++i) pts.push_back({(i & 1) ? hi.x : lo.x, (i & 2) ? hi.y : lo.y, (i & 4) ? hi.z : lo.z});
  return pts;
}

// The distance at which every point of `pts` fits inside `margin` of the
// viewport (`margin_y` vertically; NDC), for the camera's orientation and target.
float fit_distance(Camera cam, const std::vector<glm::vec3>& pts, float aspect, float margin, float margin_y) {
  float a = 0.5f, b = 20000.0f;
  for (int it = 0; it < 40; ++it) {
    cam.distance = 0.5f * (a + b);
    const glm::mat4 vp = cam.proj(aspect) * cam.view();
    bool fits = true;
    for (size_t i = 0; i < pts.size() && fits; ++i) {
      const glm::vec4 c = vp * glm::vec4(pts[i], 1.0f);
      fits = c.w > 1e-4f && std::abs(c.x / c.w) <= margin && std::abs(c.y / c.w) <= margin_y;
    }
    if (fits)
      b = cam.distance;
    else
      a = cam.distance;
  }
  return b;
}

// Moves the target until `pts` sit centred on the view, fitting the distance
// again each time: the side view sees the scene from a corner, in
// perspective, and a fit about the box's middle leaves part of the view empty.
void centre_and_fit(Camera& cam, const std::vector<glm::vec3>& pts, float aspect, float margin, float margin_y) {
  for (int it = 0; it < 6; ++it) {
    const glm::mat4 vp = cam.proj(aspect) * cam.view();
    glm::vec2 a(1e9f), b(-1e9f);
    for (const glm::vec3& p : pts) {
      const glm::vec4 c = vp * glm::vec4(p, 1.0f);
      if (c.w <= 1e-4f) return;
      a = glm::min(a, glm::vec2(c) / c.w);
      b = glm::max(b, glm::vec2(c) / c.w);
    }
    const glm::vec2 mid = 0.5f * (a + b);
    const float half_h = cam.distance * std::tan(cam.fov_y * 0.5f);
    cam.target += cam.right() * (mid.x * half_h * aspect) + cam.up() * (mid.y * half_h);
    cam.distance = fit_distance(cam, pts, aspect, margin, margin_y);
  }
}

// The side view's outline of the scene: its box, but at the oldest end no
// higher than the token row (only the newest end holds the write head and
// its tag above it).
std::vector<glm::vec3> side_outline(const Scene& scene, const glm::vec3& lo, const glm::vec3& hi) {
  std::vector<glm::vec3> pts = box_corners(lo, hi);
  float row_top = lo.y;
  for (const BlockInstance& b : scene.tokens) row_top = std::max(row_top, b.center.y + 0.5f * b.size.y);
  for (const BlockInstance& b : scene.kv) row_top = std::max(row_top, b.center.y + 0.5f * b.size.y);
  for (glm::vec3& p : pts)
    if (p.x == lo.x && p.y == hi.y) p.y = std::min(hi.y, row_top + 0.6f);
  return pts;
}

// The top view's outline of the scene: its box, but only as high as the
// blocks stand (seen from above, the box's higher corners would frame it
// wider than the row) and with two positions' room on the left of the row
// for the layer number; the right end keeps the box's room (the head, the
// ray candidates' tags).
std::vector<glm::vec3> top_outline(const Scene& scene, const glm::vec3& lo, const glm::vec3& hi) {
  float x0 = hi.x, top = lo.y;
  for (const auto* list : {&scene.tokens, &scene.kv, &scene.markers})
    for (const BlockInstance& b : *list) {
      x0 = std::min(x0, b.center.x - 0.5f * b.size.x);
      top = std::max(top, b.center.y + 0.5f * b.size.y);
    }
  const float pitch = scene.tokens.size() > 1 ? std::fabs(scene.tokens[1].center.x - scene.tokens[0].center.x) : 1.0f;
  return box_corners(glm::vec3(std::max(lo.x, x0 - 2.0f * pitch), lo.y, lo.z),
                     glm::vec3(hi.x, std::min(hi.y, top), hi.z));
}

}  // namespace

Camera preset_camera(CameraPreset p, const Scene& scene, float aspect) {
  Camera cam;
  glm::vec3 lo = scene.bounds_min, hi = scene.bounds_max;
  if (scene.slot < 0) {  // nothing yet: a sensible default box
    lo = {-2.0f, 0.0f, -1.0f};
    hi = {10.0f, 4.0f, 3.0f};
  }
  float margin = 0.86f;
  float top_band = 0;  // NDC height at the top of the view kept clear of the scene
  switch (p) {
    case CameraPreset::kFront: {
      cam.yaw = 0.0f;
      cam.pitch = 0.30f;
      // Long sequences: exaggerate heights so the stacks fill about half of
      // the view's height (a wall of K-norm columns, layer by layer) instead
      // of a thin line.
      const float height = std::max(1.0f, hi.y - lo.y);
      cam.stretch_y = std::clamp(0.5f * (hi.x - lo.x) / std::max(aspect, 0.2f) / height, 1.0f, 40.0f);
      break;
    }
    case CameraPreset::kTop:
      cam.yaw = 0.0f;
      cam.pitch = kMaxPitch;
      // A long, thin row: framed on its own outline (below), across nearly
      // the whole width; the labels above it and the rays' arcs in front
      // have the height to spare.
      margin = 0.94f;
      cam.fov_y = 0.45f;  // from further away: the row's near and far ends alike in size
      break;
    case CameraPreset::kSide:
      cam.yaw = 0.85f;
      cam.pitch = 0.32f;
      // Framed close (below): a little more margin for the labels on top.
      margin = 0.84f;
      break;
    case CameraPreset::kFollow: {
      // The last ~14 positions and the write head, seen from the front-right.
      const float x_head = scene.head_pos.x;
      lo.x = std::max(lo.x, x_head - 14.0f);
      hi.x = x_head + 1.0f;
      cam.yaw = 0.30f;
      cam.pitch = 0.28f;
      margin = 0.92f;
      // Close up, a deep model's stack is taller than wide and fills the view
      // from bottom to top: keep the write head and its label out from under
      // the step banner (the top ~13 % of the window).
      top_band = 0.26f;
      break;
    }
  }
  lo.y *= cam.stretch_y;
  hi.y *= cam.stretch_y;
  cam.target = 0.5f * (lo + hi);
  // fit_distance projects world points: hand it the world box.
  lo.y /= cam.stretch_y;
  hi.y /= cam.stretch_y;
  const bool side = p == CameraPreset::kSide && scene.slot >= 0;
  const bool top = p == CameraPreset::kTop && !scene.tokens.empty();
  const std::vector<glm::vec3> pts =
      side ? side_outline(scene, lo, hi) : (top ? top_outline(scene, lo, hi) : box_corners(lo, hi));
  cam.distance = fit_distance(cam, pts, aspect, margin, margin - 0.5f * top_band);
  if (side || top) centre_and_fit(cam, pts, aspect, margin, margin - 0.5f * top_band);
  // Then lower the picture by half the band: it spans [-margin, margin - band].
  cam.target += cam.up() * (0.5f * top_band * cam.distance * std::tan(cam.fov_y * 0.5f));
  return cam;
}

Camera blend(const Camera& a, const Camera& b, float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  Camera c = b;
  c.target = glm::mix(a.target, b.target, t);
  // Distances blend in log space so zooming far out and back feels even.
  c.distance = std::exp(glm::mix(std::log(a.distance), std::log(b.distance), t));
  float dyaw = std::remainder(b.yaw - a.yaw, 2.0f * kPi);
  c.yaw = a.yaw + dyaw * t;
  c.pitch = glm::mix(a.pitch, b.pitch, t);
  c.fov_y = glm::mix(a.fov_y, b.fov_y, t);
  c.stretch_y = std::exp(glm::mix(std::log(a.stretch_y), std::log(b.stretch_y), t));
  return c;
}

}  // namespace kvscope
