#!/usr/bin/env bash
# Every spec in specs/ and tests/specs/ (op coverage, odd shapes) through the real hkc binary for the host target: build, inspect,
# run at every batch size, and compare the outputs with the NumPy reference
# (reference.py, independent of hkc) on random inputs. Also runs the example app.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for spec in "$HK_SOURCE_DIR"/specs/*.yaml "$HK_SOURCE_DIR"/tests/specs/*.yaml; do
  name=$(basename "$spec" .yaml)
  "$HKC" build "$spec" -o "$work/$name.hkpack" --target host
  "$HKC" inspect "$work/$name.hkpack" > "$work/$name.inspect"
  grep -q "host-" "$work/$name.inspect"
  batches=$("$PY" -c "import yaml,sys; print(' '.join(str(b) for b in yaml.safe_load(open(sys.argv[1]))['batch_sizes']))" "$spec")
  for b in $batches; do
    "$PY" "$HK_SOURCE_DIR/tests/integration/reference.py" "$HKC" "$work/$name.hkpack" "$spec" "$b" "$work/$name-$b"
  done
  if [ -n "${HK_EXAMPLE:-}" ]; then
    first=${batches%% *}
    "$HK_EXAMPLE" "$work/$name.hkpack" "$first" | grep -q "^output "
  fi
done
echo "specs_e2e: all specs match the reference"
