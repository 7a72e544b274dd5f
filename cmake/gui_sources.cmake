# The window's source lists, read by cmake/gui.cmake and, in builds without the
# window, by the check that every source belongs to a list.
# The GL renderer (render/: one file issues the draw calls).
set(KVSCOPE_GL_SRC
  render/gl_context.cpp
  render/gl_objects.cpp
  render/renderer.cpp
  render/overlay_boxes.cpp
  render/overlay_fonts.cpp
  render/overlay_tags.cpp
  render/renderer_overlay.cpp)
# The window (app/): frame loop, panels, the headless `kvscope render`.
set(KVSCOPE_GUI_SRC
  app/frame.cpp
  app/gui.cpp
  app/gui_input.cpp
  app/gui_layout.cpp
  app/gui_render.cpp
  app/gui_soak.cpp
  app/gui_window.cpp
  app/panel_cache.cpp
  app/panel_cost.cpp
  app/panel_decode.cpp
  app/panel_heatmaps.cpp
  app/panel_hover.cpp
  app/panel_kv.cpp
  app/panel_qkv.cpp
  app/panel_sampling.cpp
  app/panel_timeline.cpp
  app/panel_training.cpp
  app/panels.cpp
  app/png_file.cpp
  app/presentation_hud.cpp
  app/video_pipe.cpp)
