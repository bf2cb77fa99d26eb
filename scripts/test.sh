#!/usr/bin/env bash
# Sets up, builds (ASan + UBSan) and runs every test. ctest's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${SNAPFLOW_TEST_BUILD_DIR:-build-asan}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSNAPFLOW_SANITIZE=ON \
  -DSNAPFLOW_BUILD_BENCH=OFF -DSNAPFLOW_LIBFUZZER_TESTS=ON >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# setup.sh installed clang: the libFuzzer tests must not skip for want of it.
export SNAPFLOW_REQUIRE_LIBFUZZER=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build_dir"
status=0
ctest --output-on-failure --timeout 600 -j "$(nproc)" >ctest.log 2>&1 || status=$?
# Passing tests are one line each and drown the failures: show the rest, then the summary last.
grep -v -e "Test *#.*Passed" -e "tests passed, .* tests failed out of" ctest.log || true
summary=$(grep "tests passed, .* tests failed out of" ctest.log || echo "0 tests passed, 1 tests failed out of 1 (ctest did not run)")
echo "$summary"
exit "$status"
