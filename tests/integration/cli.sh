#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The command line (docs/CLI.md): every --json document parsed by python3's
# json module and checked key by key (types and values against what the human report and the
# files say), --opt=value forms, the short usage line and exit status 2 of usage errors,
# progress lines on a non-terminal stderr (none with -q), -q/-v on every command, inspect's
# resource columns per vendor (host: none; sm_90 and gfx90a when their toolchains are here,
# else skipped visibly), hkc cache stats/clean/--max-size (least recently used first, young
# temporary files kept, a hit marks its entry used, --cache-max-size after a build), the
# error messages that named a file twice or showed a stray quote, and the bash completion.
# Host builds only, plus one tiny kernel per GPU toolchain: a few seconds.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
spec=$HK_SOURCE_DIR/specs/mlp.yaml
gpu_cache=${HKC_CACHE_DIR:-$work/gpu-cache} # the shared test cache when the suite gives one
export HKC_CACHE_DIR=$work/unused-cache      # nothing below may touch the user's cache
cat > "$work/tiny.yaml" <<'EOF'
hkc: 1
name: tiny
dtype: f32
batch_sizes: [1, 2]
dims: {d: 8}
targets: [host]
inputs: {x: [batch, d]}
graph:
  - {name: r, op: relu, in: [x], out: y}
outputs: [y]
EOF

# check.py KIND FILE [ARGS...]: parses one JSON document and checks it; prints what failed.
cat > "$work/check.py" <<'EOF'
import json, re, sys

