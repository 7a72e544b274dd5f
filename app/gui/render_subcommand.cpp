// `kvscope render`: runs a generation and draws the same scene + overlay as
// the window, offscreen through EGL (no display), into PNG files. With
// --bench it reports frame times at full context with every beam drawn.
#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "app/gui/common.h"
#include "app/gui/frame.h"
#include "app/gui/gui.h"
#include "app/gui/panels/lesson_panels.h"
#include "app/platform/png_file.h"
#include "app/platform/video_pipe.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/decoding/strategy.h"
#include "render/gl/gl_context.h"
#include "render/gl/gl_objects.h"
#include "render/gl/renderer.h"
#include "render/overlay/overlay.h"
#include "render/scene/scene.h"
#include "render/scene/scene_beams.h"
#include "render/scene/scene_camera.h"
#include "render/scene/scene_spec.h"

namespace kvscope {

namespace {

// The fonts' scale: the text scale asked for, and above 720 rows the text
// grows with the image, so a larger render shows the same picture sharper.
float render_text_scale(const RenderOptions& o) {
  return o.text_scale * std::max(1.0f, static_cast<float>(o.height) / 720.0f);
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// An ImGui context that draws only the overlay, into whatever framebuffer is bound.
class OffscreenImGui {
 public:
  OffscreenImGui(int width, int height, float text_scale) {
    IMGUI_CHECKVERSION();
    ctx_ = ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.LogFilename = nullptr;
    io.DisplaySize = ImVec2(static_cast<float>(width), static_cast<float>(height));
    io.DeltaTime = 1.0f / 60.0f;
    fonts_ = load_fonts(text_scale);
    if (!ImGui_ImplOpenGL3_Init("#version 330 core"))
      throw Error("the ImGui OpenGL 3 backend could not start in the headless context");
  }
  ~OffscreenImGui() {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui::DestroyContext(ctx_);
  }
  OffscreenImGui(const OffscreenImGui&) = delete;
  OffscreenImGui& operator=(const OffscreenImGui&) = delete;

  // One ImGui frame whose background draw list `draw` fills (the text layer).
  void draw(const std::function<void(ImDrawList*, const OverlayFonts&)>& draw) {
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
    draw(ImGui::GetBackgroundDrawList(), fonts_);
    ImGui::Render();
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  }
  const OverlayFonts& fonts() const { return fonts_; }

 private:
  ImGuiContext* ctx_ = nullptr;
  OverlayFonts fonts_;
};

void write_png(const std::string& path, int w, int h, const std::vector<uint8_t>& rgba) {
  write_png_file(path, w, h, rgba.data(), w * 4);
}

// Before anything runs: the folders the outputs go to exist (they are not
// created behind the user's back); --frames DIR itself is created, and said.
void check_output_folders(const RenderOptions& o) {
  namespace fs = std::filesystem;
  auto parent_exists = [](const std::string& flag, const std::string& path) {
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec))
      throw Error(flag + " " + path + ": the folder " + parent.string() + " does not exist (create it first)");
  };
  if (!o.out.empty()) parent_exists("--out", o.out);
  if (!o.video.empty()) parent_exists("--video", o.video);
  if (!o.frames_dir.empty()) {
    std::error_code ec;
    if (fs::exists(o.frames_dir, ec) && !fs::is_directory(o.frames_dir, ec))
      throw Error("--frames " + o.frames_dir + ": exists and is not a folder");
    if (!fs::exists(o.frames_dir, ec)) {
      parent_exists("--frames", fs::path(o.frames_dir).lexically_normal().string());
      if (!fs::create_directory(o.frames_dir, ec) || ec)
        throw Error("--frames " + o.frames_dir + ": cannot create the folder (" + ec.message() + ")");
      std::fprintf(stderr, "kvscope: created the folder %s for --frames\n", o.frames_dir.c_str());
    }
  }
}

// After the context exists: the image fits what this driver can draw.
void check_image_size(int width, int height) {
  const int max_side = gl::max_image_side();
  if (width > max_side || height > max_side) {
    throw UsageError("--width/--height: " + std::to_string(width) + "x" + std::to_string(height) +
                     " is larger than this OpenGL driver draws (at most " + std::to_string(max_side) +
                     " pixels per side)");
  }
}

// The headless GL context and what draws into it, set up alike by every
// render mode: the image size checked against the driver before anything is
// allocated, the driver's debug messages collected for the end.
struct OffscreenGl {
  // `window_samples`: multisample as the window does (not on a software
  // rasteriser; $KVSCOPE_RENDER_SAMPLES overrides), else kRenderSamples.
  OffscreenGl(int width, int height, float text_scale, bool window_samples) {
    check_image_size(width, height);
    gl::enable_debug_output(&messages);
    renderer = std::make_unique<Renderer>();
    int samples = kRenderSamples;
    if (window_samples) {
      samples = is_software_renderer() ? 0 : kRenderSamples;
      if (const char* e = std::getenv("KVSCOPE_RENDER_SAMPLES"); e && *e) samples = std::atoi(e);
    }
    target.resize(width, height, samples);
    imgui = std::make_unique<OffscreenImGui>(width, height, text_scale);
  }
  OffscreenGl(const OffscreenGl&) = delete;
  OffscreenGl& operator=(const OffscreenGl&) = delete;

