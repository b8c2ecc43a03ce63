#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc build's progress (docs/CLI.md, "Progress"): every phase (the tuner's candidate compiles,
# each target's kernel compiles, the host unit, the pack) announces its total before it
# starts, and -v prints exactly that many "[i/N] phase: item" lines, i = 1..N; the summary's
# counts add up (GPU kernels = from the cache + from tuning + compiled; tuning candidates =
# from the cache + compiled + failed), agree with the items shown and with --json, and its
# thread counts are those the compiles can have used. A plain (non -v) build on a file shows
# the totals and no items; on a terminal (script(1)) one line rewritten in place, cut to the
# terminal's width. host always; host,sm_90a when nvrtc builds sm_90a (else skipped visibly),
# through the suite's compile cache: seconds once the cache holds the three kernels.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export HKC_CACHE_DIR=${HKC_CACHE_DIR:-$work/cache}
# one tunable gemm (the model compiles its top 2 candidates) and a layernorm the build compiles
cat > "$work/g.yaml" <<'EOF'
hkc: 1
name: progress
dtype: bf16
batch_sizes: [4]
dims: {seq: 16, hidden: 64}
inputs: {x: [batch, seq, hidden]}
params: {w: [hidden, hidden], b: [hidden], g: [hidden], bb: [hidden]}
graph:
  - {name: proj, op: gemm, in: [x, w], bias: b, out: h}
  - {name: ln, op: layernorm, in: [h], gamma: g, beta: bb, eps: 1.0e-5, out: y}
outputs: [y]
fusion: none
EOF

# check.py MODE ERR OUT [JSON]: MODE verbose (items expected) or lines (none); prints what failed.
cat > "$work/check.py" <<'EOF'
import json, re, sys
mode, err_path, out_path = sys.argv[1:4]
js = json.load(open(sys.argv[4])) if len(sys.argv) > 4 else None
err = open(err_path).read().splitlines()
out = open(out_path).read().splitlines()
errors = []
def need(cond, what):
    if not cond: errors.append(what)
phases, items = {}, {}
for line in err:
    m = re.match(r"hkc build: ((?:tune|compile|ptx) [^:]+|pack): (\d+) ", line)
    if m:
        need(m[1] not in phases, f"phase {m[1]} announced twice")
        phases[m[1]] = int(m[2])
        continue
    m = re.match(r"\[(\d+)/(\d+)\] ([^:]+): (.*)$", line)
    if m:
        need(m[3] in phases, f"item before its phase: {line}")
        need(int(m[2]) == phases.get(m[3]), f"item total differs from the announced one: {line}")
        items.setdefault(m[3], []).append((int(m[1]), m[4]))
        continue
    need(line.startswith("hkc build: "), f"a line that is neither a phase, an item nor a note: {line!r}")
need("pack" in phases and any(p.startswith("compile host") for p in phases), f"phases: {sorted(phases)}")
for p, n in phases.items():
    got = [i for i, _ in items.get(p, [])]
    if mode == "verbose":
        need(got == list(range(1, n + 1)), f"{p}: announced {n}, items {got}")
    else:
        need(not got, f"{p}: items without -v: {got}")
def tagged(p, tag): return sum(1 for _, t in items.get(p, []) if t.endswith(tag))
# the summary: stdout, else (--json) the notes on stderr; the notes equal stdout's lines
notes = [l[len("hkc build: "):] for l in err if re.match(r"hkc build: (compiled|tuning|PTX)", l)]
summary = [l for l in out if re.match(r"(compiled|tuning|PTX)", l)] if js is None else notes
if js is None: need(summary == notes, f"stderr notes {notes} != stdout summary {summary}")
kern = next((l for l in summary if l.startswith("compiled ")), None)
gpu = [p for p in phases if p.startswith("compile ") and p != "compile host"]
if gpu:
    m = re.fullmatch(r"compiled (\d+) GPU kernel\(s\)(?: on (\d+) thread\(s\))?, (\d+) from the cache, (\d+) from tuning, "
                     r"(\d+) compiled", kern or "")
    need(m, f"GPU summary line: {kern!r}")
    if m:
        k, threads, cached, tuning, compiled = int(m[1]), int(m[2] or 0), int(m[3]), int(m[4]), int(m[5])
        need(k == cached + tuning + compiled, f"{k} kernels != {cached} cached + {tuning} from tuning + {compiled} compiled")
        pool = sum(phases[p] for p in gpu)
        need(pool == cached + compiled, f"compile phases total {pool} != {cached} cached + {compiled} compiled")
        need(threads == min(2, pool), f"{threads} thread(s) for {pool} compile(s) at -j 2")
        if mode == "verbose":
            need(sum(tagged(p, "(cached)") for p in gpu) == cached, f"items marked (cached) != {cached}")
        if js:
            jk = js["kernels"]
            need((jk["gpu"], jk["cached"], jk["from_tuning"], jk["compiled"], jk["threads"]) == (k, cached, tuning, compiled, threads),
                 f"--json kernels {jk} != the summary's {kern!r}")
            need(sum(t["kernels"] for t in js["targets"] if t["kind"] != "host") == k, "--json targets' kernels")
    tl = next((l for l in summary if l.startswith("tuning: ")), "")
    m = re.fullmatch(r"tuning: (\d+) candidate kernel\(s\) on (\d+) thread\(s\), (\d+) from the cache, (\d+) compiled, "
                     r"(\d+) failed; (\d+) kept in the pack", tl)
    tunes = [p for p in phases if p.startswith("tune ")]
    need(m and tunes, f"tuning line {tl!r}, tune phases {tunes}")
    if m and tunes:
        n, threads, cached, compiled, failed, kept = map(int, m.groups())
        need(n == cached + compiled + failed, f"{n} candidates != {cached} + {compiled} + {failed}")
        need(n == sum(phases[p] for p in tunes), f"tuning line {n} != tune phases' total")
        need(threads == min(2, max(phases[p] for p in tunes)), f"tuning on {threads} thread(s)")
        need(kept == tuning, f"kept {kept} != {tuning} from tuning")
        if mode == "verbose":
            need(sum(tagged(p, "(cached)") for p in tunes) == cached, "tune items marked (cached)")
            need(sum(tagged(p, "(failed)") for p in tunes) == failed, "tune items marked (failed)")
        if js:
            jt = js["tuning"]
            need((jt["candidates"], jt["cached"], jt["compiled"], jt["failed"], jt["threads"]) == (n, cached, compiled, failed, threads),
                 f"--json tuning {jt} != {tl!r}")
            need(jt["cached"] == jt["candidates"] and js["kernels"]["compiled"] == 0,
                 "the second build compiled again: " + json.dumps(js["kernels"]) + json.dumps(jt))
