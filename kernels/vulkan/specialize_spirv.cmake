# SPDX-License-Identifier: Apache-2.0
# Writes one module's specialized SPIR-V (Note [Specialized SPIR-V] in vulkan_backend.cpp): for each line of LIST
# that names MODULE ("<module> <suffix> 0:<value> 1:<value> ...", tools/spirv_specializations.cpp),
# SPV_DIR/<module>-<suffix>.spv, the module with constant_id i set to its value, frozen, folded and the code it
# rules out removed (spirv-opt). NAMES gets the written modules' names (none for a module without constants).
# cmake -DSPIRV_OPT=<spirv-opt> -DLIST=<file> -DMODULE=<name> -DSPV_DIR=<dir> -DNAMES=<file> -P specialize_spirv.cmake
file(STRINGS ${LIST} lines REGEX "^${MODULE} ")
set(names "")
foreach(line IN LISTS lines)
  string(REPLACE " " ";" parts "${line}")
  list(POP_FRONT parts module suffix)
  list(JOIN parts " " values)
  set(name "${MODULE}-${suffix}")
  execute_process(
    COMMAND ${SPIRV_OPT} --set-spec-const-default-value "${values}" --freeze-spec-const --fold-spec-const-op-composite
            --eliminate-dead-branches --merge-blocks --eliminate-dead-code-aggressive
            ${SPV_DIR}/${MODULE}.spv -o ${SPV_DIR}/${name}.spv
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "spirv-opt could not specialize ${MODULE} with constants ${values}: ${err}")
  endif()
  string(APPEND names "${name}\n")
endforeach()
# (Written even when the names are the same, so that the embedding, which depends on this file, sees new code.)
file(WRITE ${NAMES} "${names}")
