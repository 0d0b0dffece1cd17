# SPDX-License-Identifier: Apache-2.0
# Benchmark tooling tests (issue 5), label bench. Python tests run with /usr/bin/python3 (Debian's, which has scipy
# for compare.py's U-test). The dashboard test needs Chromium and is skipped, with the reason, without it.
find_program(CROSSFIRE_BENCH_PYTHON NAMES python3 HINTS /usr/bin NO_DEFAULT_PATH)
if(NOT CROSSFIRE_BENCH_PYTHON)
  find_program(CROSSFIRE_BENCH_PYTHON NAMES python3)
endif()
if(CROSSFIRE_BENCH_PYTHON)
  add_test(NAME bench.scripts COMMAND ${CROSSFIRE_BENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench_scripts_test.py)
  add_test(NAME bench.dashboard_chromium
           COMMAND ${CROSSFIRE_BENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench_dashboard_test.py)
  set_tests_properties(bench.scripts PROPERTIES LABELS "bench;core" TIMEOUT 300)
  set_tests_properties(bench.dashboard_chromium PROPERTIES LABELS "bench;core" TIMEOUT 300 SKIP_RETURN_CODE 77)
else()
  message(STATUS "crossfire: no python3; the bench script tests are not registered")
endif()
