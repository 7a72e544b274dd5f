# The headless libraries' source lists, relative to the source root, one list
# per library and folder (docs/architecture.md). Read by CMakeLists.txt (the
# libraries) and tests/fuzz/CMakeLists.txt (the same code built with
# libFuzzer), so a new file is added once and both builds get it.

# model/: the engine (Eigen + std + JSON + utf8proc + PCRE2), by concern.
set(KVSCOPE_MODEL_SRC
  model/core/file_io.cpp
  model/core/json_quote.cpp
  model/core/numeric.cpp
  model/core/thread_pool.cpp
  model/core/units.cpp
  model/tokenizer/tokenizer.cpp
  model/tokenizer/tokenizer_json.cpp
  model/tokenizer/tokenizer_rules.cpp
  model/chat/jinja_value.cpp
  model/chat/jinja_lex.cpp
  model/chat/jinja_parse.cpp
  model/chat/jinja_eval.cpp
  model/chat/jinja_ops.cpp
  model/chat/jinja_filters.cpp
  model/chat/jinja_text.cpp
  model/chat/chat_template.cpp
  model/chat/conversation.cpp
  model/arch/config.cpp
  model/arch/hf_cache.cpp
  model/arch/model.cpp
  model/arch/tensor_checks.cpp
  model/arch/weight_matrix.cpp
  model/arch/safetensors.cpp
  model/arch/gguf.cpp
  model/arch/gguf_config.cpp
  model/arch/gguf_model.cpp
  model/arch/gguf_tokenizer.cpp
  model/arch/gguf_types.cpp
  model/arch/gguf_quantize.cpp
  model/arch/gguf_write.cpp
  model/arch/gguf_export.cpp
  model/arch/gguf_export_tokenizer.cpp
  model/arch/gguf_value.cpp
  model/arch/gguf_weights.cpp
  model/engine/engine.cpp
  model/engine/kernels.cpp
  model/engine/kernel_peaks.cpp
  model/engine/kernels_attend.cpp
  model/engine/linear.cpp
  model/engine/linear_bf16.cpp
  model/engine/linear_kernels.cpp
  model/engine/linear_quant.cpp
  model/engine/linear_quant_avx2.cpp
  model/engine/linear_simd128.cpp
  model/models/gpt2.cpp
  model/models/llama.cpp
  model/kv/kv_cache.cpp
  model/kv/kv_layout.cpp
  model/kv/kv_layout_json.cpp
  model/kv/kv_evict.cpp
  model/kv/kv_snapkv.cpp
  model/kv/kv_quant.cpp
  model/decoding/beam_generator.cpp
  model/decoding/beam_search.cpp
  model/decoding/generator.cpp
  model/decoding/kv_eval.cpp
  model/decoding/needle.cpp
  model/decoding/sampler.cpp
  model/decoding/sampler_json.cpp
  model/decoding/speculative_accept.cpp
  model/decoding/speculative_generator.cpp
  model/decoding/step_record.cpp
  model/decoding/strategy.cpp
  model/serving/block_pool.cpp
  model/serving/requests.cpp
  model/serving/scheduler.cpp
  model/serving/server.cpp
  model/serving/trace.cpp)

# render/scene/: the scene builder, pure, no GL.
set(KVSCOPE_SCENE_SRC
  render/scene/label_layout.cpp
  render/scene/scene.cpp
  render/scene/scene_beams.cpp
  render/scene/scene_camera.cpp
  render/scene/scene_chat.cpp
  render/scene/scene_format.cpp
  render/scene/scene_kv.cpp
  render/scene/scene_lod.cpp
  render/scene/scene_palette.cpp
  render/scene/scene_sequence.cpp
  render/scene/scene_serve.cpp
  render/scene/scene_serve_layout.cpp
  render/scene/scene_serve_request.cpp
  render/scene/scene_spec.cpp)

# app/platform/assets: data files found relative to the executable.
set(KVSCOPE_ASSETS_SRC app/platform/assets.cpp)

# app/lessons/: the teaching logic, headless (no GL, no ImGui).
set(KVSCOPE_LESSONS_SRC
  app/lessons/decode.cpp
  app/lessons/eviction.cpp
  app/lessons/kv_memory.cpp
  app/lessons/phases.cpp
  app/lessons/qkv.cpp
  app/lessons/sampling.cpp
  app/lessons/serve_presets.cpp
  app/lessons/training.cpp)

# app/cli/: the command line.
set(KVSCOPE_CLI_SRC
  app/cli/cli.cpp
  app/cli/cli_bench.cpp
  app/cli/cli_bench_kernels.cpp
  app/cli/cli_bench_serve.cpp
  app/cli/cli_bench_quant.cpp
  app/cli/cli_decode.cpp
  app/cli/cli_eval.cpp
  app/cli/cli_kv.cpp
  app/cli/cli_needle.cpp
  app/cli/cli_flags.cpp
  app/cli/cli_generate.cpp
  app/cli/cli_gguf.cpp
  app/cli/cli_inspect.cpp
  app/cli/cli_chat.cpp
  app/cli/cli_quantize.cpp
  app/cli/cli_out.cpp
  app/cli/cli_serve.cpp
  app/cli/line_stream.cpp
  app/cli/record_json.cpp)

# app/worker/: the window's engine threads (no GL).
set(KVSCOPE_WORKER_SRC app/worker/worker.cpp app/worker/kv_scoring.cpp app/worker/serve_runner.cpp app/worker/chat_runner.cpp)

# app/session/'s data: the settings file, the fitting of restored values, the
# timeline, the branches and saved views. GL-free and thread-free: part of the
# session library, and fuzzed as the readers of the files the window saves.
set(KVSCOPE_SESSION_DATA_SRC
  app/session/branches.cpp
  app/session/fitting.cpp
  app/session/history.cpp
  app/session/choices.cpp
  app/session/saved_view.cpp
  app/session/settings.cpp)

# app/session/: the window's controller (state, worker, event intake, typed commands, demo).
set(KVSCOPE_SESSION_SRC app/session/session.cpp app/session/session_serving.cpp app/session/session_chat.cpp app/session/session_start.cpp app/session/demo_script.cpp app/session/json_commands.cpp ${KVSCOPE_SESSION_DATA_SRC})

# `kvscope watch` (desktop only: the page cannot open ZMQ sockets): the KV
# events, prefix cache and metrics models (model/watch/, headless) and the
# ZMQ / HTTP transport (app/watch/). app/cli/cli_watch.cpp joins kvscope_cli
# in the desktop build only (CMakeLists.txt).
# The headless half is also fuzzed (tests/fuzz: the `watch` target).
set(KVSCOPE_WATCH_MODEL_SRC
  model/watch/kv_events.cpp
  model/watch/metrics.cpp
  model/watch/prefix_cache.cpp
  model/watch/sequence.cpp)
set(KVSCOPE_WATCH_SRC ${KVSCOPE_WATCH_MODEL_SRC}
  app/watch/http_get.cpp
  app/watch/kv_subscriber.cpp)
set(KVSCOPE_WATCH_CLI_SRC app/cli/cli_watch.cpp app/cli/cli_watch_llama.cpp)
