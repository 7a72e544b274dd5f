// The one way kvscope writes a PNG (render --out / --frames, screenshots):
// encoded in memory, then written with write_file_atomic, so a full disk
// leaves the previous file intact and is reported, never a truncated PNG.
#pragma once

#include <cstdint>
#include <string>

namespace kvscope {

// `rgba`: h rows of w RGBA8 pixels, top row first, `stride` bytes apart.
// Throws kvscope::Error naming `path`.
void write_png_file(const std::string& path, int w, int h, const uint8_t* rgba, int stride);

// A screenshot of w x h tightly packed RGBA8 pixels: false with
// "screenshot not saved: <why>" in `error` instead of throwing.
bool write_screenshot_png(const std::string& path, int w, int h, const uint8_t* rgba, std::string& error);

}  // namespace kvscope