def check(kind, path, args):
    d = json.load(open(path))
    errors = []
    def need(cond, what):
        if not cond: errors.append(what)
    def typed(obj, key, types, where):
        need(key in obj, f"{where}: no key {key}")
        if key in obj: need(isinstance(obj[key], types) and not (types is int and isinstance(obj[key], bool)),
                            f"{where}.{key}: {type(obj[key]).__name__} {obj[key]!r}")
    INT, NUM, STR, BOOL, LIST, OBJ = int, (int, float), str, bool, list, dict
    need(d.get("schema") == 1, "schema is not 1")
    typed(d, "hkc", STR, "doc")
    if kind == "build":
        pack_bytes, kernels, batches = int(args[0]), int(args[1]), [int(b) for b in args[2].split(",")]
        need(d["command"] == "build", "command")
        for k, t in [("spec", STR), ("output", STR), ("name", STR), ("bytes", INT), ("signed", BOOL), ("seconds", NUM),
                     ("batch_sizes", LIST), ("kernels", OBJ), ("targets", LIST)]: typed(d, k, t, "build")
        need(d["bytes"] == pack_bytes, f"bytes {d['bytes']} != file size {pack_bytes}")
        need(d["signed"] is True, "signed: hkc build signs with the user's key by default")
        need(d["batch_sizes"] == batches, f"batch_sizes {d['batch_sizes']} != spec {batches}")
        for k in ["gpu", "cached", "shared_cached", "compiled", "ptx_compiles", "ptx_cached", "threads"]:
            typed(d["kernels"], k, INT, "build.kernels")
        need(len(d["targets"]) == 1 and d["targets"][0]["kind"] == "host", "one host target")
        t = d["targets"][0]
        for k, ty in [("name", STR), ("kind", STR), ("kernels", INT), ("code_bytes", INT), ("ptx", BOOL), ("graphs", LIST)]:
            typed(t, k, ty, "build.targets[0]")
        need(t["kernels"] == kernels, f"kernels {t['kernels']} != inspect's {kernels}")
        need([g["batch"] for g in t["graphs"]] == batches, "graphs per batch size")
        for g in t["graphs"]:
            for k in ["batch", "nodes", "workspace_bytes"]: typed(g, k, INT, "build graph")
    elif kind == "inspect":
        pack_bytes, names, vendor = int(args[0]), args[1].split(","), args[2]
        need(d["command"] == "inspect", "command")
        for k, t in [("path", STR), ("name", STR), ("format", STR), ("bytes", INT), ("sections", INT), ("spec_hash", STR),
                     ("dtype", STR), ("batch_sizes", LIST), ("batch_policy", STR), ("signature", OBJ), ("targets", LIST),
                     ("tensors", LIST), ("provenance", LIST)]: typed(d, k, t, "inspect")
        need(d["bytes"] == pack_bytes, "bytes")
        need(len(d["spec_hash"]) == 16, "spec_hash: 16 hex digits")
        sig = d["signature"]  # hkc build signs with the user's key (the tests' own); no --trust: trusted is null
        need(sig["state"] == "verified" and re.fullmatch("[0-9a-f]{16}", sig["key_id"] or "") and sig["trusted"] is None,
             f"signature {sig}")
        need(any(p.startswith("hkc_version=") for p in d["provenance"]), "provenance lines")
        t = d["targets"][0]
        for k, ty in [("name", STR), ("kind", STR), ("features", STR), ("code_bytes", INT), ("code_stored_bytes", INT),
                      ("zstd", BOOL), ("kernels", LIST), ("graphs", LIST)]: typed(t, k, ty, "inspect target")
        need(t["kind"] == vendor, f"kind {t['kind']} != {vendor}")
        need([k["name"] for k in t["kernels"]] == names, f"kernels {[k['name'] for k in t['kernels']]} != {names}")
        want = {"host": set(), "cuda": {"registers", "shared_bytes", "local_bytes"},
                "hip": {"vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes"}}[vendor]
        for k in t["kernels"]:
            need(set(k["resources"]) == want, f"{k['name']}: resources {sorted(k['resources'])}")
            if vendor == "host":
                need(k["occupancy"] is None, "host occupancy is null")
            else:
                need(all(isinstance(v, int) for v in k["resources"].values()), "resources are integers")
                need(k["resources"].get("registers", k["resources"].get("vgprs", 0)) > 0, "registers > 0")
                typed(k["occupancy"], "value", INT, "occupancy"); typed(k["occupancy"], "percent", NUM, "occupancy")
                typed(k, "wave_size", INT, "kernel"); typed(k, "spills", BOOL, "kernel")
        for g in t["graphs"]:
            for n in g["nodes"]:
                need(n["kernel"] in names, f"node {n['name']}: kernel {n['kernel']}")
                need(len(n["grid"]) == 3 and len(n["block"]) == 3, "grid, block: 3 numbers")
                typed(n, "after", LIST, "node"); typed(n, "pdl", BOOL, "node")
        for tt in d["tensors"]:
            need(tt["role"] in ("input", "output", "param", "intermediate"), f"role {tt['role']}")
            need(all(isinstance(x, (int, str)) for x in tt["shape"]), "shape: numbers and strings")
        need(any(tt["role"] == "input" and tt["shape"][0] == "batch" for tt in d["tensors"]), "an input [batch, ...]")
    elif kind == "run":
        outputs, runs, batch = args[0].split(","), int(args[1]), int(args[2])
        need(d["command"] == "run", "command")
        for k, t in [("pack", STR), ("target", STR), ("code", STR), ("launch", STR), ("pdl", INT), ("batch", INT),
                     ("bucket", INT), ("padded", BOOL), ("runs", INT), ("warmup", INT), ("median_ms", NUM),
                     ("min_ms", NUM), ("outputs", LIST), ("ok", BOOL)]: typed(d, k, t, "run")
        need(d["target"].startswith("host-") and d["code"] == "code_object", "host target, code object")
        need(d["runs"] == runs and d["ok"] is True and d["min_ms"] <= d["median_ms"], "runs, ok, min <= median")
        need(d["batch"] == batch and d["bucket"] == batch and d["padded"] is False, "--batch=N: batch, bucket")
        need(d["weights"] is None and d["saved_to"] is None and "launch_fallback" in d, "null keys")
        need([o["name"] for o in d["outputs"]] == outputs, f"outputs {[o['name'] for o in d['outputs']]}")
        for o in d["outputs"]:
            need(o["nonfinite"] == 0 and isinstance(o["mean"], NUM) and o["max_abs"] >= 0, f"output {o['name']}")
            need(o["shape"][0] == d["batch"], "output shape starts with the batch")
        p = d["profile"]
        need(isinstance(p, dict) and p["floor_target"] is None and p["device"] == "host" and len(p["launches"]) > 0,
             "profile")
        for l in p["launches"]:
            need(l["median_us"] > 0 and l["floor_us"] is None and isinstance(l["matrix"], bool), f"launch {l}")
    elif kind == "targets":
        need(d["command"] == "targets", "command")
        need(d["host"]["name"].startswith("host-") and isinstance(d["host"]["cc"], str), "host")
        names = {t["name"] for t in d["table"]}
        need({"sm_90", "gfx90a"} <= names, "the table has sm_90 and gfx90a")
        for t in d["table"]:
            for k, ty in [("product", STR), ("compute_units", INT), ("wave_size", INT), ("hbm_gbps", NUM)]:
                typed(t, k, ty, "table row")
        for tc in d["toolchains"]:
            typed(tc, "available", BOOL, "toolchain")
            if tc["available"]:
                need(tc["probed"] is False, "--no-probe: probed false")
                need(set(tc["builds"]) <= names, "builds: only names of the table")
            else:
                typed(tc, "why", STR, "toolchain")
        with open(path + ".avail", "w") as f:
            f.write(" ".join(b for tc in d["toolchains"] if tc["available"] for b in tc["builds"]))
    elif kind == "tune":
        dry, entries = args[0] == "dry", int(args[1])
        need(d["command"] == "tune" and d["dry_run"] is dry and d["target"] == "host", "command, dry_run, target")
        need(len(d["launches"]) == entries, f"{len(d['launches'])} launches != {entries}")
        for l in d["launches"]:
            typed(l, "signature", STR, "launch"); typed(l, "nodes", STR, "launch")
            if dry:
                need(sum(c["default"] for c in l["ranking"]) == 1, "one default per ranking")
                need(l["ranking"][0]["rank"] == 1, "ranked")
            else:
                need(isinstance(l["best"]["us"], NUM) and l["best"]["us"] > 0, "best us")
        need((d["output"] is None) == dry, "output")
        if not dry: need(d["entries"] == entries, "entries")
    elif kind == "cache":
        entries, nbytes, tmp = int(args[0]), int(args[1]), int(args[2])
        need(d["command"] == "cache stats" and d["dir"] == args[3], "command, dir")
        need((d["entries"], d["bytes"], d["temporary"]) == (entries, nbytes, tmp),
             f"entries/bytes/temporary {d['entries']}/{d['bytes']}/{d['temporary']} != {entries}/{nbytes}/{tmp}")
    else:
        errors.append("unknown kind " + kind)
    return errors