else:
    need(kern is None and not [p for p in phases if p.startswith("tune ")], f"a host build with a GPU summary: {summary}")
for e in errors: print("  " + e)
sys.exit(1 if errors else 0)
EOF
check() { # check NAME MODE ERR OUT [JSON]
  local name=$1; shift
  python3 "$work/check.py" "$@" > "$work/check.txt" && ok "$name" || { bad "$name:"; cat "$work/check.txt" "$2"; }
}

# ---- host: the unit and the pack ---------------------------------------------------------------
"$HKC" build "$work/g.yaml" --target host -o "$work/h.hkpack" -v -j 2 > "$work/h.out" 2> "$work/h.err"
check "host -v: one item per announced unit and pack" verbose "$work/h.err" "$work/h.out"
"$HKC" build "$work/g.yaml" --target host -o "$work/h.hkpack" -j 2 > "$work/hl.out" 2> "$work/hl.err"
check "host on a file: totals, no items" lines "$work/hl.err" "$work/hl.out"

# ---- host,sm_90a: the tuner's candidates, the pool's kernels ----------------------------------------
targets=host
"$HKC" targets --no-probe | grep -q "builds:.* sm_90a" && targets=host,sm_90a
if [ "$targets" = host ]; then
  echo "SKIPPED (tuning and GPU kernel phases): nvrtc does not build sm_90a here"
else
  "$HKC" build "$work/g.yaml" --target $targets -o "$work/g.hkpack" -v -j 2 --tune-verify 2 > "$work/g.out" 2> "$work/g.err"
  check "host,sm_90a -v: items = announced totals, the summary adds up" verbose "$work/g.err" "$work/g.out"
  "$HKC" build "$work/g.yaml" --target $targets -o "$work/g2.hkpack" -j 2 --tune-verify 2 --json > "$work/g2.json" 2> "$work/g2.err"
  : > "$work/empty"
  check "host,sm_90a --json on a file: the notes' counts = the document's, all from the cache" lines "$work/g2.err" "$work/empty" "$work/g2.json"
fi

# ---- a terminal: one line rewritten in place, cut to its width --------------------------------------
if command -v script > /dev/null; then
  cmd="stty cols 40; '$HKC' build '$work/g.yaml' --target $targets -o '$work/t.hkpack' -j 2 --tune-verify 2"
  script -qc "$cmd" /dev/null > "$work/tty.raw" < /dev/null
  # tty.py RAW PACK: the pieces between "\r\033[K" (the line cleared) are the progress lines,
  # the last one holds the summary on stdout
  cat > "$work/tty.py" <<'EOF'
import re, sys
raw = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()
pieces = raw.split("\r\x1b[K")
progress, rest = pieces[1:-1], pieces[-1].replace("\r\n", "\n").splitlines()
errors = []
if len(progress) < 3 or not all(re.match(r"\[\d+/\d+\] ", p) for p in progress): errors.append(f"progress pieces {progress}")
if any(len(p) > 39 or "\n" in p for p in progress): errors.append("a progress line wider than the terminal (40 columns)")
if not any(p.startswith("[1/1] pack: ") for p in progress): errors.append("no pack item")
if "hkc build:" in raw: errors.append("plain lines on a terminal")
if not any(l.startswith("wrote " + sys.argv[2] + ": ") for l in rest): errors.append(f"no summary after the line: {rest}")
print("; ".join(errors) if errors else f"{len(progress)} progress lines in place, at most 39 columns, then the summary")
sys.exit(1 if errors else 0)
EOF
  if msg=$(python3 "$work/tty.py" "$work/tty.raw" "$work/t.hkpack"); then ok "terminal: $msg"; else bad "terminal: $msg"; cat -v "$work/tty.raw"; fi
else
  echo "SKIPPED (terminal): no script(1) (util-linux) here; the -v and plain-line modes are checked above"
fi
exit $fail
