# SPDX-License-Identifier: Apache-2.0
# Plug-ins (issue 15, docs/your-backend.md): tests/plugins/test_plugin.cpp built once per mode as a plug-in would
# be (a MODULE library on crossfire::plugin, linking none of crossfire's libraries), and `crossfire --plugin` run
# on each by tests/harness/plugin_test.cpp: the working ones end to end, every broken one refused in one line.
if(TARGET crossfire_cli AND "cpu" IN_LIST CROSSFIRE_ENABLED_BACKENDS AND NOT CROSSFIRE_SANITIZE)
  set(_plugin_modes good faulty no_devices throws clash bad_name none unresolved bad_abi bad_layout no_entry)
  set(_plugin_defs "")
  foreach(mode IN LISTS _plugin_modes)
    list(APPEND _plugin_defs CROSSFIRE_TEST_PLUGIN_MODE_${mode}=0)
  endforeach()
  set(_plugin_paths "")
  foreach(mode IN LISTS _plugin_modes)
    add_library(test_plugin_${mode} MODULE plugins/test_plugin.cpp support/mirror_backend.cpp)
    set_target_properties(test_plugin_${mode} PROPERTIES OUTPUT_NAME plugin_${mode} PREFIX ""
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/plugins)
    list(TRANSFORM _plugin_defs REPLACE "_${mode}=0$" "_${mode}=1" OUTPUT_VARIABLE defs)
    target_compile_definitions(test_plugin_${mode} PRIVATE ${defs})
    target_include_directories(test_plugin_${mode} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(test_plugin_${mode} PRIVATE crossfire::plugin crossfire_warnings)
    list(APPEND _plugin_paths $<TARGET_FILE:test_plugin_${mode}>)
  endforeach()

  find_package(nlohmann_json REQUIRED)
  crossfire_core_test(plugin_cli AREA plugin TIMEOUT 300 SOURCES harness/plugin_test.cpp
    LIBS crossfire_harness nlohmann_json::nlohmann_json)
  target_compile_definitions(suite_plugin_cli PRIVATE CROSSFIRE_CLI="$<TARGET_FILE:crossfire_cli>"
                             CROSSFIRE_TEST_PLUGINS="${CMAKE_CURRENT_BINARY_DIR}/plugins")
  add_dependencies(suite_plugin_cli crossfire_cli)
  foreach(mode IN LISTS _plugin_modes)
    add_dependencies(suite_plugin_cli test_plugin_${mode})
  endforeach()
endif()

# The torch plug-in (plugins/torch), built against this build installed into a temporary prefix, and a campaign on
# cpu,torch with its expect file; its kept findings must still reproduce (tests/plugin_torch_test.sh). Skipped (77)
# without libtorch-dev.
if(TARGET crossfire_cli AND CROSSFIRE_INSTALL AND "cpu" IN_LIST CROSSFIRE_ENABLED_BACKENDS AND NOT CROSSFIRE_SANITIZE)
  add_test(NAME plugin.torch
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/plugin_torch_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CXX_COMPILER})
  set_tests_properties(plugin.torch PROPERTIES LABELS "plugin;core" TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
