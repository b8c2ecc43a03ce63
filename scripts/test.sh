#!/usr/bin/env bash
# Every test hkc has on a machine without a GPU: a normal build and its ctest, then the
# same tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang), with the
# libFuzzer targets built and each run briefly from its corpus.
# Environment: HK_FUZZ_SECONDS (default 20) per fuzz target; HK_SKIP_SANITIZE=1 skips
# the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${HK_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build + tests (clang, with libFuzzer targets)"
  CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHK_SANITIZE=ON -DHK_FUZZ=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ctest --test-dir build-asan --output-on-failure -j"$jobs" # sanitizer options: tests/CMakeLists.txt
  secs=${HK_FUZZ_SECONDS:-20}
  for fuzzer in build-asan/tests/fuzz_*; do
    [ -x "$fuzzer" ] || continue
    case "$fuzzer" in *_replay) continue ;; esac
    name=$(basename "$fuzzer"); corpus=tests/fuzz/corpus/${name#fuzz_}
    work=$(mktemp -d); cp -r "$corpus"/. "$work"/
    echo "== fuzzing $name for ${secs}s"
    "$fuzzer" -max_total_time="$secs" -print_final_stats=0 "$work" 2>&1 | tail -n 3
    rm -rf "$work"
  done
fi
echo "all tests passed"