# one line per document: KIND FILE ARGS... (tab-separated); ok/FAIL per line, exit 1 on a failure
failed = 0
for line in open(sys.argv[1]):
    kind, path, *args = line.rstrip("\n").split("\t")
    try:
        errors = check(kind, path, args)
    except Exception as e:  # not JSON, a key missing, a wrong type
        errors = [f"{type(e).__name__}: {e}"]
    name = path.rsplit("/", 1)[-1]
    print(f"FAIL --json {kind} ({name}): " + "; ".join(errors) if errors else f"ok   --json {kind} ({name}): parsed, keys and values checked")
    failed |= bool(errors)
sys.exit(failed)
EOF
# check KIND FILE ARGS...: queued; every document is checked by one python3 at the end (start-up costs)
check() { (IFS=$'\t'; echo "$*") >> "$work/checks.tsv"; }
check_now() { check "$@"; python3 "$work/check.py" "$work/checks.tsv" || fail=1; : > "$work/checks.tsv"; }

# ---- build: --json summary, --opt=value, progress lines on a file, -q ----------------------------------
"$HKC" build "$spec" --output="$work/m.hkpack" --target=host --json > "$work/build.json" 2> "$work/build.err"
"$HKC" inspect "$work/m.hkpack" > "$work/m.txt"
names=$(awk '/^kernels for host-/{on=1;next} on && /^  hk_/{print $1} on && /^$/{exit}' "$work/m.txt" | paste -sd,)
nk=$(tr ',' '\n' <<<"$names" | grep -c .)
batches=$(sed -n 's/^batch_sizes: *\[\(.*\)\].*/\1/p' "$spec" | tr -d ' ')
check build "$work/build.json" "$(stat -c %s "$work/m.hkpack")" "$nk" "$batches"
grep -q "^hkc build: mlp: 1 target(s) (host)" "$work/build.err" && grep -q "^hkc build: wrote $work/m.hkpack in " "$work/build.err" \
  && ! grep -q $'\r\|\033' "$work/build.err" && ok "progress: plain lines when stderr is a file" \
  || bad "progress lines: $(cat "$work/build.err")"
