/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/hkc.h -- every stage's header at once, for the unit tests, fuzz targets and
 * programs that link hkc_core. The compiler's own sources never include it: each includes
 * its stage's header and the headers of the stages it uses, in one direction only
 * (docs/DESIGN.md, "Source layout"):
 *
 *   util/      diagnostics, strings, hashing, templates, f16/bf16         util/util.h
 *   frontend/  spec (YAML) -> IR, shape expressions, fusion               frontend/frontend.h
 *   lower/     costs, node -> kernel key + arguments (kernel ABI), plan   lower/lower.h
 *   codegen/   target table, host and GPU kernel source, variants         codegen/codegen.h
 *   rtc/       nvrtc, hiprtc/comgr (workers), cc, compile cache, pool     rtc/rtc.h
 *   tune/      candidates, model, tuning database, per-launch choice      tune/tune.h
 *   pack/      built targets -> the artifact                              pack/pack.h
 *   driver/    hkc_build: every stage for every target and batch bucket  driver/driver.h
 *   tools/     the CLI, inspect, targets probe, hkc tune, .npy            tools/tools.h
 *
 * Not a public API: only the hkc binary and the tests use it.
 */
#ifndef HKC_HKC_H
#define HKC_HKC_H

#include "util/util.h"
#include "frontend/frontend.h"
#include "lower/lower.h"
#include "codegen/codegen.h"
#include "rtc/rtc.h"
#include "tune/tune.h"
#include "pack/pack.h"
#include "driver/driver.h"
#include "tools/tools.h"

#endif /* HKC_HKC_H */
