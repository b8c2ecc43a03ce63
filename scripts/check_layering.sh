#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The compiler's stages depend one way (docs/DESIGN.md, "Source layout"):
#
#   util <- frontend <- lower <- codegen <- rtc <- tune <- pack <- driver <- tools
#
# A file may use its own stage and the stages before it, never one after it. Two checks:
#   1. #include lines (source tree): a file under compiler/<stage>/ includes only headers of
#      its stage or an earlier one, by their stage path ("lower/lower.h"), never the umbrella
#      hkc.h (tests only);
#   2. symbols (nm on the build's objects of hkc_core and hkc): every reference from one file
#      to a function or variable defined in another goes to the same stage or an earlier one,
#      and no files reference each other in a circle (a cycle of any length, in or across
#      stages).
# Prints the stage-to-stage references it found, then the violations; exits 1 on any.
#
# Usage: scripts/check_layering.sh [SOURCE_DIR [BUILD_DIR]]  (defaults: $HK_SOURCE_DIR or this
# checkout; $HK_BUILD_DIR or SOURCE_DIR/build). Needs bash, grep, awk and nm (binutils).
set -euo pipefail
src=${1:-${HK_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
build=${2:-${HK_BUILD_DIR:-$src/build}}
stages="util frontend lower codegen rtc tune pack driver tools"
objdirs=("$build/CMakeFiles/hkc_core.dir" "$build/CMakeFiles/hkc.dir")
for d in "${objdirs[@]}"; do
  [ -d "$d" ] || { echo "check_layering: no objects in $d (build hkc first)" >&2; exit 2; }
done

# 1. includes: "FILE INCLUDED" pairs
includes=$(cd "$src" && grep -H '^#include "' $(find compiler -name '*.[ch]' | sort) |
           sed 's/:#include "\([^"]*\)".*/ \1/')
# 2. symbols: "D FILE SYMBOL" (defined, global) and "U FILE SYMBOL" (undefined)
objs=$(find "${objdirs[@]}" -name '*.o' | sort)
symbols=$( { nm -A -g --defined-only $objs | sed 's/^/D /'; nm -A -u $objs | sed 's/^/U /'; } |
  sed -e 's#^\([DU]\) [^ ]*CMakeFiles/[^/]*\.dir/\([^:]*\)\.o:#\1 \2 #' |
  awk '$1 == "D" && NF == 5 { print "D", $2, $5 } $1 == "U" { print "U", $2, $NF }')
[ -n "$symbols" ] || { echo "check_layering: no symbols read from $build" >&2; exit 2; }

{ echo "$includes" | sed 's/^/I /'; echo "$symbols"; } | awk -v stages="$stages" '
function stage_of(path,   p) { # compiler/<stage>/...; generated sources (templates) count as util
  if (path ~ /^generated\//) return "util"
  split(path, p, "/")
  return (p[1] == "compiler" && (p[2] in rank)) ? p[2] : ""
}
BEGIN { n = split(stages, s, " "); for (i = 1; i <= n; i++) rank[s[i]] = i }
$1 == "I" {
  from = stage_of($2); inc = $3
  if (inc == "hkc.h") { bad[++nbad] = $2 " includes the umbrella hkc.h (tests only; include the stage headers)"; next }
  split(inc, q, "/")
  if (!(q[1] in rank) || from == "") next   # system, loader or same-folder headers
  if (rank[q[1]] > rank[from]) bad[++nbad] = $2 " (" from ") includes " inc " (" q[1] ", a later stage)"
  next
}
$1 == "D" { def[$3] = $2; files[$2] = 1; next }
$1 == "U" { use[++nuse] = $2 SUBSEP $3; files[$2] = 1; next }
END {
  nf = 0
  for (f in files) id[f] = ++nf
  for (f in files) name[id[f]] = f
  for (u = 1; u <= nuse; u++) {
    split(use[u], p, SUBSEP); f = p[1]; sym = p[2]
    if (!(sym in def) || def[sym] == f) continue
    g = def[sym]; a = stage_of(f); b = stage_of(g)
    if (!((id[f], id[g]) in edge)) edge[id[f], id[g]] = sym
    key = a " -> " b
    if (!(key in count)) { count[key] = 0; example[key] = sym; order[++nkeys] = key }
    count[key]++
    if (a != b && (a == "" || b == "" || rank[b] > rank[a]))
      bad[++nbad] = f " (" a ") calls " sym " in " g " (" b ", a later stage)"
  }
  # stage references, earliest stage first
  for (i = 1; i <= n; i++) for (j = 1; j <= n; j++) {
    key = s[i] " -> " s[j]
    if (key in count) printf "  %-22s %3d symbol(s), e.g. %s\n", key, count[key], example[key]
  }
  # cycles between files: transitive closure (a few dozen files)
  for (k = 1; k <= nf; k++) for (i = 1; i <= nf; i++) if ((i, k) in edge || (i, k) in reach)
    for (j = 1; j <= nf; j++) if (((k, j) in edge || (k, j) in reach) && !((i, j) in reach)) reach[i, j] = k
  for (i = 1; i <= nf; i++) if ((i, i) in reach && !(i in shown)) {
    cyc = name[i]; c = i; shown[i] = 1
    for (step = 0; step < nf; step++) { # walk one cycle through i for the message
      for (j = 1; j <= nf; j++) if ((c, j) in edge && (j == i || (j, i) in edge || (j, i) in reach)) break
      if (j > nf) break
      cyc = cyc " -> " name[j] " (" edge[c, j] ")"; c = j; shown[j] = 1
      if (c == i) break
    }
    bad[++nbad] = "files call each other in a circle: " cyc
  }
  if (nbad) {
    for (i = 1; i <= nbad; i++) print "LAYERING: " bad[i]
    exit 1
  }
  printf "layering OK: %d files, includes and symbols one way (%s)\n", nf, stages
}'
