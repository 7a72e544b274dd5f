// The kvscope command line. Subcommands need no display; the GUI and the
// headless renderer are passed in as hooks so this library has no GL.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "model/decoding/sampler.h"
#include "model/decoding/strategy.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

// Bare `kvscope` (no subcommand): the interactive window.
struct GuiOptions {
  std::string model_dir;  // empty = embedded default model
  std::string prompt;     // empty = first preset
  bool no_cache = false;
  int max_new = 0;         // 0 = the app's default
  int ctx = 0;             // --ctx: Llama family, positions to reserve the KV cache for (0 = the default)
  int demo_frames = 0;     // > 0: run this many frames scripted (play, toggle cache, cameras), then exit
  std::string screenshot;  // with demo_frames: save the last frame here (PNG)
  int soak_rounds =
      0;  // > 0: generate to the full context, switch the cache mode, reset, N times; check memory + GL objects, exit
};

// `kvscope render`: the same scene drawn offscreen to PNG.
struct RenderOptions {
  std::string model_dir;
  std::string prompt;
  int ctx = 0;             // --ctx: Llama family, positions to reserve the KV cache for (0 = the default)
  int steps = 8;           // forwards to run (the prefill is step 0)
  std::string out;         // PNG of the last step
  std::string frames_dir;  // one PNG per step when set
  int width = 1280, height = 720;
  float text_scale = 1.0f;       // --text-scale: as the window's View panel sets it; grows with height above 720
  std::string camera = "front";  // front|top|side|follow
  bool no_cache = false;
  int layer = -1;             // -1 = mean over layers
  int head = -1;              // -1 = mean over heads
  bool bench = false;         // report frame times at full context, all beams (no PNG needed)
  std::string video;          // MP4 of the whole generation, frames piped to ffmpeg (needs ffmpeg)
  bool presentation = false;  // presentation mode: compact HUD instead of the legend
  bool heatmaps = false;      // the (layer, head) attention heatmap grid over the view
  Strategy strategy;          // beam search drawn as a tree, or speculative decoding's iterations
  SamplerSettings sampler;    // for --draft: greedy unless --temperature is given
  KVLayout kv;                // cache layout (--kv-window/--kv-sinks/--kv-dtype/--kv-block)
};

struct AppHooks {
  std::function<int(const GuiOptions&)> gui;        // null when built without the GUI
  std::function<int(const RenderOptions&)> render;  // null when built without the GUI
  // `bench`'s memory read bandwidth (GB/s with n threads); null: the real
  // probe (5 passes over 256 MiB). The fuzzer substitutes a cheap one.
  std::function<double(int)> read_bandwidth;
};

// Parses argv and runs. Exit codes: 0 ok, 1 runtime error, 2 usage error.
int run_cli(int argc, char** argv, const AppHooks& hooks);

// Default model folder: $KVSCOPE_MODEL, else the one embedded at build time.
std::string default_model_dir();

struct Model;
// A subcommand's model: `dir` (empty = the default) at --ctx positions (0 = the default context).
// bf16_products: LoadControl::bf16_products (--bf16-products).
std::shared_ptr<const Model> load_cli_model(const std::string& dir, int ctx, bool bf16_products = false);
// A prompt plus --max-new new tokens needs prompt + max_new - 1 positions
// (the last token is never run). Where that exceeds the context kvscope
// reserved while the model allows more, throws UsageError naming --ctx, the
// value that fits and the KV memory it reserves. (Up to the model's own
// limit, generation stops at "context full" as before.)
// (`flag` names the new-token count: render's is --steps.)
void check_context_fits(const Model& m, const std::string& prompt, int max_new, const char* flag = "--max-new");
// The window's --ctx against `dir`'s config.json (empty = the default model),
// before the window opens: throws UsageError naming --ctx as load_model would.
void check_window_context(const std::string& dir, int ctx);

}  // namespace kvscope
