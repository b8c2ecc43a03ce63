# SPDX-License-Identifier: Apache-2.0
# Install rules (HKC_INSTALL): `cmake --install build --prefix P` gives
#   P/bin/hkc, P/bin/hkc-import, P/bin/hkc-import-onnx (the importer scripts `hkc import hf|onnx`
#   runs: python/hkc_import.py, python/hkc_import_onnx.py)
#   P/share/hkc/python/hkc_onnx/ (the ONNX importer's package, python/hkc_onnx/, which
#     bin/hkc-import-onnx finds by its path relative to bin/)
#   P/lib/libhkrt.so.<version> (+ the SONAME and development links), P/lib/libhkrt.a
#   P/include/hk/hkrt.h (the API), P/include/hk/pack_format.h (the artifact format)
#   P/lib/cmake/hkrt/: hkrtConfig.cmake, hkrtConfigVersion.cmake, the targets, HkcPack.cmake
#   P/lib/pkgconfig/hkrt.pc
#   P/share/bash-completion/completions/hkc (scripts/hkc-completion.bash)
#   P/lib/python3/dist-packages/hkrt/ (HKC_INSTALL_PYTHONDIR): the Python package (python/), with
#     _install_paths.py naming the installed libhkrt relative to it
# (lib: CMAKE_INSTALL_LIBDIR). Every file names its neighbours by relative path: the tree
# may be moved after installing.
include(CMakePackageConfigHelpers)
set(HKRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hkrt)

set_target_properties(hkrt_static PROPERTIES EXPORT_NAME hkrt_static)
install(TARGETS hkrt hkc EXPORT hkrtTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# A separate export: the static library needs zstd, libsodium, cJSON and threads found first
# (hkrtConfig.cmake), the shared one nothing.
# The importer script (`hkc import`), next to hkc, where the binary looks for it.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/python/hkc_import.py DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME hkc-import)
# The ONNX importer: its package under share/hkc/python (private to hkc, not on Python's path), and
# the entry point with that folder written in relative to bin/ (absolute when either folder is).
set(HKC_ONNX_INSTALL_DIR ${CMAKE_INSTALL_DATADIR}/hkc/python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/hkc_onnx DESTINATION ${HKC_ONNX_INSTALL_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN __pycache__ EXCLUDE)
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}" OR IS_ABSOLUTE "${HKC_ONNX_INSTALL_DIR}")
  set(HKC_ONNX_PKGDIR "${HKC_ONNX_INSTALL_DIR}")
  if(NOT IS_ABSOLUTE "${HKC_ONNX_PKGDIR}")
    set(HKC_ONNX_PKGDIR "${CMAKE_INSTALL_PREFIX}/${HKC_ONNX_PKGDIR}")
  endif()
else()
  file(RELATIVE_PATH HKC_ONNX_PKGDIR "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${HKC_ONNX_INSTALL_DIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/python/hkc_import_onnx.py ${PROJECT_BINARY_DIR}/package/hkc-import-onnx @ONLY)
install(PROGRAMS ${PROJECT_BINARY_DIR}/package/hkc-import-onnx DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS hkrt_static EXPORT hkrtStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/loader/include/hk DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT hkrtTargets NAMESPACE hkrt:: DESTINATION ${HKRT_CMAKE_DIR})
install(EXPORT hkrtStaticTargets NAMESPACE hkrt:: DESTINATION ${HKRT_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hkrtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/hkrtConfig.cmake
                              INSTALL_DESTINATION ${HKRT_CMAKE_DIR})
# Before 1.0 a minor release may break the API (docs/ABI.md): only the same MAJOR.MINOR matches.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(hkrt_compat SameMinorVersion)
else()
  set(hkrt_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/hkrtConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${hkrt_compat})
install(FILES ${PROJECT_BINARY_DIR}/package/hkrtConfig.cmake ${PROJECT_BINARY_DIR}/package/hkrtConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/HkcPack.cmake
        DESTINATION ${HKRT_CMAKE_DIR})

# hkrt.pc finds its prefix from its own place (${pcfiledir}), so `--prefix` at install time
# and moving the tree both work.
file(RELATIVE_PATH hkrt_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" hkrt_pc_up "${hkrt_pc_up}")
set(HKRT_PC_PREFIX "\${pcfiledir}/${hkrt_pc_up}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(HKRT_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(HKRT_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/hkrt.pc.in ${PROJECT_BINARY_DIR}/package/hkrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/hkrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Bash completion of hkc's commands, options and targets, where bash-completion looks for it
# (P/share/bash-completion/completions/hkc, loaded the first time `hkc` is completed).
install(FILES ${PROJECT_SOURCE_DIR}/scripts/hkc-completion.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME hkc)

# The Python package: pure Python, so its files are copied as they are, plus _install_paths.py,
# which tells it where the library is (python/hkrt/_lib.py looks there after HKRT_LIBRARY and
# before the linker's paths). lib/python3/dist-packages is on the path of Debian's and Ubuntu's
# python3 for the prefix /usr; for other prefixes set PYTHONPATH=P/lib/python3/dist-packages
# (or pip install ./python). With both folders relative the tree stays movable.
set(HKC_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "Where cmake --install puts the hkrt Python package (relative: under the prefix)")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/hkrt DESTINATION ${HKC_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN __pycache__ EXCLUDE)
if(IS_ABSOLUTE "${HKC_INSTALL_PYTHONDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  # one of them absolute: the library's absolute path (this tree is not movable anyway)
  set(hkrt_py_libdir "${CMAKE_INSTALL_LIBDIR}")
  if(NOT IS_ABSOLUTE "${hkrt_py_libdir}")
    set(hkrt_py_libdir "${CMAKE_INSTALL_PREFIX}/${hkrt_py_libdir}")
  endif()
else()
  file(RELATIVE_PATH hkrt_py_libdir "/prefix/${HKC_INSTALL_PYTHONDIR}/hkrt" "/prefix/${CMAKE_INSTALL_LIBDIR}")
  string(REGEX REPLACE "/$" "" hkrt_py_libdir "${hkrt_py_libdir}")
  if(hkrt_py_libdir STREQUAL "")
    set(hkrt_py_libdir ".")
  endif()
endif()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/package/_install_paths.py CONTENT
"# SPDX-License-Identifier: Apache-2.0
# Written by cmake --install (cmake/HkcInstall.cmake): libhkrt, relative to this folder.
LIBRARY = \"${hkrt_py_libdir}/$<TARGET_SONAME_FILE_NAME:hkrt>\"
")
install(FILES ${PROJECT_BINARY_DIR}/package/_install_paths.py DESTINATION ${HKC_INSTALL_PYTHONDIR}/hkrt)
