#include "app/cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "app/cli/cli_chat.h"
#include "app/cli/cli_commands.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_out.h"
#include "app/cli/cli_watch.h"
#include "app/platform/assets.h"
#include "app/session/text_scale.h"
#include "model/arch/hf_cache.h"
#include "model/arch/model.h"
#include "model/arch/model_context.h"
#include "model/core/error.h"
#include "model/core/thread_pool.h"
#include "model/core/units.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

#ifndef KVSCOPE_WATCH
// The browser's build (and the fuzz build) has no ZMQ or sockets: `watch`
// is there only to say so.
void add_watch_command(CLI::App& app, WatchCommand& c) {
  c.cmd = app.add_subcommand("watch", "Attach to a running vLLM / SGLang / llama-server (desktop only)");
  c.cmd->allow_extras();
}
int run_watch_command(const WatchCommand&) {
  throw Error("watch is desktop-only: this kvscope was built without it (a browser cannot open ZMQ sockets)");
}
#endif

namespace {

// Bare `kvscope`: the window's flags on the app itself.
void add_window_flags(CLI::App& app, GuiOptions& gui) {
  app.add_option("--model", gui.model_dir,
                 "Model folder: GPT-2 (config.json, model.safetensors, vocab.json, merges.txt) or Llama/Mistral/Qwen2 "
                 "(config.json, model.safetensors or shards, tokenizer.json); or a GGUF file (gpt2, llama, qwen2)")
      ->check(non_empty("a model folder"));
  app.add_option("--prompt", gui.prompt, "Prompt to start with, UTF-8 (default: the first preset)")
      ->check(non_empty("some text to continue"));
  app.add_flag("--no-cache", gui.no_cache, "Start in NO CACHE mode");
  app.add_option("--max-new", gui.max_new, "New tokens per generation")->check(in_range(setting::kMaxNew));
  app.add_option("--ctx", gui.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  app.add_option("--demo-frames", gui.demo_frames, "Run a scripted demo for N frames, then exit (smoke tests)")
      ->check(int_in(0, 1 << 24));
  app.add_option("--screenshot", gui.screenshot, "With --demo-frames or --soak-rounds: save the last frame to this PNG")
      ->check(non_empty("a PNG file name"));
  app.add_option("--soak-rounds", gui.soak_rounds,
                 "Generate to the full context, switch the cache mode and reset, N times; report resident memory "
                 "and GL objects, exit 1 on growth (scripts/soak.sh)")
      ->check(int_in(0, 1 << 20));
}

int run_window(const GuiOptions& gui, const AppHooks& hooks) {
  // The screenshot is taken when a scripted run ends (the demo's frames run
  // out, or the soak's rounds): without one the window would run until
  // closed and never write it.
  if (!gui.screenshot.empty() && gui.demo_frames <= 0 && gui.soak_rounds <= 0)
    throw UsageError(
        "--screenshot needs --demo-frames N or --soak-rounds N with N >= 1 (the last frame of that run is saved)");
  if (!gui.prompt.empty()) require_utf8(gui.prompt, "--prompt");
  if (gui.ctx > 0) check_window_context(gui.model_dir, gui.ctx);
  if (!hooks.gui) throw Error("this kvscope was built without the GUI (KVSCOPE_GUI=OFF); use a subcommand, see --help");
  return hooks.gui(gui);
}

// `eval`: a text's loss under a cache layout (scored in cli_eval.cpp).
struct EvalCommand {
  CLI::App* cmd = nullptr;
  EvalArgs args;  // args.kv: the --kv-* flags
};

void add_eval_command(CLI::App& app, EvalCommand& c) {
  c.cmd = app.add_subcommand(
      "eval", "Score a UTF-8 text: NLL/token, perplexity, bits/byte (vs dense f32 for other KV layouts)");
  c.cmd->add_option("--file", c.args.file, "UTF-8 text to score (documents separated by <|endoftext|>)")
      ->required()
      ->check(non_empty("a text file"));
  c.cmd
      ->add_option("--model", c.args.model,
                   "Model folder (GPT-2 or Llama/Mistral/Qwen2) or GGUF file (default: the embedded model)")
      ->check(non_empty("a model folder"));
  c.cmd->add_flag("--json", c.args.json, "Print JSON");
  add_kv_flags(c.cmd, c.args.kv);
  NeedleArgs& n = c.args.needle;
  auto* on = c.cmd->add_flag(
      "--needle", n.on, "Needle in a haystack (--file): whether each eviction rule keeps a fact, per depth and budget");
  c.cmd->add_option("--needle-depths", n.depths, "Where the needle sits in the haystack, 0 (first) .. 1 (last)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0))
      ->needs(on);
  c.cmd->add_option("--budgets", n.budgets, "Positions each layer keeps, each rule")
      ->capture_default_str()
      ->delimiter(',')
      ->check(int_in(1, 1 << 20))
      ->needs(on);
  c.cmd->add_option("--needle-tokens", n.tokens, "The prompt's length at most, in tokens")
      ->capture_default_str()
      ->check(int_in(4, 1 << 20))
      ->needs(on);
  c.cmd->add_option("--needle-text", n.needle, "The fact, placed between haystack sentences")
      ->capture_default_str()
      ->needs(on);
  c.cmd->add_option("--needle-question", n.question, "Ends the prompt")->capture_default_str()->needs(on);
  c.cmd->add_option("--needle-answer", n.answer, "What continues the question, as the needle spells it")
      ->capture_default_str()
      ->needs(on);
}

// `render`: the window's scene drawn offscreen (by the hook, which has GL).
struct RenderCommand {
  CLI::App* cmd = nullptr;
  RenderOptions opts;
  std::string layer = "mean", head = "mean";  // opts.kv: the --kv-* flags
  StrategyFlags strategy;                     // --beams, --length-penalty, --draft, --speculate
  float temperature = 0;
  CLI::Option* temperature_opt = nullptr;
  CLI::Option* camera_opt = nullptr;
};

// The render flags that pick what is drawn: the beams' layer and head, the
// presentation HUD, the heatmaps, beam search or speculative decoding.
void add_render_view_flags(CLI::App* render, RenderCommand& c) {
  RenderOptions& ro = c.opts;
  c.camera_opt = render->add_option("--camera", ro.camera, "front|top|side|follow (default front; top with --beams)")
                     ->check(CLI::IsMember({"front", "top", "side", "follow"}));
  render->add_flag("--no-cache", ro.no_cache, "NO CACHE mode");
  render->add_option("--layer", c.layer, "Layer whose attention the beams show (0..layers-1), or mean");
  render->add_option("--head", c.head, "Head whose attention the beams show (0..heads-1), or mean");
  render->add_flag("--bench", ro.bench, "Report frame times at full context with every beam (no PNG)");
  render->add_option("--video", ro.video, "Write an MP4 of the generation (pipes frames to ffmpeg)")
      ->check(non_empty("an MP4 file name"))
      ->check(not_an_option());
  render->add_flag("--presentation", ro.presentation, "Presentation mode: compact HUD");
  render->add_flag("--heatmaps", ro.heatmaps, "Draw the attention heatmap grid (one per layer and head)");
  add_kv_flags(render, c.opts.kv);
  add_strategy_flags(render, c.strategy, "Draw");
  c.temperature_opt = render->add_option("--temperature", c.temperature, "With --draft: sample at this temperature")
                          ->check(in_range(setting::kTemperature));
}

void add_render_command(CLI::App& app, RenderCommand& c) {
  RenderOptions& ro = c.opts;
  auto* render = c.cmd = app.add_subcommand("render", "Render the 3D view to PNG without a window");
  render->add_option("--model", ro.model_dir, "Model folder (GPT-2, Llama, Mistral, Qwen2) or GGUF file")
      ->check(non_empty("a model folder"));
  render->add_option("--prompt", ro.prompt, "Prompt (UTF-8 text)")
      ->required()
      ->check(non_empty("some text to continue"));
  render->add_option("--steps", ro.steps, "Forwards to run (the prefill is the first)")->check(int_in(1, 1 << 20));
  render->add_option("--ctx", ro.ctx, kCtxHelp)->check(in_range(setting::kCtx));
  render->add_option("--out", ro.out, "PNG of the last step")->check(non_empty("a PNG file name"));
  render->add_option("--frames", ro.frames_dir, "Write one PNG per step into this folder")
      ->check(non_empty("a folder"));
  render->add_option("--width", ro.width, "Image width (also at most what the OpenGL driver allows)")
      ->check(int_in(64, 8192));
  render->add_option("--height", ro.height, "Image height (also at most what the OpenGL driver allows)")
      ->check(int_in(64, 8192));
  render
      ->add_option("--text-scale", ro.text_scale,
                   "Text size as the window's text scale sets it (0.75-2.5; a projector: 2.5), times height/720 "
                   "above 720")
      ->check(real_in(kMinTextScale, kMaxTextScale));
  add_render_view_flags(render, c);
}

// --layer / --head: an index, or "mean" (-1).
int parse_index(const std::string& flag, const std::string& v) {
  if (v == "mean") return -1;
  try {
    size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size() && x >= 0) return x;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + ": \"" + v + "\" is not a layer/head index or \"mean\"");
}

// --bench times the sampling view's frames at full context on a dense cache (idle, then
// while NO CACHE forwards run): a flag that would choose or save something else is refused.
void refuse_unused_by_bench(const CLI::App& render) {
  const std::vector<std::string> unused = {
      "--steps",    "--out",   "--frames",         "--video", "--text-scale", "--presentation", "--heatmaps",
      "--no-cache", "--beams", "--length-penalty", "--draft", "--speculate",  "--temperature"};
  for (const CLI::Option* o : render.get_options()) {
    const std::string name = o->get_name();
    const bool kv = name.rfind("--kv-", 0) == 0;
    if (o->count() && (kv || std::find(unused.begin(), unused.end(), name) != unused.end()))
      throw UsageError(name +
                       ": not used with --bench (it times the sampling view's frames at full context on a "
                       "dense cache, idle and while NO CACHE forwards run)");
  }
}

int run_render_command(RenderCommand& c, const AppHooks& hooks) {
  RenderOptions& ro = c.opts;
  if (ro.bench) refuse_unused_by_bench(*c.cmd);
  if (!ro.bench && ro.out.empty() && ro.frames_dir.empty() && ro.video.empty()) {
    throw UsageError("render: give --out FILE.png, --frames DIR and/or --video FILE.mp4 (or --bench)");
  }
  if (ro.prompt.empty()) throw UsageError("--prompt is empty (expected some text to continue)");
  ro.strategy = strategy_from_flags(c.strategy);
  if (c.temperature_opt->count()) {
    if (!is_speculative(ro.strategy))
      throw UsageError("--temperature needs --draft DIR (render samples only the draft's iterations)");
    ro.sampler.greedy = false;
    ro.sampler.temperature = c.temperature;
  }
  ro.layer = parse_index("--layer", c.layer);
  ro.head = parse_index("--head", c.head);
  check_kv_flags(*c.cmd, ro.kv);
  // As the window: the beams' lanes lie side by side in depth, seen from above.
  if (is_beam(ro.strategy) && c.camera_opt->count() == 0) ro.camera = "top";
  refuse_no_cache_evict(ro.no_cache, ro.kv);
  if (!is_sampling(ro.strategy) && ro.no_cache)
    throw UsageError(std::string("--no-cache: not available with ") + (is_beam(ro.strategy) ? "--beams" : "--draft") +
                     " (" + strategy_name(ro.strategy) + " always runs on the KV cache)");
  if (const auto refused = strategy_refusal(ro.strategy, ro.kv)) throw UsageError(refused->usage);
  if (!hooks.render) throw Error("this kvscope was built without the renderer (KVSCOPE_GUI=OFF)");
  return hooks.render(ro);
}

// Every subcommand's flags, bound in one place that outlives the parse.
struct Commands {
  GuiOptions gui;
  GenerateCommand generate;
  TokenizeCommand tokenize;
  InspectCommand inspect;
  BenchCommand bench;
  EvalCommand eval;
  RenderCommand render;
  ServeCommand serve;
  ChatTemplateCommand chat_template;
  ChatCommand chat;
  QuantizeCommand quantize;
  WatchCommand watch;
};

int run_parsed(Commands& c, const AppHooks& hooks) {
  // Checked here, once, as a flag would be: the pools read it later, where a
  // bad value could only be passed over.
  if (const std::string p = ThreadPool::threads_env_problem(); !p.empty()) throw UsageError(p);
  if (*c.eval.cmd) {
    check_kv_flags(*c.eval.cmd, c.eval.args.kv);
    if (c.eval.args.needle.on) return cmd_needle(c.eval.args, default_model_dir());
    return cmd_eval(c.eval.args, default_model_dir());
  }
  if (*c.generate.cmd) return run_generate_command(c.generate);
  if (*c.tokenize.cmd) return run_tokenize_command(c.tokenize);
  if (*c.inspect.cmd) return run_inspect_command(c.inspect);
  if (*c.bench.cmd) return run_bench_command(c.bench, hooks.read_bandwidth);
  if (*c.render.cmd) return run_render_command(c.render, hooks);
  if (*c.serve.cmd) return run_serve_command(c.serve);
  if (*c.chat_template.cmd) return run_chat_template_command(c.chat_template);
  if (*c.chat.cmd) return run_chat_command(c.chat);
  if (*c.quantize.cmd) return run_quantize_command(c.quantize);
  if (*c.watch.cmd) return run_watch_command(c.watch);
  return run_window(c.gui, hooks);
}

// One line on stderr, whatever the message quotes (a flag's bytes, a file's
// name): invalid UTF-8 and control characters escaped.
void print_error(const std::string& what, const char* after = "") {
  std::fprintf(stderr, "kvscope: error: %s%s\n", terminal_safe(what).c_str(), after);
}

// Runs and maps the errors to exit codes: 2 for usage, 1 for runtime.
int run_reporting_errors(Commands& c, const AppHooks& hooks) {
  try {
    const int rc = run_parsed(c, hooks);
    check_stdout();  // what the command wrote without out_line (the window's and render's lines)
    return rc;
  } catch (const UsageError& e) {
    print_error(e.what());
    return 2;
  } catch (const Error& e) {
    print_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvscope: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

// CLI11 prints help and the version to std::cout; a failed write is exit 1
// like any other.
int checked_exit(CLI::App& app, const CLI::Error& e) {
  const int rc = app.exit(e);
  try {
    check_stdout();
  } catch (const Error& err) {
    print_error(err.what());
    return 1;
  }
  return rc;
}

}  // namespace

std::string default_model_dir() {
  if (const char* env = std::getenv("KVSCOPE_MODEL"); env && *env) return env;
  return asset_path("models/kvscope-tiny");
}

std::shared_ptr<const Model> load_cli_model(const std::string& dir, int ctx, bool bf16_products) {
  LoadControl control;
  control.context = ctx;
  control.bf16_products = bf16_products;
  return load_model(dir.empty() ? default_model_dir() : dir, control);
}

void check_window_context(const std::string& dir, int ctx) {
  const std::string d = resolve_model_dir(dir.empty() ? default_model_dir() : dir);
  Config c = load_model_config(d);
  apply_context(c, ctx, d);
}

void check_context_fits(const Model& m, const std::string& prompt, int max_new, const char* flag) {
  const Config& c = m.config;
  const long long need = static_cast<long long>(m.tokenizer.encode_prompt(prompt).size()) + max_new - 1;
  if (need <= c.n_positions || c.n_positions >= c.max_position_embeddings) return;
  const long long fit = std::min<long long>(need, c.max_position_embeddings);
  const std::string kv = format_bytes(static_cast<double>(kv_bytes_per_position(c)) * static_cast<double>(fit));
  throw UsageError("the prompt (" + std::to_string(need - max_new + 1) + " tokens) plus " + flag + " " +
                   std::to_string(max_new) + " needs " + std::to_string(need) + " positions, more than the " +
                   std::to_string(c.n_positions) + " kvscope reserves the KV cache for (" + m.name + " allows " +
                   std::to_string(c.max_position_embeddings) + "): pass --ctx " + std::to_string(fit) +
                   " (its f32 KV cache takes " + kv + ") or a smaller " + flag);
}

int run_cli(int argc, char** argv, const AppHooks& hooks) {
  CLI::App app{"kvscope: watch a real GPT-2 write text, token by token, with its KV cache"};
  app.set_version_flag("--version", "kvscope 0.1");
  app.require_subcommand(0, 1);
  Commands c;
  add_window_flags(app, c.gui);
  add_generate_command(app, c.generate);
  add_tokenize_command(app, c.tokenize);
  add_inspect_command(app, c.inspect);
  add_bench_command(app, c.bench);
  add_eval_command(app, c.eval);
  add_render_command(app, c.render);
  add_serve_command(app, c.serve);
  add_chat_template_command(app, c.chat_template);
  add_chat_command(app, c.chat);
  add_quantize_command(app, c.quantize);
  add_watch_command(app, c.watch);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return checked_exit(app, e);
  } catch (const CLI::CallForAllHelp& e) {
    return checked_exit(app, e);
  } catch (const CLI::CallForVersion& e) {
    return checked_exit(app, e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what(), " (run kvscope --help)");
    return 2;
  }
  return run_reporting_errors(c, hooks);
}

}  // namespace kvscope