[ "$(wc -l < "$work/build.err")" -le 5 ] || bad "progress: more than a few lines: $(cat "$work/build.err")"
"$HKC" build "$spec" -o "$work/q.hkpack" --target host -q > "$work/q.out" 2> "$work/q.err"
[ ! -s "$work/q.out" ] && [ ! -s "$work/q.err" ] && ok "build -q: nothing on stdout or stderr" || bad "build -q printed: $(cat "$work/q.out" "$work/q.err")"
cmp -s "$work/q.hkpack" "$work/m.hkpack" && ok "--opt=value builds the same pack" || bad "--output=/--target= differ from -o/--target"
"$HKC" build "$work/tiny.yaml" -o "$work/h.hkpack" --target host > "$work/h.out" 2> /dev/null
grep -q "^wrote $work/h.hkpack: 1 target(s)" "$work/h.out" && ok "human summary unchanged without --json" || bad "summary: $(cat "$work/h.out")"

# ---- inspect: --json, host columns, -q -----------------------------------------------------------------
"$HKC" inspect --json "$work/m.hkpack" > "$work/inspect.json"
check inspect "$work/inspect.json" "$(stat -c %s "$work/m.hkpack")" "$names" host
head=$(awk '/^kernels for host-/{getline; print; exit}' "$work/m.txt")
[ "$(echo $head)" = "name params" ] && ok "inspect: host kernels have no resource columns" || bad "host header: '$head'"
[ -z "$("$HKC" inspect -q "$work/m.hkpack")" ] && ok "inspect -q: verify only" || bad "inspect -q printed"

# ---- run --json ------------------------------------------------------------------------------------------
"$HKC" run "$work/m.hkpack" --allow-unsigned-native --random-params --batch=4 --seed=3 --runs=2 --warmup=0 \
  --profile --repeats=2 --json > "$work/run.json"
outs=$(sed -n 's/^outputs: *\[\(.*\)\].*/\1/p' "$spec" | tr -d ' ')
check run "$work/run.json" "$outs" 2 4
[ -z "$("$HKC" run "$work/m.hkpack" --allow-unsigned-native --random-params --runs 1 -q)" ] && ok "run -q: silent" || bad "run -q printed"

# ---- targets --json (--no-probe: no test compiles) -------------------------------------------------------
"$HKC" targets --json --no-probe > "$work/targets.json"
check_now targets "$work/targets.json"
avail=$(cat "$work/targets.json.avail")

# ---- tune --json on the host target ---------------------------------------------------------------------
"$HKC" tune "$spec" --target=host --dry-run --json > "$work/tune-dry.json" 2> /dev/null
classes=$(grep -c '"signature":' "$work/tune-dry.json" || true)
check tune "$work/tune-dry.json" dry "$classes"
"$HKC" tune "$spec" --target host -o "$work/t.db" --top=1 --runs=1 --warmup=1 --json > "$work/tune.json" 2> /dev/null
check tune "$work/tune.json" measured "$(grep -vc '^#' "$work/t.db")"

