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

file(GLOB KVSCOPE_GL_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/render/gl*.cpp ${CMAKE_SOURCE_DIR}/render/renderer*.cpp)
file(GLOB KVSCOPE_GUI_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/app/gui*.cpp ${CMAKE_SOURCE_DIR}/app/panel*.cpp)
add_library(kvscope_gui STATIC ${KVSCOPE_GL_SRC} ${KVSCOPE_GUI_SRC})
target_include_directories(kvscope_gui PUBLIC ${CMAKE_SOURCE_DIR}/app ${CMAKE_SOURCE_DIR}/render)
target_link_libraries(kvscope_gui PUBLIC kvscope_scene kvscope_cli kvscope_glad kvscope_imgui
                      glfw OpenGL::GL OpenGL::EGL Threads::Threads)
target_compile_definitions(kvscope_gui PUBLIC KVSCOPE_SHADER_DIR="${CMAKE_SOURCE_DIR}/shaders"
                           KVSCOPE_GUI=1)
kvscope_target(kvscope_gui)

add_executable(kvscope ${CMAKE_SOURCE_DIR}/app/main.cpp)
target_link_libraries(kvscope PRIVATE kvscope_gui)
kvscope_target(kvscope)