  // Prints what the driver reported, if anything; true when it did.
  bool report_messages() const {
    for (const auto& m : messages) std::fprintf(stderr, "kvscope: GL: %s\n", m.c_str());
    return !messages.empty();
  }

  // In the order they are made (and, reversed, released).
  gl::HeadlessContext ctx;
  std::vector<std::string> messages;  // the driver's debug output
  std::unique_ptr<Renderer> renderer;
  gl::OffscreenTarget target;
  std::unique_ptr<OffscreenImGui> imgui;
};

// The heatmap grid right of a `x0`-wide 3D view (`kvscope render --heatmaps`).
void draw_heatmap_panel(ImDrawList* dl, const OverlayFonts& fonts, const std::vector<RecordPtr>& records, int layer,
                        int head, float x0, float W, float H) {
  PanelMemo::Heat memo;
  const float pad = 12.0f * std::max(1.0f, H / 720.0f);
  const ImFont* font = fonts.small ? fonts.small : ImGui::GetFont();
  const float fs = font->FontSize;
  dl->AddRectFilled(ImVec2(x0, 0), ImVec2(W, H), IM_COL32(10, 12, 20, 255));
  dl->AddText(font, fs * 1.2f, ImVec2(x0 + pad, pad), IM_COL32(220, 225, 240, 255),
              "attention of every layer (rows) and head (columns)");
  dl->AddText(font, fs, ImVec2(x0 + pad, pad + fs * 1.4f), IM_COL32(150, 160, 185, 255),
              "row = query position, column = key, brightness = sqrt(weight); outlined: newest query");
  const float top = pad + fs * 3.0f;
  draw_heatmap_grid(dl, ImVec2(x0 + pad, top), ImVec2(W - x0 - 2 * pad, H - top - pad), records,
                    static_cast<int>(records.size()) - 1, layer, head, ImVec2(-1e9f, -1e9f), font, fs,
                    palette_for(false), memo);
}

void check_view(const Model& model, int layer, int head) {
  const Config& c = model.config;
  if (layer >= c.n_layer)
    throw UsageError("--layer " + std::to_string(layer) + ": the model has " + std::to_string(c.n_layer) +
                     " layers (0-" + std::to_string(c.n_layer - 1) + ") or \"mean\"");
  if (head >= c.n_head)
    throw UsageError("--head " + std::to_string(head) + ": the model has " + std::to_string(c.n_head) + " heads (0-" +
                     std::to_string(c.n_head - 1) + ") or \"mean\"");
}

struct Percentiles {
  double mean = 0, p50 = 0, p95 = 0, max = 0;
};
Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  for (double x : v) p.mean += x;
  p.mean /= static_cast<double>(v.size());
  p.p50 = v[v.size() / 2];
  p.p95 = v[std::min(v.size() - 1, static_cast<size_t>(0.95 * static_cast<double>(v.size())))];
  p.max = v.back();
  return p;
}

// `render --bench`'s sequence: the whole context filled, the prompt's tokens
// repeated up to n_positions - 1, prefilled in one pass, then decode steps to
// the last position (a random or small model may emit end-of-text early; then
// the prefill covers it). The prefill keeps every row's attention, (layer,
// head, T, T) floats: it is capped at 256 MB and the rest decoded.
struct FilledContext {
  SequenceState seq;
  std::vector<int> tokens;  // what ran: the prefill's tokens and the decoded ones
  int prefilled = 0;
};

