#!/usr/bin/env bash
# The default model's held-out targets on the C++ engine's greedy output
# (tools/train/heldout_engine.py, the rules in tools/train/heldout_checks.py):
# at least 80 % of the hand-written prompts that introduce a never-seen name
# use it again, and more than half of the hand-written code headers continue
# with a body that parses with Python's ast and reads the header's parameters.
# Usage: cli_default_model_heldout.sh KVSCOPE SRC
set -euo pipefail
/usr/bin/python3 "$2/tools/train/heldout_engine.py" "$1" --model "$2/assets/models/kvscope-tiny" --require names,code
