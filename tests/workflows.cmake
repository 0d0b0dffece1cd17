# SPDX-License-Identifier: Apache-2.0
# The GitHub workflows call only the project's scripts, with options and variables those scripts handle (issue 5),
# label workflows. Needs /usr/bin/python3 with PyYAML (python3-yaml; scripts/install-deps.sh installs it).
if(CROSSFIRE_TEST_PYTHON)
  add_test(NAME workflows.commands COMMAND ${CROSSFIRE_TEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/workflows_test.py)
  set_tests_properties(workflows.commands PROPERTIES LABELS "workflows;core" TIMEOUT 60)
else()
  message(STATUS "crossfire: no python3; the workflow checks are not registered")
endif()
