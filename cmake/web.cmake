# The browser build: the same libraries and app, compiled by Emscripten
# (Debian's emscripten 3.1.6) to WebAssembly + WebGL2. Included by the top
# CMakeLists.txt when configured through `emcmake cmake` (make web).
#   Differences from the desktop live in app/platform/web/ only: the window and
#   the frame loop (emscripten_set_main_loop), <GLES3/gl3.h> in place of glad
#   (app/platform/web/include/glad/gl.h), files, downloads and the JS API.
#   Third-party code: ImGui 1.86, utf8proc, PCRE2 from Debian's source packages
#   (scripts/install-web-deps.sh unpacks them into KVSCOPE_WEB_SRC); Eigen,
#   GLM, nlohmann_json, CLI11 and stb are Debian's headers.
set(KVSCOPE_WEB_SRC ${CMAKE_SOURCE_DIR}/build-web/src CACHE PATH "apt-get source folder")
# Web Workers started before main: the engine worker, the engine pool (at most
# 6 threads in the page, main_web.cpp) and the layout scorer.
set(KVSCOPE_WEB_POOL 8)
set(IMGUI_SRC ${KVSCOPE_WEB_SRC}/imgui-1.86+ds)
set(UTF8PROC_SRC ${KVSCOPE_WEB_SRC}/utf8proc-2.8.0)
set(PCRE2_SRC ${KVSCOPE_WEB_SRC}/pcre2-10.42)
foreach(d ${IMGUI_SRC} ${UTF8PROC_SRC} ${PCRE2_SRC})
  if(NOT IS_DIRECTORY ${d})
    message(FATAL_ERROR "${d} is missing: run scripts/install-web-deps.sh ${KVSCOPE_WEB_SRC} (or make web)")
  endif()
endforeach()
set(ENV{NODE_PATH} /usr/share/nodejs)

# Threads as on the desktop: every object compiled with -pthread (wasm-ld
# refuses to mix), SIMD128 for the engine's hot loops.
add_compile_options(-pthread -msimd128)
add_link_options(-pthread)

# --- third party (static, from source) ---------------------------------------
add_library(web_imgui STATIC ${IMGUI_SRC}/imgui.cpp ${IMGUI_SRC}/imgui_draw.cpp ${IMGUI_SRC}/imgui_tables.cpp
            ${IMGUI_SRC}/imgui_widgets.cpp ${IMGUI_SRC}/backends/imgui_impl_glfw.cpp
            ${IMGUI_SRC}/backends/imgui_impl_opengl3.cpp ${IMGUI_SRC}/misc/cpp/imgui_stdlib.cpp)
target_include_directories(web_imgui SYSTEM PUBLIC ${IMGUI_SRC} ${IMGUI_SRC}/backends)
target_compile_definitions(web_imgui PUBLIC IMGUI_IMPL_OPENGL_ES3)
target_link_options(web_imgui INTERFACE -sUSE_GLFW=3 -sMIN_WEBGL_VERSION=2 -sMAX_WEBGL_VERSION=2)

add_library(web_utf8proc STATIC ${UTF8PROC_SRC}/utf8proc.c)
target_include_directories(web_utf8proc SYSTEM PUBLIC ${UTF8PROC_SRC})
target_compile_definitions(web_utf8proc PUBLIC UTF8PROC_STATIC)

# PCRE2 8-bit, UTF + UCP, no JIT (the tokenizer falls back to the interpreter).
set(PCRE2_GEN ${CMAKE_BINARY_DIR}/pcre2-gen)
configure_file(${PCRE2_SRC}/src/config.h.generic ${PCRE2_GEN}/config.h COPYONLY)
configure_file(${PCRE2_SRC}/src/pcre2.h.generic ${PCRE2_GEN}/pcre2.h COPYONLY)
configure_file(${PCRE2_SRC}/src/pcre2_chartables.c.dist ${PCRE2_GEN}/pcre2_chartables.c COPYONLY)
set(PCRE2_NAMES auto_possess compile config context convert dfa_match error extuni find_bracket jit_compile
    maketables match match_data newline ord2utf pattern_info script_run serialize string_utils study substitute
    substring tables ucd valid_utf xclass)
list(TRANSFORM PCRE2_NAMES REPLACE "(.+)" "${PCRE2_SRC}/src/pcre2_\\1.c" OUTPUT_VARIABLE PCRE2_SRCS)
add_library(web_pcre2 STATIC ${PCRE2_SRCS} ${PCRE2_GEN}/pcre2_chartables.c)
target_include_directories(web_pcre2 SYSTEM PUBLIC ${PCRE2_GEN} PRIVATE ${PCRE2_SRC}/src)
target_compile_definitions(web_pcre2 PUBLIC PCRE2_CODE_UNIT_WIDTH=8 PCRE2_STATIC
                           PRIVATE HAVE_CONFIG_H SUPPORT_UNICODE HAVE_MEMMOVE HAVE_STDINT_H HAVE_INTTYPES_H HAVE_STRERROR)

