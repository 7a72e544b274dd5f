# cmake -DOUT=header.h -DFILES="a.vert;a.frag" [-DGLSL=es300] -P embed_shaders.cmake
# Writes every shader into a C++ header as a NUL-terminated char array, so the
# binary runs from any directory. Names: shaders/blocks.vert -> kShaderBlocksVert.
# shaders/ hold one body per shader, without a #version line: the target's
# header goes in front here (desktop: GLSL 3.30 core; the browser, -DGLSL=es300:
# GLSL ES 3.00 with its required default precisions). kGlslVersion is the line
# for ImGui's backend.
if(GLSL STREQUAL "es300")
  set(version "#version 300 es")
  set(prefix "${version}\nprecision highp float;\nprecision highp int;\n")
else()
  set(version "#version 330 core")
  set(prefix "${version}\n")
endif()
string(HEX "${prefix}" prefix_hex)
set(body "// Generated from shaders/ by cmake/embed_shaders.cmake. Do not edit.\n#pragma once\n\nnamespace kvscope::shaders {\n")
string(APPEND body "inline constexpr const char kGlslVersion[] = \"${version}\";\n")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  string(REGEX REPLACE "[^A-Za-z0-9]+" ";" parts "${name}")
  set(ident "kShader")
  foreach(p ${parts})
    string(SUBSTRING "${p}" 0 1 first)
    string(TOUPPER "${first}" first)
    string(SUBSTRING "${p}" 1 -1 rest)
    string(APPEND ident "${first}${rest}")
  endforeach()
  file(READ ${f} hex HEX)
  set(hex "${prefix_hex}${hex}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "inline constexpr unsigned char ${ident}[] = {${bytes}0x00};\n")
endforeach()
string(APPEND body "}  // namespace kvscope::shaders\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
