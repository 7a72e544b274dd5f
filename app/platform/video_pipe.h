// `kvscope render --video`: frames piped into ffmpeg, written safely.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kvscope {

// The path of the executable `name` on $PATH, or "" when it is not there.
std::string find_on_path(const std::string& name);

// Raw RGBA frames piped into ffmpeg, which encodes an H.264 MP4 into a
// temporary file next to `out`; renamed over `out` only when ffmpeg exits 0
// (as write_file_atomic does for the PNGs), so a failed encode (a full disk)
// leaves no half-written video and any previous one intact. ffmpeg's own
// messages (-loglevel error) go to our stderr.
class VideoPipe {
 public:
  VideoPipe(const std::string& ffmpeg, const std::string& out, int w, int h, int fps);
  ~VideoPipe();
  VideoPipe(const VideoPipe&) = delete;
  VideoPipe& operator=(const VideoPipe&) = delete;
  // One w x h frame; throws when ffmpeg stopped reading.
  void write(const std::vector<uint8_t>& rgba);
  // Waits for ffmpeg; throws when it failed, else puts the video in place.
  void finish();
  int frames() const { return frames_; }

 private:
  static std::string temp_path(const std::string& out);
  std::string out_, tmp_;
  FILE* pipe_ = nullptr;
  int w_, h_;
  int frames_ = 0;
};

}  // namespace kvscope
