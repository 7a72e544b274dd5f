#!/usr/bin/env bash
# Retakes the window screenshots of README and docs/: the scripted window run
# (--demo-frames) with each KVSCOPE_DEMO_VIEW under Xvfb, by default at
# 1366x768 and text scale 1.0 (KVSCOPE_DEMO_SIZE / KVSCOPE_DEMO_TEXT_SCALE;
# 1280x720 and 2.5 show what a projector shows). Open every PNG and look
# before committing.
#   usage: scripts/screenshots.sh KVSCOPE [OUT=docs] [SIZE=1366x768] [SCALE=1.0] [VIEW...]
# KVSCOPE_DEMO_CAMERA=front|top|side|follow in the environment ends every
# shot on that camera preset (one run per preset shows them all), e.g.
#   KVSCOPE_DEMO_CAMERA=top scripts/screenshots.sh build/kvscope /tmp/top 1280x720 2.5 -
# Needs xvfb-run (apt-get install -y xvfb xauth); with ImageMagick's convert
# the PNGs are stored with 256 colours (about a quarter of the bytes).
set -euo pipefail
bin=${1:?path to the kvscope binary}
out=${2:-docs}
size=${3:-1366x768}
scale=${4:-1.0}
shift $(($# < 4 ? $# : 4))
mkdir -p "$out"

# view, file, max new tokens
shots=(
  "-            screenshot.png          24"
  "timeline     timeline.png            24"
  "sampling     sampling.png            24"
  "phases       phases.png              24"
  "kv           kv_calculator.png       24"
  "pages        kv_shared_pages.png     24"
  "heatmaps     heatmaps.png            24"
  "training     training.png            24"
  "presentation presentation.png        24"
  "qkv          qkv.png                 24"
  "beams        window_beams.png        12"
  "speculative  window_speculative.png  24"
  "serving-prefix window_serving.png    24"
  "chat         window_chat.png         24"
)
for s in "${shots[@]}"; do
  read -r view file max_new <<<"$s"
  [ "$view" = - ] && view=
  if [ $# -gt 0 ] && [[ " $* " != *" ${view:--} "* ]]; then continue; fi
  KVSCOPE_DEMO_VIEW=$view KVSCOPE_DEMO_SIZE=$size KVSCOPE_DEMO_TEXT_SCALE=$scale \
    xvfb-run -a -s "-screen 0 ${size}x24" "$bin" --demo-frames 200 --max-new "$max_new" --screenshot "$out/$file" \
    >"$out/$file.log" 2>&1 || { echo "FAILED $out/$file: $(tail -1 "$out/$file.log")"; continue; }
  rm -f "$out/$file.log"
  if command -v convert >/dev/null; then
    convert "$out/$file" +dither -colors 256 -define png:compression-level=9 "$out/$file.tmp.png" &&
      mv "$out/$file.tmp.png" "$out/$file"
  fi
  echo "$out/$file"
done
