# The desktop app: glad generated into the build tree, GLFW, ImGui (Debian's
# static libimgui with its GLFW + OpenGL3 backends), GLM, stb for PNG.
find_package(glfw3 3.3 REQUIRED)
find_package(OpenGL REQUIRED COMPONENTS OpenGL EGL)
pkg_check_modules(IMGUI REQUIRED imgui)

set(GLAD_DIR ${CMAKE_BINARY_DIR}/glad)
add_custom_command(
  OUTPUT ${GLAD_DIR}/src/gl.c ${GLAD_DIR}/src/egl.c ${GLAD_DIR}/include/glad/gl.h ${GLAD_DIR}/include/glad/egl.h
  COMMAND /usr/bin/glad --quiet --api gl:core=3.3,egl=1.5 --out-path ${GLAD_DIR} --reproducible c
  COMMENT "Generating the OpenGL 3.3 core + EGL loader with glad"
  VERBATIM)
add_library(kvscope_glad STATIC ${GLAD_DIR}/src/gl.c ${GLAD_DIR}/src/egl.c)
target_include_directories(kvscope_glad PUBLIC ${GLAD_DIR}/include)
target_link_libraries(kvscope_glad PUBLIC ${CMAKE_DL_LIBS})

add_library(kvscope_imgui INTERFACE)
target_include_directories(kvscope_imgui INTERFACE ${IMGUI_INCLUDE_DIRS} /usr/include/imgui/backends)
target_link_libraries(kvscope_imgui INTERFACE ${IMGUI_LINK_LIBRARIES} glfw OpenGL::GL)

# Shaders live in shaders/ but are embedded into the binary at build time.
set(KVSCOPE_SHADERS
  ${CMAKE_SOURCE_DIR}/shaders/rays.vert ${CMAKE_SOURCE_DIR}/shaders/rays.frag
  ${CMAKE_SOURCE_DIR}/shaders/blocks.vert ${CMAKE_SOURCE_DIR}/shaders/blocks.frag
  ${CMAKE_SOURCE_DIR}/shaders/grid.vert ${CMAKE_SOURCE_DIR}/shaders/grid.frag)
set(KVSCOPE_SHADER_HEADER ${CMAKE_BINARY_DIR}/generated/kvscope_shaders.h)
add_custom_command(
  OUTPUT ${KVSCOPE_SHADER_HEADER}
  COMMAND ${CMAKE_COMMAND} -DOUT=${KVSCOPE_SHADER_HEADER} "-DFILES=${KVSCOPE_SHADERS}"
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_shaders.cmake
  DEPENDS ${KVSCOPE_SHADERS} ${CMAKE_SOURCE_DIR}/cmake/embed_shaders.cmake
  COMMENT "Embedding shaders"
  VERBATIM)

pkg_check_modules(STB REQUIRED stb)

include(${CMAKE_SOURCE_DIR}/cmake/gui_sources.cmake)
add_library(kvscope_gui STATIC ${KVSCOPE_GL_SRC} ${KVSCOPE_GUI_SRC} ${KVSCOPE_SHADER_HEADER})
target_include_directories(kvscope_gui PRIVATE ${CMAKE_BINARY_DIR}/generated ${STB_INCLUDE_DIRS})
target_link_libraries(kvscope_gui PUBLIC kvscope_scene kvscope_lessons kvscope_cli kvscope_session kvscope_glad kvscope_imgui
                      glfw OpenGL::GL OpenGL::EGL Threads::Threads ${CMAKE_DL_LIBS}
                      PRIVATE nlohmann_json::nlohmann_json ${STB_LINK_LIBRARIES})
# The label font (Debian's fonts-dejavu-core); the app falls back to ImGui's
# built-in font when it is missing.
target_compile_definitions(kvscope_gui PUBLIC KVSCOPE_GUI=1
                           PRIVATE KVSCOPE_FONT_DIR="/usr/share/fonts/truetype/dejavu")
kvscope_target(kvscope_gui)

add_executable(kvscope app/main.cpp)
target_link_libraries(kvscope PRIVATE kvscope_gui)
kvscope_target(kvscope)

# Headless render test (real pixels through EGL surfaceless) and the
# window's display-free logic (worker thread, settings): their own gtest
# binary because they need the GL/GUI libraries; tests/gui_render_pixels.sh runs it.
find_package(GTest REQUIRED)
add_executable(kvscope_render_tests tests/render_pixels.cpp tests/render_pixels_labels.cpp tests/gui_units.cpp)
target_include_directories(kvscope_render_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(kvscope_render_tests PRIVATE kvscope_gui GTest::gtest GTest::gtest_main)
target_compile_definitions(kvscope_render_tests PRIVATE KVSCOPE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
kvscope_target(kvscope_render_tests)