# Debian's header-only libraries through links (not -I/usr/include: glibc's
# headers would shadow Emscripten's libc).
set(WEB_HDR ${CMAKE_BINARY_DIR}/hdr)
file(MAKE_DIRECTORY ${WEB_HDR})
foreach(d eigen3/Eigen eigen3/unsupported glm nlohmann CLI stb)
  get_filename_component(n ${d} NAME)
  file(CREATE_LINK /usr/include/${d} ${WEB_HDR}/${n} SYMBOLIC)
endforeach()
# The two headers the desktop finds through pkg-config's include folders.
file(CREATE_LINK /usr/include/stb/stb_image_write.h ${WEB_HDR}/stb_image_write.h SYMBOLIC)
file(CREATE_LINK ${IMGUI_SRC}/misc/cpp/imgui_stdlib.h ${WEB_HDR}/imgui_stdlib.h SYMBOLIC)

# --- kvscope: the same source lists as the desktop ------------------------------
include(cmake/sources.cmake)
include(cmake/gui_sources.cmake)
# Desktop-only files (EGL headless render, `kvscope render`, the ffmpeg pipe,
# the GLFW 3.3 window) are replaced by app/platform/web/.
set(WEB_DESKTOP_ONLY render/gl/gl_context.cpp app/gui/render_subcommand.cpp app/platform/video_pipe.cpp
    app/platform/window.cpp)
set(WEB_APP_SRC ${KVSCOPE_GL_SRC} ${KVSCOPE_GUI_SRC})
list(REMOVE_ITEM WEB_APP_SRC ${WEB_DESKTOP_ONLY})
set(KVSCOPE_SHADERS shaders/rays.vert shaders/rays.frag shaders/blocks.vert shaders/blocks.frag shaders/grid.vert
    shaders/grid.frag)
list(TRANSFORM KVSCOPE_SHADERS PREPEND ${CMAKE_SOURCE_DIR}/)
set(KVSCOPE_SHADER_HEADER ${CMAKE_BINARY_DIR}/generated/kvscope_shaders.h)
add_custom_command(
  OUTPUT ${KVSCOPE_SHADER_HEADER}
  COMMAND ${CMAKE_COMMAND} -DOUT=${KVSCOPE_SHADER_HEADER} "-DFILES=${KVSCOPE_SHADERS}" -DGLSL=es300 -P
          ${CMAKE_SOURCE_DIR}/cmake/embed_shaders.cmake
  DEPENDS ${KVSCOPE_SHADERS} ${CMAKE_SOURCE_DIR}/cmake/embed_shaders.cmake
  COMMENT "Embedding shaders (GLSL ES 3.00)"
  VERBATIM)

# The engine and the CLI, compiled once for the page and for kvscope-node.js
# (the same CLI under node: the engine's WebAssembly speed without a page).
add_library(web_engine OBJECT ${KVSCOPE_MODEL_SRC} ${KVSCOPE_ASSETS_SRC} ${KVSCOPE_CLI_SRC})
target_include_directories(web_engine PRIVATE ${CMAKE_SOURCE_DIR} ${WEB_HDR})
target_compile_definitions(web_engine PRIVATE EIGEN_NO_DEBUG)
target_compile_options(web_engine PRIVATE -fexceptions -Wall -Wextra -Werror -Wno-pthreads-mem-growth)
target_link_libraries(web_engine PRIVATE web_utf8proc web_pcre2)

add_executable(kvscope ${KVSCOPE_SCENE_SRC} ${KVSCOPE_LESSONS_SRC}
  ${KVSCOPE_WORKER_SRC} ${KVSCOPE_SESSION_SRC} ${WEB_APP_SRC}
  ${KVSCOPE_WEB_PLATFORM_SRC} $<TARGET_OBJECTS:web_engine>
  ${KVSCOPE_SHADER_HEADER})
set_target_properties(kvscope PROPERTIES SUFFIX ".js")
# Only the engine's hot loops need -O3; the UI, scene and lessons compile at -O1
# (about a third faster to build on a 2-core CI machine; frame time unaffected
# within measurement, docs/web.md).
set_source_files_properties(${KVSCOPE_SCENE_SRC} ${KVSCOPE_LESSONS_SRC} ${KVSCOPE_SESSION_SRC} ${KVSCOPE_CLI_SRC}
                            app/main.cpp ${WEB_APP_SRC} ${KVSCOPE_WEB_PLATFORM_SRC} PROPERTIES COMPILE_OPTIONS -O1)
