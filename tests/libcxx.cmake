# SPDX-License-Identifier: Apache-2.0
# The fuzz targets' sources compile against libc++, as OSS-Fuzz and ClusterFuzzLite build them (tests/libcxx_syntax.py:
# clang -stdlib=libc++ -fsyntax-only over this build's compile_commands.json). The test build itself uses libstdc++,
# so without this a call libc++ lacks (std::from_chars for double) passed every test here while the OSS-Fuzz build
# failed. Skipped (77, with the reason) where clang-14 or libc++'s headers are missing.
if(CROSSFIRE_TEST_PYTHON AND CMAKE_EXPORT_COMPILE_COMMANDS)
  add_test(NAME cmake.fuzz_sources_compile_with_libcxx
           COMMAND ${CROSSFIRE_TEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/libcxx_syntax.py ${CMAKE_BINARY_DIR}
                   ${PROJECT_SOURCE_DIR})
  set_tests_properties(cmake.fuzz_sources_compile_with_libcxx
                       PROPERTIES LABELS "cmake;core" TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