FilledContext fill_context(const std::shared_ptr<const Model>& model, const std::string& prompt_text) {
  const Config& c = model->config;
  Generator gen(model);
  if (c.n_positions < 2) {
    throw Error(model->name + ": the context holds " + std::to_string(c.n_positions) +
                " position; render --bench needs at least 2 (a prefill and a decode step)");
  }
  std::vector<int> prompt = model->tokenizer.encode(prompt_text);
  if (prompt.empty()) throw Error("--prompt is empty (expected some text)");
  const double row_bytes = 4.0 * c.n_layer * c.n_head;
  FilledContext f;
  int fill = c.n_positions - 1;
  while (fill > 16 && row_bytes * fill * fill > 256.0 * 1024 * 1024) fill /= 2;
  f.prefilled = fill;
  std::vector<int> tokens;
  while (static_cast<int>(tokens.size()) < fill) tokens.push_back(prompt[tokens.size() % prompt.size()]);
  GenerateOptions go;
  go.max_new = c.n_positions - fill;
  go.mode = CacheMode::kKV;
  gen.start_tokens(tokens, go);
  const auto t_gen = Clock::now();
  while (RecordPtr r = gen.step()) append_record(f.seq, r);
  std::printf("kvscope render --bench: %s, %d of %d positions (%d prefilled) in %.1f s\n", model->name.c_str(),
              f.seq.seq_len() + 1, c.n_positions, fill, ms_since(t_gen) / 1000.0);
  f.tokens = gen.tokens();
  return f;
}

// What the bench draws each frame with: the window's scene, camera and text
// layer, every beam (no minimum weight), into an offscreen target.
struct BenchFrames {
  const RenderOptions& o;
  CameraPreset preset;
  const SequenceState& seq;
  const OverlayOptions& overlay;
  OffscreenGl& offscreen;
};

// One batch of frames: the frame time's percentiles, the mean per stage, what was drawn.
struct FrameTimes {
  Percentiles total;
  double scene_ms = 0, draw_ms = 0, overlay_ms = 0;
  DrawStats stats;
};

FrameTimes time_frames(const BenchFrames& b, int n) {
  ViewOptions view;
  view.layer = b.o.layer;
  view.head = b.o.head;
  view.min_weight = 0.0f;
  FrameTimes t;
  std::vector<double> ms;
  Scene scene;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    // Animate like the window does, so the scene is rebuilt every frame.
    scene = build_scene(b.seq, view, static_cast<float>(i % 30) / 29.0f);
    const Camera cam = preset_camera(b.preset, scene, static_cast<float>(b.o.width) / static_cast<float>(b.o.height));
    const auto t1 = Clock::now();
    b.offscreen.target.bind();
    b.offscreen.renderer->draw(scene, cam, b.o.width, b.o.height);
    glFinish();
    const auto t2 = Clock::now();
    b.offscreen.imgui->draw([&](ImDrawList* dl, const OverlayFonts& fonts) {
      draw_overlay(dl, scene, cam, ImVec2(0, 0), ImGui::GetIO().DisplaySize, fonts, b.overlay);
    });
    glFinish();
    const auto t3 = Clock::now();
    ms.push_back(ms_since(t0));
    t.scene_ms += std::chrono::duration<double, std::milli>(t1 - t0).count() / n;
    t.draw_ms += std::chrono::duration<double, std::milli>(t2 - t1).count() / n;
    t.overlay_ms += std::chrono::duration<double, std::milli>(t3 - t2).count() / n;
  }
  t.total = percentiles(ms);
  t.stats = b.offscreen.renderer->stats();
  return t;
}

// The same frames while another thread runs NO CACHE forwards over the whole
// sequence, as the engine worker does during playback; `forwards` counts them.
FrameTimes time_frames_under_load(const BenchFrames& b, int n, const Model& model, const std::vector<int>& tokens,
                                  int& forwards) {
  std::atomic<bool> stop{false};
  std::atomic<int> ran{0};
  std::thread worker([&] {
    Engine engine(model);
    const size_t len = std::min<size_t>(tokens.size(), static_cast<size_t>(model.config.n_positions));
    const std::vector<int> seq_tokens(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(len));
    while (!stop) {
      engine.forward(seq_tokens, 0, nullptr, false);
      ran++;
    }
  });
  FrameTimes t = time_frames(b, n);
  stop = true;
  worker.join();
  forwards = ran.load();
  return t;
}

