#!/usr/bin/env bash
# The default model's code target on the C++ engine's greedy output: more than
# half of the hand-written code headers continue with a body that parses with
# Python's ast and reads the header's parameters (tools/train/heldout_engine.py,
# the rules in tools/train/heldout_checks.py). The names target waits in
# tools/train/cpp_tests/ until a model meets it.
# Usage: cli_default_model_code.sh KVSCOPE SRC
set -euo pipefail
/usr/bin/python3 "$2/tools/train/heldout_engine.py" "$1" --model "$2/assets/models/kvscope-tiny" --require code