# ---- usage errors: one short line, the synopsis, exit 2 ----------------------------------------------------
usage() { # usage WANT ARGS...
  local want=$1; shift
  set +e; "$HKC" "$@" > "$work/u.out" 2> "$work/u.err"; local rc=$?; set -e
  local cmd=$1
  if [ $rc -eq 2 ] && [ "$(wc -l < "$work/u.err")" -eq 3 ] && grep -q "^hkc $cmd: $want" "$work/u.err" &&
    grep -q "^usage: hkc $cmd " "$work/u.err" && grep -q "^try 'hkc $cmd --help'$" "$work/u.err" && [ ! -s "$work/u.out" ]; then
    ok "usage error: hkc $* -> $(head -n1 "$work/u.err")"
  else
    bad "usage error hkc $* (rc $rc): $(cat "$work/u.err")"
  fi
}
usage "unknown option --bogus" build "$spec" -o "$work/x.hkpack" --bogus
usage "ambiguous option --t" build "$spec" -o "$work/x.hkpack" --t host
usage "no output given" build "$spec"
usage "--jobs expects an integer" build "$spec" -o "$work/x.hkpack" --jobs=many
usage "--fusion expects auto or none" build "$spec" -o "$work/x.hkpack" --fusion=greedy
usage "--target needs a value" run "$work/m.hkpack" --target
usage "no pack given" run
usage "unknown option --json" keygen -o "$work/k" --json
usage "--json takes no value" inspect "$work/m.hkpack" --json=yes
usage "say stats or clean" cache
usage "--max-size expects a size" cache clean --max-size=lots
[ ! -e "$work/x.hkpack" ] || bad "a usage error wrote a pack"
"$HKC" build --help > "$work/help.txt" && grep -q "^  --cache-max-size SIZE" "$work/help.txt" && ok "build --help" || bad "build --help"

# ---- -q and -v on every command --------------------------------------------------------------------------
"$HKC" keygen -o "$work/k" -q > "$work/kq.out" && [ ! -s "$work/kq.out" ] || bad "keygen -q printed"
"$HKC" sign "$work/q.hkpack" --key="$work/k" -o "$work/s.hkpack" -v > /dev/null || bad "sign -v"
[ -z "$("$HKC" sign "$work/q.hkpack" --key "$work/k" -o "$work/s.hkpack" -q)" ] || bad "sign -q printed"
"$HKC" targets -q -v --no-probe > /dev/null || bad "targets -q -v"
"$HKC" cache stats -v > /dev/null || bad "cache stats -v"
ok "-q and -v accepted by keygen, sign, targets, cache (build, run, inspect: above)"

# ---- error messages name a file once; the npy dtype has no stray quote --------------------------------------
head -c 1000 "$work/m.hkpack" > "$work/t.hkpack"
for cmd in "inspect" "run" "sign --key $work/k" "merge $work/m.hkpack -o $work/mm.hkpack"; do
  set +e; msg=$("$HKC" $cmd "$work/t.hkpack" 2>&1); set -e
  n=$(grep -o "t\.hkpack" <<<"$msg" | grep -c . || true)
  [ "$n" -eq 1 ] && grep -q "truncated" <<<"$msg" && ok "hkc ${cmd%% *}: names the pack once: $msg" || bad "hkc ${cmd%% *}: $msg"
done
hdr="{'descr': '<u2', 'fortran_order': False, 'shape': (1, 64), }" # 10 + 118 header bytes: a multiple of 64
hdr=$(printf '%-117s' "$hdr")
{ printf '\x93NUMPY\x01\x00\x76\x00%s\n' "$hdr"; head -c 128 /dev/zero; } > "$work/u2.npy"
set +e; msg=$("$HKC" run "$work/m.hkpack" --allow-unsigned-native --random-params --runs 1 --input x="$work/u2.npy" 2>&1 >/dev/null); set -e
grep -q "unsupported .npy dtype <u2 (expected <f2, <f4, <f8, <i4, <i8, |i1 or |u1" <<<"$msg" && ! grep -q "'" <<<"$msg" \
  && ok "npy dtype error: $msg" || bad "npy dtype error: $msg"