void print_bench_report(const FrameTimes& idle, const FrameTimes& busy, int forwards) {
  const Percentiles &i = idle.total, &b = busy.total;
  std::printf("  scene: %d blocks, %d rays, %d draw calls\n", idle.stats.blocks, idle.stats.rays,
              idle.stats.draw_calls);
  std::printf("  %-34s %8s %8s %8s %8s\n", "frame time (ms)", "mean", "p50", "p95", "max");
  std::printf("  %-34s %8.1f %8.1f %8.1f %8.1f\n", "idle", i.mean, i.p50, i.p95, i.max);
  std::printf("  %-34s %8.1f %8.1f %8.1f %8.1f\n", "while NO CACHE forwards run", b.mean, b.p50, b.p95, b.max);
  std::printf("  (%d full-sequence forwards ran alongside)\n", forwards);
  std::printf("  idle breakdown: scene + camera %.1f ms, 3D draw %.1f ms, text overlay %.1f ms\n", idle.scene_ms,
              idle.draw_ms, idle.overlay_ms);
}

int run_bench(const RenderOptions& o, std::shared_ptr<const Model> model, CameraPreset preset) {
  leave_a_core_for_rendering();  // engine threads as in the window
  const FilledContext filled = fill_context(model, o.prompt);

  OffscreenGl offscreen(o.width, o.height, 1.0f, /*window_samples=*/true);
  std::printf("  %s, %dx%d, %d samples\n", offscreen.ctx.description().c_str(), o.width, o.height,
              offscreen.target.samples());

  OverlayOptions ov;
  ov.model_name = model->name;
  ov.record = filled.seq.current.get();
  const BenchFrames frames{o, preset, filled.seq, ov, offscreen};
  time_frames(frames, 5);  // warm-up (shader JIT)
  const FrameTimes idle = time_frames(frames, 60);
  int forwards = 0;
  const FrameTimes busy = time_frames_under_load(frames, 60, *model, filled.tokens, forwards);
  print_bench_report(idle, busy, forwards);
  gl::check_errors("bench");
  return offscreen.report_messages() ? 1 : 0;
}

}  // namespace

bool is_software_renderer() {
  const GLubyte* r = glGetString(GL_RENDERER);
  return gl::is_software_rasterizer(r ? reinterpret_cast<const char*>(r) : "");
}

namespace {

constexpr int kVideoFps = 30;
constexpr int kVideoFramesPerStep = 12;  // the step's animation (flash, beams, drop) over 0.4 s

}  // namespace

