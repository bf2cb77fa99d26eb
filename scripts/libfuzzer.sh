#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/libfuzzer, clang, separate from the g++
# build). ctest calls it when the build was configured with -DSNAPFLOW_LIBFUZZER_TESTS=ON
# (scripts/test.sh does):
#
#   scripts/libfuzzer.sh build BUILD_DIR
#   scripts/libfuzzer.sh run BUILD_DIR TARGET SECONDS     (TARGET: wire_decode, job_file, ...)
#
# `run` fuzzes tests/fuzz/corpus/TARGET for at most SECONDS (and a bounded number of runs);
# new inputs go to BUILD_DIR/corpus/TARGET, never into the repository, and a crash leaves its
# input in BUILD_DIR/artifacts/ and fails. Without clang both exit 77 (ctest: skipped) unless
# SNAPFLOW_REQUIRE_LIBFUZZER=1, when a missing clang is a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  echo "usage: $0 build BUILD_DIR | run BUILD_DIR TARGET SECONDS" >&2
  exit 2
}

find_clang() {
  for c in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$c" >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

no_clang() {
  echo "libfuzzer: no clang++ found: run scripts/setup.sh (it installs clang-14 and" \
       "libclang-rt-14-dev)" >&2
  if [[ ${SNAPFLOW_REQUIRE_LIBFUZZER:-0} == 1 ]]; then exit 1; fi
  exit 77
}

(($# >= 2)) || usage
mode=$1
build_dir=$2

case "$mode" in
  build)
    clang=$(find_clang) || no_clang
    launcher=()
    if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
    cmake -S "$root/tests/fuzz/libfuzzer" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_COMPILER="$clang" "${launcher[@]}" >"$build_dir.configure.log" 2>&1 || {
      cat "$build_dir.configure.log" >&2
      exit 1
    }
    # Two jobs at most: the machine is shared.
    cmake --build "$build_dir" --parallel 2
    ;;
  run)
    (($# == 4)) || usage
    target=$3
    seconds=$4
    find_clang >/dev/null || no_clang
    binary="$build_dir/bin/fuzz_${target}_libfuzzer"
    seeds="$root/tests/fuzz/corpus/$target"
    [[ -x $binary ]] || { echo "libfuzzer: $binary is missing: run '$0 build $build_dir'" >&2; exit 1; }
    [[ -d $seeds ]] || { echo "libfuzzer: no corpus folder $seeds" >&2; exit 1; }
    work="$build_dir/corpus/$target"
    artifacts="$build_dir/artifacts/"
    mkdir -p "$work" "$artifacts"
    # The first folder receives what libFuzzer finds; the committed corpus is only read.
    # -runs bounds the work on a fast machine, -max_total_time the time on a slow one.
    "$binary" -max_total_time="$seconds" -runs=5000000 -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts" "$work" "$seeds"
    ;;
  *)
    usage
    ;;
esac
