#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The compile cache's shared second level (HKC_CACHE_URL, docs/CLI.md, "the shared compile cache"),
# against a redis-server this test starts on a free port and stops: two builds with separate
# cache directories share compiled kernels (the second compiles nothing: every kernel from the
# shared cache, the same pack bytes); a garbage remote entry is refused with a warning and
# replaced; an unreachable server, one that accepts and never answers, and one stopped while a
# build runs each give one warning and a good build. Skips (77) without redis-server or without
# a GPU toolchain (host code is not cached).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
command -v redis-server > /dev/null || { echo "SKIPPED: redis-server is not installed (scripts/deps.sh)"; exit 77; }
work=$(mktemp -d)
redis_pid=""; py_pid=""
cleanup() {
  [ -z "$redis_pid" ] || kill "$redis_pid" 2> /dev/null || true
  [ -z "$py_pid" ] || kill "$py_pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok   $*"; }

"$HKC" targets --no-probe > "$work/targets.txt"
targets=""
grep -q "^NVIDIA (sm):   unavailable" "$work/targets.txt" || targets=sm_90a
grep -q "^AMD (gfx):     unavailable" "$work/targets.txt" || targets="${targets:+$targets,}gfx90a"
[ -n "$targets" ] || { echo "SKIPPED: no GPU toolchain (only GPU kernels go through the compile cache)"; exit 77; }
echo "targets: $targets"
spec=$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_redis() {
  port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$work/redis.pid" --dir "$work" --logfile "$work/redis.log"
  for _ in $(seq 50); do redis-cli -p "$port" ping 2> /dev/null | grep -q PONG && break; sleep 0.1; done
  redis_pid=$(cat "$work/redis.pid")
}
stop_redis() {
  kill -9 "$redis_pid"
  while kill -0 "$redis_pid" 2> /dev/null; do sleep 0.05; done
  redis_pid=""
}
# build NAME [ENV...]: hkc build of $spec with its own cache directory $work/cache-NAME
build() {
  local name=$1; shift
  env HKC_CACHE_DIR="$work/cache-$name" "$@" "$HKC" build "$spec" --target "$targets" -j 2 -o "$work/$name.hkpack" \
    > "$work/$name.out" 2> "$work/$name.err" || { cat "$work/$name.out" "$work/$name.err"; fail "build $name"; }
}
stats() { grep "^compiled" "$work/$1.out"; }
warnings() { grep -c "shared compile cache" "$work/$1.err" || true; }

# 1. sharing: A compiles and writes back, B (another cache directory) compiles nothing
start_redis
url=redis://127.0.0.1:$port
build a HKC_CACHE_URL=$url
n=$(stats a | sed 's/^compiled \([0-9]*\) .*/\1/')
stats a | grep -q ", 0 from the cache (0 from the shared cache)" || fail "cold build: $(stats a)"
[ "$(redis-cli -p "$port" --scan --pattern 'hkc:cc*' | wc -l)" -eq "$n" ] || fail "the server does not hold $n entries"
build b HKC_CACHE_URL=$url
stats b | grep -q ", $n from the cache ($n from the shared cache)" || fail "second build: $(stats b)"
[ "$(warnings b)" -eq 0 ] || fail "warnings: $(cat "$work/b.err")"
cmp "$work/a.hkpack" "$work/b.hkpack" || fail "the shared-cache build's pack differs"
[ "$(ls "$work/cache-b" | grep -c '\.hkcc$')" -eq "$n" ] || fail "remote hits were not stored locally"
ok "sharing: $(stats b)"

# 2. a garbage entry: refused with a warning, compiled, replaced
key=$(redis-cli -p "$port" --scan --pattern 'hkc:cc*' | head -1)
head -c 300 /dev/urandom | redis-cli -p "$port" -x set "$key" > /dev/null
build c HKC_CACHE_URL=$url
grep -q "entry $key is damaged" "$work/c.err" || fail "no warning for the garbage entry: $(cat "$work/c.err")"
stats c | grep -q ", $((n - 1)) from the cache ($((n - 1)) from the shared cache)" || fail "garbage entry: $(stats c)"
cmp "$work/a.hkpack" "$work/c.hkpack" || fail "pack differs after a garbage entry"
build d HKC_CACHE_URL=$url
stats d | grep -q "($n from the shared cache)" || fail "the garbage entry was not replaced: $(stats d)"
ok "garbage entry refused, compiled and replaced"

# 3. the server stopped while a build runs: emptied first, so that the build compiles (seconds
# at -j 1) and talks to the server between compiles when it is killed
redis-cli -p "$port" flushall > /dev/null
stop_at=0.5
build_bg() { HKC_CACHE_DIR="$work/cache-e" HKC_CACHE_URL=$url "$HKC" build "$spec" --target "$targets" -j 1 \
  -o "$work/e.hkpack" > "$work/e.out" 2> "$work/e.err"; }
build_bg & bpid=$!
sleep $stop_at
stop_redis
wait $bpid || { cat "$work/e.out" "$work/e.err"; fail "build with the server stopped mid-build"; }
[ "$(warnings e)" -eq 1 ] || fail "expected one warning: $(cat "$work/e.err") $(stats e)"
cmp "$work/a.hkpack" "$work/e.hkpack" || fail "pack of the interrupted build differs"
ok "server stopped during a build: $(stats e); $(warnings e) warning(s)"

# 4. unreachable (nothing listens on the port now): one warning, a good build, no slower than cold
start=$(date +%s%N)
build f HKC_CACHE_URL=$url HKC_CACHE_TIMEOUT_MS=200
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(warnings f)" -eq 1 ] || fail "unreachable: expected one warning: $(cat "$work/f.err")"
cmp "$work/a.hkpack" "$work/f.hkpack" || fail "pack differs with the server unreachable"
ok "unreachable: $(grep 'shared compile cache' "$work/f.err" | cut -c1-140) ($ms ms)"

# 5. a server that accepts and never answers: the timeout bounds it, one warning
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(16); open('$work/silent.ready', 'w').close(); time.sleep(120)" & py_pid=$!
# wait until it listens (a loaded machine may take seconds to start python)
for _ in $(seq 200); do [ -e "$work/silent.ready" ] && break; sleep 0.05; done
[ -e "$work/silent.ready" ] || fail "silent server: the listener did not start in 10 s"
start=$(date +%s%N)
build g HKC_CACHE_URL=$url HKC_CACHE_TIMEOUT_MS=300
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(warnings g)" -eq 1 ] && grep -q "no answer within 300 ms" "$work/g.err" || fail "silent server: $(cat "$work/g.err")"
cmp "$work/a.hkpack" "$work/g.hkpack" || fail "pack differs with a silent server"
ok "silent server: one warning, build in $ms ms"

# 6. a bad URL: one warning, a good build
build h HKC_CACHE_URL=http://example
[ "$(warnings h)" -eq 1 ] && grep -q "not a redis:// URL" "$work/h.err" || fail "bad URL: $(cat "$work/h.err")"
ok "bad URL: one warning"
echo "cache_redis: all checks passed"
