// A Session driven headless by a test: its clock (seconds since the test
// began) and a wait that updates the session until a condition holds (or 60
// seconds pass, when it returns false). Needs KVSCOPE_SOURCE_DIR.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "app/session/session.h"

namespace kvscope {

struct SessionClock {
  Session& s;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  bool wait(const std::function<bool()>& ok) {
    while (!ok() && now() < 60) {
      s.update(now());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return ok();
  }
  // The embedded model loaded and the Serving view open on its first step.
  bool serve_tiny() {
    s.load_model(std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny");
    if (!wait([&] { return s.engine.model != nullptr; })) return false;
    s.execute(Commands{cmd::ServeOpen{true}}, now());
    return wait([&] { return s.engine.serving.steps() >= 1 && !s.engine.serving.busy; });
  }
};

}  // namespace kvscope
