#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# H200 half of the Hugging Face check: tests/device/hf_models.py on the packs
# tests/device/hf_prepare.sh built (build-dev carried). Exit 1 on any mismatch.
set -uo pipefail
cd "$(dirname "$0")/../.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key} # packs built on one machine run on the other: both trust this key (docs/CLI.md, "Signing")
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${1:-${OUT:-/tmp/hk-hf}}
mkdir -p "$out"
python3 tests/device/hf_models.py build-dev/hkc build-dev/hf "$out"