# The page keeps no window placement (the desktop's fields in window.h).
set_property(SOURCE app/platform/web/window_web.cpp APPEND PROPERTY COMPILE_OPTIONS -Wno-unused-private-field)
set_property(SOURCE app/platform/web/stb_image_write.cpp APPEND PROPERTY COMPILE_OPTIONS -w)
target_include_directories(kvscope PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/app/platform/web/include
                           ${CMAKE_BINARY_DIR}/generated ${WEB_HDR})
target_compile_definitions(kvscope PRIVATE EIGEN_NO_DEBUG KVSCOPE_GUI=1 KVSCOPE_FONT_DIR="/fonts")
# The app catches exceptions (bad model files, JSON): JS-based exceptions.
target_compile_options(kvscope PRIVATE -fexceptions -Wall -Wextra -Werror -Wno-pthreads-mem-growth)
target_link_libraries(kvscope PRIVATE web_imgui web_utf8proc web_pcre2)
set(WEB_ASSETS ${CMAKE_SOURCE_DIR}/assets)
target_link_options(kvscope PRIVATE -fexceptions -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB
  -sINITIAL_MEMORY=128MB -sDEFAULT_PTHREAD_STACK_SIZE=4MB
  -sPTHREAD_POOL_SIZE=${KVSCOPE_WEB_POOL} -sFORCE_FILESYSTEM=1 -lidbfs.js
  -sEXPORTED_RUNTIME_METHODS=FS,ccall,cwrap,UTF8ToString
  "-sEXPORTED_FUNCTIONS=_main,_kvscope_state_json,_kvscope_command_json,_kvscope_load_folder,_kvscope_report_error,_kvscope_training_progress,_kvscope_training_fetched,_kvscope_save_settings,_kvscope_tap,_kvscope_touch_seen,_kvscope_cli,_malloc,_free"
  -Wno-pthreads-mem-growth
  "--preload-file=${WEB_ASSETS}/kv_configs.json@/assets/kv_configs.json"
  "--preload-file=${WEB_ASSETS}/models/kvscope-tiny@/assets/models/kvscope-tiny"
  "--preload-file=${WEB_ASSETS}/models/kvscope-draft@/assets/models/kvscope-draft"
  "--preload-file=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf@/fonts/DejaVuSans.ttf"
  "--preload-file=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf@/fonts/DejaVuSans-Bold.ttf")
