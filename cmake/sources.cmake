# The headless libraries' source lists, relative to the source root. Read by
# CMakeLists.txt (the libraries) and tests/fuzz/CMakeLists.txt (the same code
# built with libFuzzer), so a new file is added once and both builds get it.

# model/: the engine (Eigen + std + JSON + utf8proc).
set(KVSCOPE_MODEL_SRC
  model/beam_generator.cpp
  model/beam_search.cpp
  model/config.cpp
  model/engine.cpp
  model/engine_llama.cpp
  model/file_io.cpp
  model/generator.cpp
  model/kernels.cpp
  model/kernels_attend.cpp
  model/kv_cache.cpp
  model/kv_eval.cpp
  model/kv_quant.cpp
  model/llama_ops.cpp
  model/llama_loader.cpp
  model/model.cpp
  model/safetensors.cpp
  model/sampler.cpp
  model/spec_decoder.cpp
  model/speculative.cpp
  model/thread_pool.cpp
  model/tokenizer.cpp
  model/tokenizer_json.cpp
  model/tokenizer_rules.cpp
  model/units.cpp)

# render/ scene builder: pure, no GL.
set(KVSCOPE_SCENE_SRC
  render/label_layout.cpp
  render/scene.cpp
  render/scene_beams.cpp
  render/scene_camera.cpp
  render/scene_format.cpp
  render/scene_kv.cpp
  render/scene_lod.cpp
  render/scene_palette.cpp
  render/scene_sequence.cpp
  render/scene_spec.cpp)

# Data files found relative to the executable.
set(KVSCOPE_ASSETS_SRC app/assets.cpp)

# The teaching logic: headless (no GL, no ImGui).
set(KVSCOPE_TEACH_SRC
  app/teach/teach_branch.cpp
  app/teach/teach_decode.cpp
  app/teach/teach_history.cpp
  app/teach/teach_kv.cpp
  app/teach/teach_phases.cpp
  app/teach/teach_qkv.cpp
  app/teach/teach_sampling.cpp
  app/teach/teach_training.cpp
  app/teach/teach_view.cpp)

# The command line.
set(KVSCOPE_CLI_SRC
  app/cli.cpp
  app/cli_bench.cpp
  app/cli_decode.cpp
  app/cli_eval.cpp
  app/cli_flags.cpp
  app/cli_generate.cpp
  app/cli_inspect.cpp)

# The window's engine threads (no GL).
set(KVSCOPE_WORKER_SRC app/gui_worker.cpp app/kv_scoring.cpp)

# The readers of the files the window saves (settings) and the check of every
# restored value: GL-free, part of the session library and fuzzed.
set(KVSCOPE_SETTINGS_SRC app/gui_settings.cpp app/ui_fit.cpp)

# The window's controller: snapshot, worker, event intake, typed commands, demo.
set(KVSCOPE_SESSION_SRC app/session.cpp app/demo_script.cpp ${KVSCOPE_SETTINGS_SRC})
