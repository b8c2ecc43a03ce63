#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source file of hkc names its license (Apache-2.0, LICENSE) in an SPDX line at its top:
# within its first two lines (the second after a shebang). Records of device runs
# (docs/device-runs/) are kept as they were run and are not checked. Also: no text file of the
# tree (sources, docs, README) holds a merge-conflict marker line.
set -euo pipefail
: "${HK_SOURCE_DIR:?}"
cd "$HK_SOURCE_DIR"
[ -f LICENSE ] && grep -q "Apache License" LICENSE || { echo "FAIL: no Apache-2.0 LICENSE"; exit 1; }
missing=$(find .ci bench cmake compiler examples loader python scripts templates tests CMakeLists.txt -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.hip' -o -name '*.cu' -o -name '*.cpp' -o -name '*.inc' \
     -o -name '*.py' -o -name '*.sh' -o -name '*.cmake' -o -name '*.in' -o -name CMakeLists.txt \
     -o -name Makefile -o -name '*.toml' -o -path .ci/run \) -not -path '*/__pycache__/*' -not -path 'python/build/*' |
  while read -r f; do head -n 2 "$f" | grep -q "SPDX-License-Identifier: Apache-2.0" || echo "$f"; done)
[ -z "$missing" ] || { echo "FAIL: no SPDX-License-Identifier line in:"; echo "$missing"; exit 1; }
conflicts=$(grep -rlE '^(<<<<<<< |>>>>>>> |=======$)' .ci bench cmake compiler docs examples loader python scripts \
  templates tests README.md CMakeLists.txt --exclude-dir=device-runs --exclude-dir=corpus --exclude-dir=__pycache__ \
  2>/dev/null || true)
[ -z "$conflicts" ] || { echo "FAIL: merge-conflict markers in:"; echo "$conflicts"; exit 1; }
echo "license: ok"
