#include "app/platform/png_file.h"

#include <stb_image_write.h>

#include "model/core/error.h"
#include "model/core/file_io.h"

namespace kvscope {

void write_png_file(const std::string& path, int w, int h, const uint8_t* rgba, int stride) {
  std::string png;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, w, h, 4, rgba, stride) || png.empty())
    throw Error(path + ": cannot encode the PNG (" + std::to_string(w) + "x" + std::to_string(h) + ")");
  try {
    write_file_atomic(path, png);
  } catch (const Error& e) {
    throw Error(std::string("PNG not written: ") + e.what());
  }
}

bool write_screenshot_png(const std::string& path, int w, int h, const uint8_t* rgba, std::string& error) {
  try {
    write_png_file(path, w, h, rgba, w * 4);
  } catch (const Error& e) {
    error = std::string("screenshot not saved: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace kvscope
