# SPDX-License-Identifier: Apache-2.0
# The harness's own tests (issue 4): the program format, the generator, each oracle catching a planted fault, the
# reducer, and the `crossfire` command end to end (campaign reports, crash supervision, replay, reduce).
if(TARGET crossfire_harness)
  find_package(nlohmann_json REQUIRED)
  crossfire_core_test(harness AREA harness TIMEOUT 120
    SOURCES harness/format_test.cpp harness/generator_test.cpp harness/oracles_test.cpp harness/reducer_test.cpp
            harness/fast_path_test.cpp harness/hostile_programs_test.cpp
    LIBS crossfire_harness)
  # Reduced campaign findings that once failed and must not again (tests/harness/programs/).
  target_compile_definitions(suite_harness PRIVATE CROSSFIRE_TEST_PROGRAMS="${CMAKE_CURRENT_SOURCE_DIR}/harness/programs")
  if(TARGET crossfire_cli)
    crossfire_core_test(harness_cli AREA harness TIMEOUT 120 SOURCES harness/cli_test.cpp
      LIBS crossfire_harness nlohmann_json::nlohmann_json)
    target_compile_definitions(suite_harness_cli PRIVATE CROSSFIRE_CLI="$<TARGET_FILE:crossfire_cli>")
    add_dependencies(suite_harness_cli crossfire_cli)
  endif()
endif()

# The reports as CI tools and a person read them (issue 18): junit.xml against tests/data/junit.xsd and through
# junitparser, report.json against docs/report.schema.json, shards and merge, and report.html in headless Chromium.
# Both exit 77 (skipped, with the reason) without their Python modules or without Chromium.
if(TARGET crossfire_cli AND CROSSFIRE_TEST_PYTHON)
  add_test(NAME harness.reports COMMAND ${CROSSFIRE_TEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/reports_test.py
                                        $<TARGET_FILE:crossfire_cli>)
  add_test(NAME harness.reports_html_chromium
           COMMAND ${CROSSFIRE_TEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/reports_test.py
                   $<TARGET_FILE:crossfire_cli> --html)
  set_tests_properties(harness.reports harness.reports_html_chromium
                       PROPERTIES LABELS "harness;core" TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()

# crossfire as an installed package and as a subproject (issue 15): tests/package_test.sh. Not in sanitizer builds,
# whose libraries a plain consumer could not link.
if(TARGET crossfire_cli AND CROSSFIRE_INSTALL AND NOT CROSSFIRE_SANITIZE)
  add_test(NAME package.install_and_subproject
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/package_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CXX_COMPILER})
  set_tests_properties(package.install_and_subproject PROPERTIES LABELS "package;core" TIMEOUT 900)
endif()
