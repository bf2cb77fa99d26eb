#!/usr/bin/env bash
# Sets up, builds (Release) and runs the main job on a local multi-process cluster:
# a coordinator and two workers on loopback, the exactly-once example job, live progress.
# Extra arguments go to `snapflow local` (e.g. --workers 3 --job examples/other.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSNAPFLOW_BUILD_TESTS=OFF \
  -DSNAPFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build build --parallel "$(nproc)" --target snapflow snapflow-coordinator snapflow-worker
exec build/bin/snapflow local --job examples/exactly-once-sum.toml "$@"
