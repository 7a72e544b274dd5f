# The window's source lists, read by cmake/gui.cmake and, in builds without the
# window, by the check that every source belongs to a list.
# render/gl/ (one file issues the draw calls) and render/overlay/ (text over the view).
set(KVSCOPE_GL_SRC
  render/gl/gl_context.cpp
  render/gl/gl_objects.cpp
  render/gl/renderer.cpp
  render/overlay/overlay.cpp
  render/overlay/overlay_boxes.cpp
  render/overlay/overlay_fonts.cpp
  render/overlay/overlay_tags.cpp)
# app/gui/ (frame loop, input, layout, the headless `kvscope render`),
# app/gui/panels/ (one file per panel) and the desktop's app/platform/.
set(KVSCOPE_GUI_SRC
  app/gui/frame.cpp
  app/gui/gui.cpp
  app/gui/input.cpp
  app/gui/layout.cpp
  app/gui/render_subcommand.cpp
  app/gui/soak.cpp
  app/gui/panels/cache.cpp
  app/gui/panels/chat.cpp
  app/gui/panels/cost.cpp
  app/gui/panels/decode.cpp
  app/gui/panels/heatmaps.cpp
  app/gui/panels/hover.cpp
  app/gui/panels/kv.cpp
  app/gui/panels/panels.cpp
  app/gui/panels/presentation_hud.cpp
  app/gui/panels/qkv.cpp
  app/gui/panels/sampling.cpp
  app/gui/panels/serving.cpp
  app/gui/panels/table_or_lines.cpp
  app/gui/panels/timeline.cpp
  app/gui/panels/training.cpp
  app/platform/png_file.cpp
  app/platform/video_pipe.cpp
  app/platform/window.cpp)
# The browser's app/platform/web/ (cmake/web.cmake builds them in place of the
# desktop's window.cpp, video_pipe.cpp, the EGL context and `kvscope render`).
set(KVSCOPE_WEB_PLATFORM_SRC
  app/platform/web/main_web.cpp
  app/platform/web/stb_image_write.cpp
  app/platform/web/web_api.cpp
  app/platform/web/window_web.cpp)
