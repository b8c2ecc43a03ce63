# SPDX-License-Identifier: Apache-2.0
# hkc_add_pack(): build a .hkpack with hkc as part of a CMake build.
#
#   hkc_add_pack(NAME model SPEC model.yaml OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/model.hkpack
#                [TARGETS host sm_90a ...] [TUNING_DB tuned.db ...] [SIGN_KEY key.sec]
#                [WEIGHTS model.safetensors [WEIGHTS_MAP names.txt]]
#                [OPTIONS --fusion auto ...] [ALL])
#
# Adds a custom command that runs `hkc build SPEC -o OUTPUT --target T1,T2 [--tuning-db DB]...
# [--sign KEY | --no-sign] [--weights W [--weights-map M]] OPTIONS...` and a custom target NAME that
# depends on OUTPUT (ALL: built by default). The pack is rebuilt when the spec, a tuning
# database, the signing key, the weights, the name map or hkc itself changes. Relative SPEC,
# TUNING_DB, SIGN_KEY, WEIGHTS and WEIGHTS_MAP paths are read from the calling directory's
# source dir, a relative OUTPUT lies in its binary dir.
#
# WEIGHTS: a safetensors checkpoint stored in the pack (a self-contained pack, docs/WEIGHTS.md:
# every param of the spec, converted to the spec's dtype when the checkpoint's float dtype
# differs); WEIGHTS_MAP: the name map (pack name, checkpoint name per line) of hkc build
# --weights-map, only with WEIGHTS. Give them here, not as OPTIONS --weights: hkc would resolve
# such a path against the build directory, and a changed checkpoint would not rebuild the pack
# (OPTIONS --weights and --weights-map are refused, saying so).
#
# hkc is HKC_EXECUTABLE, a target or a path the caller may set; unset, the target hkrt::hkc:
# imported from an installed package (find_package(hkrt)), or hkc's own build inside
# add_subdirectory / FetchContent.
#
# Trust: the pack is unsigned unless SIGN_KEY is given (--no-sign: a CMake build never signs
# with, or creates, the key in the builder's home that a plain `hkc build` uses); libhkrt opens
# an unsigned pack only with hk_pack_open_options_t.allow_unsigned_code = 1, and a signed one
# when the key's public half is among the open's trusted_keys (docs/EMBEDDING.md, "Trust").
include_guard(GLOBAL)

function(hkc_add_pack)
  cmake_parse_arguments(PARSE_ARGV 0 arg "ALL" "NAME;SPEC;OUTPUT;SIGN_KEY;WEIGHTS;WEIGHTS_MAP"
                        "TARGETS;TUNING_DB;OPTIONS")
  foreach(required NAME SPEC OUTPUT)
    if(NOT arg_${required})
      message(FATAL_ERROR "hkc_add_pack: ${required} is required")
    endif()
  endforeach()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "hkc_add_pack: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(arg_WEIGHTS_MAP AND NOT arg_WEIGHTS)
    message(FATAL_ERROR "hkc_add_pack: WEIGHTS_MAP names checkpoint tensors: it needs WEIGHTS")
  endif()
  foreach(option IN LISTS arg_OPTIONS)
    if(option MATCHES "^--weights(-map)?(=|$)")
      message(FATAL_ERROR "hkc_add_pack(${arg_NAME}): give the checkpoint as WEIGHTS (and its name map as "
                          "WEIGHTS_MAP), not OPTIONS ${option}: those paths are read from this source dir and "
                          "a change to the files rebuilds the pack")
    endif()
  endforeach()
  if(NOT HKC_EXECUTABLE AND TARGET hkrt::hkc)
    set(HKC_EXECUTABLE hkrt::hkc) # add_subdirectory: the variable stays in hkc's own scope
  endif()
  if(NOT HKC_EXECUTABLE)
    message(FATAL_ERROR "hkc_add_pack: no hkc: HKC_EXECUTABLE is not set and there is no target hkrt::hkc")
  endif()

  get_filename_component(spec "${arg_SPEC}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(output "${arg_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(command "")
  set(depends "${spec}")
  if(TARGET ${HKC_EXECUTABLE})
    list(APPEND command "$<TARGET_FILE:${HKC_EXECUTABLE}>")
    # A target of this build (not imported): a target-level dependency orders the builds.
    get_target_property(imported ${HKC_EXECUTABLE} IMPORTED)
    if(imported)
      list(APPEND depends "$<TARGET_FILE:${HKC_EXECUTABLE}>")
    else()
      get_target_property(real ${HKC_EXECUTABLE} ALIASED_TARGET)
      if(real)
        list(APPEND depends ${real})
      else()
        list(APPEND depends ${HKC_EXECUTABLE})
      endif()
    endif()
  else()
    list(APPEND command "${HKC_EXECUTABLE}")
    list(APPEND depends "${HKC_EXECUTABLE}")
  endif()
  list(APPEND command build "${spec}" -o "${output}")
  if(arg_TARGETS)
    list(JOIN arg_TARGETS "," targets)
    list(APPEND command --target "${targets}")
  endif()
  foreach(db IN LISTS arg_TUNING_DB)
    get_filename_component(db "${db}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --tuning-db "${db}")
    list(APPEND depends "${db}")
  endforeach()
  if(arg_SIGN_KEY)
    get_filename_component(key "${arg_SIGN_KEY}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --sign "${key}")
    list(APPEND depends "${key}")
  else()
    list(APPEND command --no-sign)
  endif()
  if(arg_WEIGHTS)
    get_filename_component(weights "${arg_WEIGHTS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --weights "${weights}")
    list(APPEND depends "${weights}")
  endif()
  if(arg_WEIGHTS_MAP)
    get_filename_component(weights_map "${arg_WEIGHTS_MAP}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --weights-map "${weights_map}")
    list(APPEND depends "${weights_map}")
  endif()
  list(APPEND command ${arg_OPTIONS})

  get_filename_component(output_dir "${output}" DIRECTORY)
  file(MAKE_DIRECTORY "${output_dir}")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${command}
    DEPENDS ${depends}
    COMMENT "hkc build ${arg_NAME}: ${output}"
    VERBATIM COMMAND_EXPAND_LISTS)
  set(all "")
  if(arg_ALL)
    set(all ALL)
  endif()
  add_custom_target(${arg_NAME} ${all} DEPENDS "${output}")
  set_target_properties(${arg_NAME} PROPERTIES HKC_PACK_FILE "${output}")
endfunction()
