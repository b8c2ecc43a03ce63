#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies into DIR (a build folder carried to another machine, e.g. build-dev/ to the GPU
# machine) the shared libraries that DIR/hkc and DIR/libhkrt.so load beyond the C library
# (today libcjson.so.1 and libzip.so.4 with its own: Debian has no static cJSON or libzip). hkc and libhkrt look in their own folder
# first when LD_LIBRARY_PATH names DIR (every *_device.sh script exports it for build-dev).
#   bash scripts/carry_libs.sh build-dev
set -euo pipefail
dir=${1:?usage: scripts/carry_libs.sh BUILD_DIR}
for bin in "$dir/hkc" "$dir/libhkrt.so"; do
  [ -e "$bin" ] || continue
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case $name in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      *) [ "$path" -ef "$dir/$name" ] || cp -L "$path" "$dir/$name" ;;
    esac
  done
done