# ---- GPU vendors: inspect columns, -v progress per kernel (when the toolchain is here) ------------------------
gpu_build() { # gpu_build TARGET OUT [ARGS...]
  local t=$1 out=$2; shift 2
  HKC_CACHE_DIR=$gpu_cache "$HKC" build "$work/tiny.yaml" --target "$t" -o "$out" "$@"
}
if [[ " $avail " == *" sm_90 "* ]]; then
  gpu_build sm_90 "$work/nv.hkpack" -v --no-ptx > /dev/null 2> "$work/nv.err"
  grep -Eq "^\[1/1\] compile sm_90: hk_relu_f32[a-z0-9_]*( \(cached\)| \(shared cache\))?$" "$work/nv.err" && ok "-v: a progress line per kernel" || bad "-v: $(cat "$work/nv.err")"
  "$HKC" inspect "$work/nv.hkpack" > "$work/nv.txt"
  head=$(awk '/^kernels for sm_90/{getline; print; exit}' "$work/nv.txt")
  [ "$(echo $head | cut -d' ' -f1-8)" = "name regs shared local warp block blocks/SM occup%" ] && ok "inspect: NVIDIA columns: $(echo $head)" \
    || bad "NVIDIA header: $head"
  "$HKC" inspect --json "$work/nv.hkpack" > "$work/nv.json"
  check inspect "$work/nv.json" "$(stat -c %s "$work/nv.hkpack")" "$(awk '/^kernels for sm_90/{getline; on=1; next} on && /^  hk_/{print $1} on && /^$/{exit}' "$work/nv.txt" | paste -sd,)" cuda
else
  echo "SKIPPED (NVIDIA columns): nvrtc has no sm_90 here"
fi
if [[ " $avail " == *" gfx90a "* ]]; then
  gpu_build gfx90a "$work/amd.hkpack" -q
  "$HKC" inspect "$work/amd.hkpack" > "$work/amd.txt"
  head=$(awk '/^kernels for gfx90a/{getline; print; exit}' "$work/amd.txt")
  [ "$(echo $head | cut -d' ' -f1-10)" = "name vgpr agpr sgpr lds scratch wave block waves/SIMD occup%" ] && ok "inspect: AMD columns: $(echo $head)" \
    || bad "AMD header: $head"
  "$HKC" inspect --json "$work/amd.hkpack" > "$work/amd.json"
  check inspect "$work/amd.json" "$(stat -c %s "$work/amd.hkpack")" "$(awk '/^kernels for gfx90a/{getline; on=1; next} on && /^  hk_/{print $1} on && /^$/{exit}' "$work/amd.txt" | paste -sd,)" hip
else
  echo "SKIPPED (AMD columns): hiprtc has no gfx90a here"
fi

# ---- hkc cache -----------------------------------------------------------------------------------------------
c=$work/c
mkdir -m 700 "$c"
key() { printf '%032x' "$1"; }
for i in 1 2 3 4 5; do # entries of 1000..5000 bytes, entry 1 the oldest
  head -c $((i * 1000)) /dev/zero > "$c/$(key $i).hkcc"
  touch -d "@$(( $(date +%s) - 600 + i * 60 ))" "$c/$(key $i).hkcc"
done
echo young > "$c/.$(key 9).hkcc.tmp.1234"               # a writer at work: kept
echo old > "$c/.$(key 8).hkcc.tmp.99" && touch -d '5 minutes ago' "$c/.$(key 8).hkcc.tmp.99" # stale: removed
echo mine > "$c/NOTES"                                   # not the cache's: never touched
HKC_CACHE_DIR=$c "$HKC" cache stats --json > "$work/cs.json"
check cache "$work/cs.json" 5 15000 2 "$c"
HKC_CACHE_DIR=$c "$HKC" cache clean --max-size=9K > "$work/clean.out"   # 9216 bytes: keeps 5 (5000) and 4 (4000)
left=$(cd "$c" && ls -A | sort | paste -sd' ')
want=".$(key 9).hkcc.tmp.1234 $(key 4).hkcc $(key 5).hkcc NOTES"
[ "$left" = "$(tr ' ' '\n' <<<"$want" | sort | paste -sd' ')" ] && grep -q "^removed 3 entries (6000 bytes)" "$work/clean.out" \
  && ok "cache clean --max-size: least recently used removed first, young temporary and other files kept" \
  || bad "cache clean --max-size left: $left ($(cat "$work/clean.out"))"
