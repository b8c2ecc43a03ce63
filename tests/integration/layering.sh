#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The compiler's stages depend one way (docs/DESIGN.md, "Source layout"): no #include of a
# later stage's header, no call into a later stage, no files calling each other in a circle.
# scripts/check_layering.sh on this build's objects (nm) and the source tree (grep).
set -euo pipefail
: "${HK_SOURCE_DIR:?}" "${HK_BUILD_DIR:?}"
exec bash "$HK_SOURCE_DIR/scripts/check_layering.sh" "$HK_SOURCE_DIR" "$HK_BUILD_DIR"
