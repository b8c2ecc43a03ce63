# SPDX-License-Identifier: Apache-2.0
# The hkrt wheel (target python_wheel, part of the default build of a top-level build with
# python3): build/hkrt-VERSION-py3-none-PLATFORM.whl, the Python package (python/hkrt) with this
# build's libhkrt and the shared libraries it loads (libcjson) inside it, written by
# scripts/build_wheel.py with the standard library only. `pip install build/hkrt-*.whl` gives
# a package that needs no HKRT_LIBRARY (docs/PYTHON.md); tests/integration/python.sh installs
# it into a fresh venv. HKC_PYTHON_WHEEL=OFF leaves it out of the default build, as do
# sanitizer builds (HK_SANITIZE, HK_FUZZ).
find_program(HKC_PYTHON3 NAMES python3 DOC "python3 that writes the hkrt wheel (scripts/build_wheel.py)")
option(HKC_PYTHON_WHEEL "Build the hkrt wheel (build/hkrt-*.whl) with the default target" ON)
if(NOT HKC_PYTHON3)
  message(STATUS "python3 not found: no hkrt wheel (target python_wheel)")
  return()
endif()
execute_process(COMMAND ${HKC_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/build_wheel.py --print-name
                OUTPUT_VARIABLE hkrt_wheel_name OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE hkrt_wheel_rc)
if(NOT hkrt_wheel_rc EQUAL 0 OR hkrt_wheel_name STREQUAL "")
  message(WARNING "scripts/build_wheel.py --print-name failed: no hkrt wheel")
  return()
endif()
set(HKRT_WHEEL ${PROJECT_BINARY_DIR}/${hkrt_wheel_name})
file(GLOB hkrt_py_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/hkrt/*.py)
# A sanitizer build's libhkrt cannot load into python without its runtime: no wheel by default.
if(HKC_PYTHON_WHEEL AND NOT HK_SANITIZE AND NOT HK_FUZZ)
  set(hkrt_wheel_all ALL)
endif()
add_custom_command(
  OUTPUT ${HKRT_WHEEL}
  COMMAND ${HKC_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/build_wheel.py --library $<TARGET_FILE:hkrt>
          --version ${PROJECT_VERSION} -o ${PROJECT_BINARY_DIR} -q
  DEPENDS hkrt ${hkrt_py_sources} ${PROJECT_SOURCE_DIR}/scripts/build_wheel.py ${PROJECT_SOURCE_DIR}/LICENSE
  COMMENT "Writing ${hkrt_wheel_name} (python/hkrt + libhkrt)")
add_custom_target(python_wheel ${hkrt_wheel_all} DEPENDS ${HKRT_WHEEL})