file(GLOB_RECURSE WEB_ASSET_FILES ${WEB_ASSETS}/models/kvscope-tiny/* ${WEB_ASSETS}/models/kvscope-draft/*)
set_property(TARGET kvscope APPEND PROPERTY LINK_DEPENDS ${WEB_ASSET_FILES})

# --- the site: build-web/site/ holds everything a static host serves ----------
set(WEB_SITE ${CMAKE_BINARY_DIR}/site)
add_custom_command(TARGET kvscope POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E make_directory ${WEB_SITE}
  COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE_DIR:kvscope>/kvscope.js
          $<TARGET_FILE_DIR:kvscope>/kvscope.wasm $<TARGET_FILE_DIR:kvscope>/kvscope.worker.js
          $<TARGET_FILE_DIR:kvscope>/kvscope.data ${WEB_SITE}/
  COMMAND ${CMAKE_COMMAND} -E copy_if_different
          ${CMAKE_SOURCE_DIR}/tools/web/node_modules/coi-serviceworker/coi-serviceworker.min.js
          ${WEB_SITE}/coi-serviceworker.js
  COMMENT "Assembling the site in ${WEB_SITE}")
# The page's own files follow their sources without a relink of the app.
set(WEB_PAGE_FILES index.html kvscope-page.js kvscope-hub.js kvscope-training.js)
list(TRANSFORM WEB_PAGE_FILES PREPEND ${WEB_SITE}/ OUTPUT_VARIABLE WEB_PAGE_OUT)
list(TRANSFORM WEB_PAGE_FILES PREPEND ${CMAKE_SOURCE_DIR}/app/platform/web/ OUTPUT_VARIABLE WEB_PAGE_SRC)
add_custom_command(OUTPUT ${WEB_PAGE_OUT}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${WEB_SITE}
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${WEB_PAGE_SRC} ${WEB_SITE}/
  DEPENDS ${WEB_PAGE_SRC}
  COMMENT "Copying the page into ${WEB_SITE}")
add_custom_target(web_page ALL DEPENDS ${WEB_PAGE_OUT})

# kvscope-node.js: the CLI (generate, bench, ...) under node with the real file
# system, `node --no-experimental-fetch build-web/kvscope-node.js generate ...`:
# the WebAssembly engine timed without a page around it (docs/web.md). Not
# part of `make web`: `cmake --build build-web --target kvscope-node`.
add_executable(kvscope-node EXCLUDE_FROM_ALL app/main.cpp $<TARGET_OBJECTS:web_engine>)
set_target_properties(kvscope-node PROPERTIES SUFFIX ".js")
target_include_directories(kvscope-node PRIVATE ${CMAKE_SOURCE_DIR} ${WEB_HDR})
target_compile_options(kvscope-node PRIVATE -fexceptions -Wall -Wextra -Werror -Wno-pthreads-mem-growth)
target_link_libraries(kvscope-node PRIVATE web_utf8proc web_pcre2)
target_link_options(kvscope-node PRIVATE -fexceptions -sNODERAWFS=1 -sENVIRONMENT=node,worker -sEXIT_RUNTIME=1
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sINITIAL_MEMORY=128MB -sDEFAULT_PTHREAD_STACK_SIZE=4MB
  -sPTHREAD_POOL_SIZE=${KVSCOPE_WEB_POOL} -Wno-pthreads-mem-growth
  "--pre-js=${CMAKE_SOURCE_DIR}/app/platform/web/node_env.js")

# The page's products and attention against double-precision loops, under node
# (tests/web/linear_check.cpp, attend_check.cpp; tests/web/web_test.mjs runs it). Linked at -O1:
# its objects are the page's own, already optimised.
add_executable(kvscope_linear_check tests/web/linear_check.cpp tests/web/attend_check.cpp $<TARGET_OBJECTS:web_engine>)
set_target_properties(kvscope_linear_check PROPERTIES SUFFIX ".js")
target_include_directories(kvscope_linear_check PRIVATE ${CMAKE_SOURCE_DIR} ${WEB_HDR})
target_compile_options(kvscope_linear_check PRIVATE -Wall -Wextra -Werror -Wno-pthreads-mem-growth)
target_link_libraries(kvscope_linear_check PRIVATE web_utf8proc web_pcre2)
target_link_options(kvscope_linear_check PRIVATE -O1 -fexceptions -sENVIRONMENT=node,worker -sEXIT_RUNTIME=1
  -sALLOW_MEMORY_GROWTH=1 -Wno-pthreads-mem-growth)

# The default model's training checkpoints (16 MB; the Training tab) as plain
# files beside the app, not in kvscope.data: the page fetches them after its
# first token (app/platform/web/kvscope-training.js) from the list in
# training-files.json (training.json last: written once its checkpoints are).
set(WEB_TRAINING ${WEB_ASSETS}/models/kvscope-tiny-training)
set(WEB_TRAINING_REL assets/models/kvscope-tiny-training)
file(GLOB_RECURSE WEB_TRAINING_FILES LIST_DIRECTORIES false CONFIGURE_DEPENDS RELATIVE ${WEB_TRAINING}
     ${WEB_TRAINING}/*)
list(SORT WEB_TRAINING_FILES)
list(REMOVE_ITEM WEB_TRAINING_FILES training.json)
set(entries "")
foreach(f ${WEB_TRAINING_FILES} training.json)
  file(SIZE ${WEB_TRAINING}/${f} n)
  list(APPEND entries "{\"path\": \"${f}\", \"size\": ${n}}")
endforeach()
list(JOIN entries ",\n  " entries)
set(WEB_TRAINING_LIST ${CMAKE_BINARY_DIR}/training-files.json)
file(CONFIGURE OUTPUT ${WEB_TRAINING_LIST}
     CONTENT "{\"root\": \"${WEB_TRAINING_REL}\", \"files\": [\n  ${entries}]}\n")
list(TRANSFORM WEB_TRAINING_FILES PREPEND ${WEB_TRAINING}/ OUTPUT_VARIABLE WEB_TRAINING_SRC)
add_custom_command(OUTPUT ${WEB_SITE}/training-files.json
  COMMAND ${CMAKE_COMMAND} -E make_directory ${WEB_SITE}/${WEB_TRAINING_REL}
  COMMAND ${CMAKE_COMMAND} -E copy_directory ${WEB_TRAINING} ${WEB_SITE}/${WEB_TRAINING_REL}
  COMMAND ${CMAKE_COMMAND} -E copy ${WEB_TRAINING_LIST} ${WEB_SITE}/training-files.json
  DEPENDS ${WEB_TRAINING_LIST} ${WEB_TRAINING_SRC} ${WEB_TRAINING}/training.json
  COMMENT "Copying the training checkpoints into ${WEB_SITE}/${WEB_TRAINING_REL}")
add_custom_target(web_training ALL DEPENDS ${WEB_SITE}/training-files.json)
