# SPDX-License-Identifier: Apache-2.0
# Run at build time (`cmake -DSOURCE_DIR=... -DOUTPUT=... -P commit.cmake`): writes OUTPUT, a C++ source that
# defines crossfire::build_commit(), with the commit the tree is built from ("" outside a git checkout, "-dirty"
# appended when tracked files differ from it). The file is rewritten only when its text changes, so an unchanged
# commit rebuilds nothing.
find_program(GIT git)
set(commit "")
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --short=12 HEAD OUTPUT_VARIABLE head
                  RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0 AND head)
    set(commit ${head})
    execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} status --porcelain --untracked-files=no OUTPUT_VARIABLE changes
                    RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND changes)
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
set(text "// Written by cmake/commit.cmake at build time; do not edit.\n#include \"crossfire/version.hpp\"\nnamespace crossfire {\nstd::string_view build_commit() { return \"${commit}\"; }\n}  // namespace crossfire\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