// `render --beams N` / `--draft DIR`: the beam tree or the speculative
// iterations (each in its draft, verify and resolve stages), same renderer
// and text layer, one PNG per step (or per stage) into --frames, the last to --out.
int run_render_decode(const RenderOptions& o, std::shared_ptr<const Model> model, CameraPreset preset) {
  OffscreenGl offscreen(o.width, o.height, render_text_scale(o),
                        /*window_samples=*/false);
  // Composed as the window composes the strategy's step (compose_frame): the
  // banner in a band of its own, the camera framing the view under it.
  std::vector<BeamRecordPtr> beam_recs;
  std::vector<SpecIterationPtr> its;
  const SequenceState no_sequence;
  auto draw = [&](float anim) {
    FrameSpec spec;
    spec.seq = &no_sequence;
    spec.model = model.get();
    const StrategyTimeline timeline = is_beam(o.strategy) ? StrategyTimeline(beam_recs) : StrategyTimeline(its);
    spec.timeline = &timeline;
    spec.decode_count = is_beam(o.strategy) ? beam_recs.size() : its.size();
    spec.anim = anim;
    spec.legend = spec.hud = false;
    const float W = static_cast<float>(o.width), H = static_cast<float>(o.height);
    const ComposedFrame fr = compose_frame(spec, offscreen.imgui->fonts(), W, H);
    const float vh = std::max(1.0f, H - fr.overlay.top);
    const Camera cam = preset_camera(preset, fr.scene, W / vh);
    offscreen.target.bind();
    glClearColor(fr.scene.palette.background.r, fr.scene.palette.background.g, fr.scene.palette.background.b, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
    offscreen.renderer->draw(fr.scene, cam, 0, 0, o.width, static_cast<int>(vh));
    offscreen.imgui->draw([&](ImDrawList* dl, const OverlayFonts& fonts) {
      draw_frame_text(dl, fr, spec, cam, ImVec2(0, fr.overlay.top), ImVec2(W, vh), fonts);
    });
    gl::check_errors("render");
    return offscreen.target.read_rgba();
  };
  auto save = [&](const std::string& name, float anim) {
    const std::vector<uint8_t> px = draw(anim);
    if (!o.frames_dir.empty()) write_png((std::filesystem::path(o.frames_dir) / name).string(), o.width, o.height, px);
    return px;
  };
  std::vector<uint8_t> last;
  int steps = 0;
  GenerateOptions go;
  go.max_new = std::max(1, o.steps);
  go.sampler = o.sampler;
  go.kv = o.kv;
  const DraftLoader draft = [&](const std::string& dir) { return load_cli_model(dir, o.ctx); };
  Driver driver = make_driver(o.strategy, model, draft, o.prompt, go);
  for (StepOutput out = step_driver(driver); std::visit([](const auto& p) { return p != nullptr; }, out);
       out = step_driver(driver)) {
    if (const auto* r = std::get_if<BeamRecordPtr>(&out)) {
      beam_recs.push_back(*r);
      char name[32];
      std::snprintf(name, sizeof(name), "beam_%04d.png", (*r)->index);
      last = save(name, 1.0f);
    } else if (const auto* it = std::get_if<SpecIterationPtr>(&out)) {
      its.push_back(*it);
      for (const auto& [stage, name_part] : {std::pair{0, "a_draft"}, {1, "b_verify"}, {2, "c_resolve"}}) {
        char name[48];
        std::snprintf(name, sizeof(name), "spec_%04d_%s.png", (*it)->index, name_part);
        last = save(name, spec_stage_anim(stage));
      }
    }
    ++steps;
  }
  if (!o.out.empty() && !last.empty()) write_png(o.out, o.width, o.height, last);
  if (offscreen.report_messages()) throw Error("OpenGL reported errors while rendering (above)");
  std::fprintf(stderr, "kvscope: rendered %d %s with %s\n", steps,
               is_beam(o.strategy) ? "beam-search steps" : "iterations", offscreen.ctx.description().c_str());
  return 0;
}

namespace {

// Checks the options that need no model: the camera, the image size, ffmpeg
// for --video (returned: its path, or "") and the output folders.
std::string check_render_options(const RenderOptions& o, CameraPreset& preset) {
  if (!parse_camera(o.camera, preset)) throw Error("--camera " + o.camera + ": expected front, top, side or follow");
  if (o.width < 16 || o.height < 16) throw Error("--width/--height: at least 16 pixels");
  std::string ffmpeg;
  if (!o.video.empty()) {
    ffmpeg = find_on_path("ffmpeg");
    if (ffmpeg.empty())
      throw Error("--video " + o.video +
                  ": ffmpeg is not installed (on Debian: sudo apt-get install ffmpeg). "
                  "Without it, --frames DIR writes one PNG per step.");
    if (o.width % 2 || o.height % 2) throw Error("--video: --width and --height must be even (H.264 4:2:0)");
  }
  if (!o.bench) check_output_folders(o);
  return ffmpeg;
}

// One frame of a generation as the window composes it: the 3D view, its text
// and counters, and with --heatmaps the grid in the right 42%.
struct GenerationFrames {
  const RenderOptions& o;
  CameraPreset preset;
  const Model& model;
  const SequenceState& seq;
  // Every step's record so far, for the heatmap grid only (kept whole, a
  // long generation's records grow with the square of its length).
  const std::vector<RecordPtr>& history;
  OffscreenGl& offscreen;

  std::vector<uint8_t> draw(int steps, float anim) const {
    ViewOptions view;
    view.layer = o.layer;
    view.head = o.head;
    view.min_weight = kDefaultMinWeight;
    const int view_w = o.heatmaps ? static_cast<int>(o.width * 0.58f) : o.width;
    FrameSpec spec;
    spec.seq = &seq;
    spec.model = &model;
    spec.view = view;
    spec.anim = anim;
    spec.hud = true;  // no panels here: the counters go on the picture
    spec.presentation = o.presentation;
    spec.step = steps - 1;
    spec.n_steps = steps;
    const float W = static_cast<float>(o.width), H = static_cast<float>(o.height);
    const ComposedFrame fr = compose_frame(spec, offscreen.imgui->fonts(), static_cast<float>(view_w), H);
    const float vh = std::max(1.0f, H - fr.overlay.top - fr.overlay.band);
    const int vw = std::max(1, view_w - static_cast<int>(fr.right));
    const Camera cam = preset_camera(preset, fr.scene, static_cast<float>(vw) / vh);
    offscreen.target.bind();
    glClearColor(fr.scene.palette.background.r, fr.scene.palette.background.g, fr.scene.palette.background.b, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
    offscreen.renderer->draw(fr.scene, cam, 0, static_cast<int>(fr.overlay.band), vw, static_cast<int>(vh));
    offscreen.imgui->draw([&](ImDrawList* dl, const OverlayFonts& fonts) {
      draw_frame_text(dl, fr, spec, cam, ImVec2(0, fr.overlay.top), ImVec2(static_cast<float>(vw), vh), fonts);
      if (o.heatmaps) draw_heatmap_panel(dl, fonts, history, view.layer, view.head, static_cast<float>(view_w), W, H);
    });
    gl::check_errors("render");
    return offscreen.target.read_rgba();
  }
};

// Runs the generation step by step: each step's PNG into --frames and its
// animation into the video; the last step to --out. Returns the steps run.
int write_generation(const GenerationFrames& frames, Generator& gen, SequenceState& seq,
                     std::vector<RecordPtr>& history, VideoPipe* video) {
  const RenderOptions& o = frames.o;
  int steps = 0;
  for (int i = 0; i < o.steps; ++i) {
    RecordPtr r = gen.step();
    if (!r) break;
    append_record(seq, r);
    if (o.heatmaps) history.push_back(r);
    ++steps;
    if (video) {
      for (int k = 0; k < kVideoFramesPerStep; ++k)
        video->write(frames.draw(steps, static_cast<float>(k) / static_cast<float>(kVideoFramesPerStep - 1)));
      std::fprintf(stderr, "\rkvscope: video: step %d of %d, %d frames", steps, o.steps, video->frames());
      std::fflush(stderr);
    }
    if (!o.frames_dir.empty()) {
      char name[32];
      std::snprintf(name, sizeof(name), "step_%04d.png", r->index);
      write_png((std::filesystem::path(o.frames_dir) / name).string(), o.width, o.height, frames.draw(steps, 1.0f));
    }
  }
  if (video) {
    for (int k = 0; k < kVideoFps; ++k) video->write(frames.draw(steps, 1.0f));  // hold the last step for a second
    std::fprintf(stderr, "\rkvscope: video: %d frames, encoding\xE2\x80\xA6\n", video->frames());
    video->finish();
    std::fprintf(stderr, "kvscope: wrote %s (%d frames, %d fps)\n", o.video.c_str(), video->frames(), kVideoFps);
  }
  if (!o.out.empty()) write_png(o.out, o.width, o.height, frames.draw(steps, 1.0f));
  return steps;
}

// Plain generation: the window's picture, per step, to PNGs and/or an MP4.
int render_generation(const RenderOptions& o, std::shared_ptr<const Model> model, CameraPreset preset,
                      const std::string& ffmpeg) {
  Generator gen(model);
  GenerateOptions go;
  go.max_new = std::max(1, o.steps);
  go.mode = o.no_cache ? CacheMode::kNoCache : CacheMode::kKV;
  go.kv = o.kv;
  gen.start(o.prompt, go);

  OffscreenGl offscreen(o.width, o.height, render_text_scale(o),
                        /*window_samples=*/false);
  SequenceState seq;
  std::vector<RecordPtr> history;
  const GenerationFrames frames{o, preset, *model, seq, history, offscreen};
  std::unique_ptr<VideoPipe> video;
  if (!o.video.empty()) video = std::make_unique<VideoPipe>(ffmpeg, o.video, o.width, o.height, kVideoFps);
  const int steps = write_generation(frames, gen, seq, history, video.get());
  if (offscreen.report_messages()) throw Error("OpenGL reported errors while rendering (above)");
  std::fprintf(stderr, "kvscope: rendered %d step%s (%d positions) with %s\n", steps, steps == 1 ? "" : "s",
               seq.seq_len(), offscreen.ctx.description().c_str());
  return 0;
}

}  // namespace

int run_render(const RenderOptions& o) {
  CameraPreset preset;
  const std::string ffmpeg = check_render_options(o, preset);
  std::shared_ptr<const Model> model = load_cli_model(o.model_dir, o.ctx);
  check_view(*model, o.layer, o.head);
  if (!o.bench) check_context_fits(*model, o.prompt, std::max(1, o.steps), "--steps");
  if (o.bench) return run_bench(o, model, preset);
  if (!is_sampling(o.strategy)) return run_render_decode(o, model, preset);
  return render_generation(o, model, preset, ffmpeg);
}

}  // namespace kvscope
