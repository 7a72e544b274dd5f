#!/usr/bin/env bash
# The default model's held-out targets on the C++ engine's greedy output:
# names never seen in training are reused, code prompts continue as Python
# that parses and reads the header's parameters (tools/train/heldout_engine.py).
# Usage: cli_default_model_v2.sh KVSCOPE SRC
set -euo pipefail
/usr/bin/python3 "$2/tools/train/heldout_engine.py" "$1"