HKC_CACHE_DIR=$c "$HKC" cache clean -q
[ "$(cd "$c" && ls -A | grep -c '\.hkcc$' || true)" -eq 0 ] && [ -e "$c/NOTES" ] && ok "cache clean: every entry" || bad "cache clean: $(ls -A "$c")"
HKC_CACHE_DIR=$work/absent "$HKC" cache stats --json > "$work/cs0.json"
check cache "$work/cs0.json" 0 0 0 "$work/absent"
if [[ " $avail " == *" sm_90 "* ]]; then
  # a hit marks its entry used; --cache-max-size and HKC_CACHE_MAX_SIZE cap the cache after a build
  d=$work/c2
  HKC_CACHE_DIR=$d "$HKC" build "$work/tiny.yaml" --target sm_90 --no-ptx -o "$work/g1.hkpack" -q
  e=$(ls "$d"/*.hkcc)
  touch -d '1 hour ago' "$e"
  before=$(stat -c %Y "$e")
  HKC_CACHE_DIR=$d "$HKC" build "$work/tiny.yaml" --target sm_90 --no-ptx -o "$work/g2.hkpack" -q
  [ "$(stat -c %Y "$e")" -gt "$before" ] && ok "a cache hit marks its entry used" || bad "hit did not touch $e"
  HKC_CACHE_DIR=$d "$HKC" build "$work/tiny.yaml" --target sm_90 --no-ptx -o "$work/g3.hkpack" -q --cache-max-size=100
  [ "$(ls -A "$d" | grep -c '\.hkcc$' || true)" -eq 0 ] && cmp -s "$work/g1.hkpack" "$work/g3.hkpack" \
    && ok "--cache-max-size: the cache capped after the build" || bad "--cache-max-size left $(ls -A "$d")"
  HKC_CACHE_DIR=$d HKC_CACHE_MAX_SIZE=1M "$HKC" build "$work/tiny.yaml" --target sm_90 --no-ptx -o "$work/g4.hkpack" -q
  [ "$(ls -A "$d" | grep -c '\.hkcc$' || true)" -eq 1 ] && ok "HKC_CACHE_MAX_SIZE=1M keeps the entry" || bad "HKC_CACHE_MAX_SIZE: $(ls -A "$d")"
  set +e; HKC_CACHE_DIR=$d HKC_CACHE_MAX_SIZE=huge "$HKC" build "$work/tiny.yaml" --target host -o "$work/g5.hkpack" -q 2> "$work/env.err"; rc=$?; set -e
  [ $rc -eq 2 ] && grep -q "HKC_CACHE_MAX_SIZE is 'huge'" "$work/env.err" && ok "a bad HKC_CACHE_MAX_SIZE is a usage error" || bad "HKC_CACHE_MAX_SIZE=huge: rc $rc $(cat "$work/env.err")"
else
  echo "SKIPPED (cache hits and --cache-max-size after a GPU build): nvrtc has no sm_90 here"
fi

# ---- bash completion ------------------------------------------------------------------------------------------
complete_words() { # complete_words WORD... : what _hkc offers for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _hkc; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$HK_SOURCE_DIR/scripts/hkc-completion.bash" "$@" | sort | paste -sd' '
}
PATH=$(dirname "$HKC"):$PATH
[ "$(complete_words hkc bu)" = "build" ] && [ "$(complete_words hkc cache "")" = "clean stats" ] &&
  [[ " $(complete_words hkc build --ta) " == *" --target "* ]] && [[ " $(complete_words hkc inspect --j) " == *" --json "* ]] &&
  [[ " $(complete_words hkc build x.yaml --target h) " == *" host "* ]] && [[ " $(complete_words hkc run --fo) " != *" --fusion "* ]] \
  && ok "bash completion: commands, options per command, targets" || bad "bash completion: '$(complete_words hkc bu)' '$(complete_words hkc cache "")' '$(complete_words hkc build --ta)'"

# hkc help CMD is CMD's help; targets' usage line names --no-probe
"$HKC" help build > "$work/help_build.txt" && "$HKC" targets --help > "$work/help_targets.txt" &&
  head -1 "$work/help_build.txt" | grep -q "^usage: hkc build SPEC" &&
  head -1 "$work/help_targets.txt" | grep -q -- "--no-probe" && ok "hkc help build; targets usage names --no-probe" ||
  bad "help: $(head -2 "$work/help_build.txt") / $(head -1 "$work/help_targets.txt")"

# A spec on standard input ("-"): the same pack as from the file; its errors name <stdin>
"$HKC" build - -o "$work/stdin.hkpack" --target host -q < "$HK_SOURCE_DIR/specs/mlp.yaml" &&
  "$HKC" build "$HK_SOURCE_DIR/specs/mlp.yaml" -o "$work/file.hkpack" --target host -q &&
  cmp -s "$work/stdin.hkpack" "$work/file.hkpack" &&
  ! printf 'hkc: 1\nname: [\n' | "$HKC" build - -o "$work/bad.hkpack" > "$work/stdin_bad.txt" 2>&1 &&
  grep -q "^<stdin>:3:1: YAML syntax error" "$work/stdin_bad.txt" && ok "build -: the spec from standard input" ||
  bad "build -: $(cat "$work/stdin_bad.txt")"

# inspect's graph table: the kernel column starts at one place on every node line of a graph,
# however long a fused node's name ("o_proj,attn_res,ffn_norm")
"$HKC" build "$HK_SOURCE_DIR/specs/llama_block.yaml" -o "$work/lb.hkpack" --target host -q &&
  "$HKC" inspect "$work/lb.hkpack" > "$work/lb.txt" &&
  awk '/^  graph /{g++} /^    #[0-9]/{c = index($0, " hk_"); if (!(g in col)) col[g] = c; else if (col[g] != c) bad = 1;
       if (index($0, ",") && index($0, ",") < c) fused = 1} END {exit !(fused && !bad)}' "$work/lb.txt" &&
  ok "inspect: node and kernel columns aligned with fused node names" || bad "inspect columns: $(grep '^    #' "$work/lb.txt" | head -8)"

# Each command's help footer names -v and --json only where the command has them
"$HKC" keygen --help > "$work/h_keygen.txt" && "$HKC" inspect --help > "$work/h_inspect.txt" &&
  "$HKC" build --help > "$work/h_build.txt" &&
  grep -q "^common options:" "$work/h_keygen.txt" && ! grep "^common options:" "$work/h_keygen.txt" | grep -q -- "--verbose\|--json" &&
  grep "^common options:" "$work/h_inspect.txt" | grep -q -- "--json" &&
  ! grep "^common options:" "$work/h_inspect.txt" | grep -q -- "--verbose" &&
  grep "^common options:" "$work/h_build.txt" | grep -q -- "--verbose.*--json" &&
  ok "help footers: -v and --json where the command has them" ||
  bad "help footers: $(grep -h '^common options:' "$work"/h_*.txt)"

# Outputs checked before the work: a directory that does not exist, and "-" (no file named "-")
set +e
"$HKC" build "$HK_SOURCE_DIR/specs/mlp.yaml" -o "$work/nodir/q.hkpack" --target host > "$work/nodir.txt" 2>&1
r1=$?
(cd "$work" && "$HKC" build "$HK_SOURCE_DIR/specs/mlp.yaml" -o - --target host > "$work/dash.txt" 2>&1)
r2=$?
set -e
[ $r1 = 1 ] && grep -q "its directory $work/nodir does not exist" "$work/nodir.txt" && ! grep -q "compil" "$work/nodir.txt" &&
  [ $r2 = 1 ] && grep -q "cannot write to standard output" "$work/dash.txt" && [ ! -e "$work/-" ] &&
  ok "build -o: a missing directory and '-' refused before compiling" ||
  bad "build -o checks: $r1 $(cat "$work/nodir.txt") / $r2 $(cat "$work/dash.txt")"

python3 "$work/check.py" "$work/checks.tsv" || fail=1

if [ $fail -ne 0 ]; then
  echo "cli: FAILURES"
  exit 1
fi
echo "cli: all checks passed"
