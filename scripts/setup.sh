#!/usr/bin/env bash
# Installs the Debian packages snapflow builds and tests with. Idempotent: apt-get runs only
# when a package is missing, so a second run is quiet and takes well under a second.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libasio-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  catch2 libcli11-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev
  # the rocksdb keyed state backend
  librocksdb-dev
  # the allocator of the worker, coordinator and program executables (SNAPFLOW_JEMALLOC)
  libjemalloc-dev
  # bench/run-comparison and bench/hop-report (and the hop-report test)
  python3
  # headless Chromium for the web page test (tests/cmd/web_page_browser_test.cpp)
  chromium chromium-driver
  # libFuzzer: clang and its runtime (libclang_rt.fuzzer) for the fuzz targets in ctest
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq >/dev/null
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
