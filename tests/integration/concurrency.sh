#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libhkrt's threads contract (hkrt.h, "Threads") on the host target: builds a small host
# pack and runs tests/concurrency/sessions_mt.c on it (many threads x own sessions with
# create/destroy churn, failing creates racing on the pack's error, one session misused
# from several threads). scripts/test.sh runs this script again with a ThreadSanitizer
# build of sessions_mt ($HK_SESSIONS_MT), where any report fails it.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}" "${HK_SESSIONS_MT:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$HKC" build "$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml" --target host -o "$work/ew.hkpack" -q
"$HK_SESSIONS_MT" "$work/ew.hkpack"
