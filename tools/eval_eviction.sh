#!/bin/bash
# The eval table of docs/eviction.md (run from the repository root after building): dense, window, window + 4 sinks, TOVA, H2O at budgets 32 and 64.
set -e
K=${K:-build/kvscope}
for slice in stories facts code; do
  f=assets/models/kvscope-tiny/val/$slice.txt
  echo "dense $slice $($K eval --file $f --json)"
  for n in 32 64; do
    echo "window$n $slice $($K eval --file $f --json --kv-window $n)"
    echo "window$((n-4))+4sinks $slice $($K eval --file $f --json --kv-window $((n-4)) --kv-sinks 4)"
    echo "tova$n $slice $($K eval --file $f --json --kv-evict tova --kv-budget $n)"
    echo "h2o$n $slice $($K eval --file $f --json --kv-evict h2o --kv-budget $n)"
  done
done
