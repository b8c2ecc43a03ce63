#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every test hkc has on a machine without a GPU: a normal build and its ctest, then the
# same tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang), with the
# libFuzzer targets built and each run briefly from its corpus.
#
# The sanitizer pass skips the tests labeled `toolchain` (tests/CMakeLists.txt: the kernel
# matrices, whose time is spent inside nvrtc/hiprtc or the host C compiler and in code they
# built, which ASan does not instrument) and
# `python` (the importers' end-to-end tests, whose time is spent in python); they ran in the
# release pass, and it says so. Both passes share one compile cache and one cache of
# NumPy reference outputs (build/test-cache), so the sanitizer pass re-checks hkc's own code
# without paying again for the vendor compilers and the float64 references. Tests that must
# compile cold (gpu_targets, repro) set their own cache directories.
#
# Between the two, a short ThreadSanitizer pass checks libhkrt's threads contract.
#
# Environment: HK_FUZZ_SECONDS (default 12) per fuzz target; HK_SKIP_SANITIZE=1 skips
# the sanitizer pass; HK_TEST_JOBS (default: cores + 1) parallel ctest jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# the model tests' packages (torch, onnx: ~1 minute of apt) install while the build compiles
mkdir -p build
bash scripts/deps.sh models > build/deps-models.log 2>&1 &
models_pid=$!
jobs=$(nproc)
test_jobs=${HK_TEST_JOBS:-$((jobs + 1))}
cache=$PWD/build/test-cache
mkdir -p "$cache"
export HKC_CACHE_DIR=$cache/kernels HK_REF_CACHE=$cache/reference
start=$(date +%s)
elapsed() { echo "($(($(date +%s) - start)) s so far)"; }

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
if ! wait "$models_pid"; then
  echo "warning: the model tests' packages (python3-torch, python3-onnx) did not install; the tests that need them skip:"
  tail -n 5 build/deps-models.log
fi
ctest --test-dir build --output-on-failure -j"$test_jobs"
elapsed

# libhkrt's threads contract under ThreadSanitizer: only the loader's sources and the one
# test program (tests/concurrency/sessions_mt.c), compiled directly (a few seconds), on a
# host pack the release hkc builds; any report fails (halt_on_error, exit status 66).
echo "== ThreadSanitizer: libhkrt sessions on many threads (clang -fsanitize=thread)"
mkdir -p build-tsan
clang -std=gnu11 -fsanitize=thread -g -O1 -D_GNU_SOURCE -DHK_BUILDING_LIBRARY -Iloader/include -Iloader/src \
  loader/src/*.c tests/concurrency/sessions_mt.c $(pkg-config --cflags --libs libsodium libcjson) -lzstd -ldl -lpthread -lm \
  -o build-tsan/sessions_mt
TSAN_OPTIONS="halt_on_error=1 exitcode=66" HKC=build/hkc HK_SOURCE_DIR=$PWD HK_SESSIONS_MT=build-tsan/sessions_mt \
  bash tests/integration/concurrency.sh
elapsed

if [ "${HK_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan + UBSan build + tests (clang, with libFuzzer targets)"
  CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHK_SANITIZE=ON -DHK_FUZZ=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  skipped=$(ctest --test-dir build-asan -N -L 'toolchain|python' | sed -n 's/^ *Test *#[0-9]*: //p' | tr '\n' ' ')
  echo "note: not run under ASan (their time is in nvrtc/hiprtc or in python; they ran in the release pass above): $skipped"
  ctest --test-dir build-asan --output-on-failure -j"$test_jobs" -LE 'toolchain|python' # sanitizer options: tests/CMakeLists.txt
  elapsed
  secs=${HK_FUZZ_SECONDS:-12}
  pids=()
  for fuzzer in build-asan/tests/fuzz_*; do
    [ -x "$fuzzer" ] || continue
    case "$fuzzer" in *_replay) continue ;; esac
    name=$(basename "$fuzzer"); corpus=tests/fuzz/corpus/${name#fuzz_}
    work=$(mktemp -d); cp -r "$corpus"/. "$work"/
    echo "== fuzzing $name for ${secs}s"
    # the fuzzers run side by side; each one's log is printed when all are done
    ( "$fuzzer" -max_total_time="$secs" -print_final_stats=0 "$work" >"$work.log" 2>&1; rc=$?
      echo "-- $name (exit $rc)"; tail -n 3 "$work.log"; rm -rf "$work" "$work.log"; exit $rc ) &
    pids+=($!)
  done
  fuzz_failed=0
  for pid in "${pids[@]}"; do wait "$pid" || fuzz_failed=1; done
  [ $fuzz_failed -eq 0 ] || { echo "a fuzzer found a crash"; exit 1; }
  elapsed
fi
echo "all tests passed"
