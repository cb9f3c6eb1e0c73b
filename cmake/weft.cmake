# What the build's test sources are compiled with, beyond the build's flags. In an optimized build they are compiled
# without optimization: the code under test keeps the build's flags (it is in the libraries), test bodies are not
# what is measured, and -O0 compiles them a third faster, which keeps CI within its time.
function(weft_test_compile_options target)
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()

# weft_test_pch(): GoogleTest's headers precompiled once, for every weft_test to reuse (about 1.5 s of parsing per
# test source otherwise, in each build). Called once, before the first weft_test. A test whose flags do not match
# (a runtime's own -D options) compiles the headers as text instead: slower, never wrong.
function(weft_test_pch)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Clang refuses a precompiled header built with other flags instead of falling back, and parses these headers
    # fast enough without one.
    return()
  endif()
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/weft_test_pch.cc CONTENT "// GoogleTest's precompiled headers (cmake/weft.cmake)\n")
  add_executable(weft_test_pch ${CMAKE_BINARY_DIR}/weft_test_pch.cc)
  target_link_libraries(weft_test_pch PRIVATE GTest::gtest_main GTest::gmock)
  weft_test_compile_options(weft_test_pch)
  target_precompile_headers(weft_test_pch PRIVATE <gtest/gtest.h> <gmock/gmock.h>)
  # GCC says so for every such source otherwise (-Winvalid-pch, which CMake adds): expected, not worth a warning.
  set(CMAKE_CXX_COMPILE_OPTIONS_INVALID_PCH "" PARENT_SCOPE)
endfunction()

# weft_test(NAME SOURCES... LIBS ...): one gtest binary registered with ctest.
function(weft_test name)
  if(NOT WEFT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "COST" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gmock)
  weft_test_compile_options(${name})
  # A test of several sources compiles as one: they include the same heavy headers (Beast, gRPC, the parts under
  # test), which are then parsed once per test instead of once per source.
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON)
  if(TARGET weft_test_pch)
    target_precompile_headers(${name} REUSE_FROM weft_test_pch)
  endif()
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "WEFT_SOURCE_DIR=${PROJECT_SOURCE_DIR}" TIMEOUT 600)
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  # COST: about how many seconds the test takes at its slowest (sanitized). ctest -j starts the costliest first; on a
  # fresh clone it has no timings of its own, and a long test started last runs alone at the end of the stage.
  if(ARG_COST)
    set_tests_properties(${name} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

# weft_plain_generated_code(TARGET): in builds with AddressSanitizer or libFuzzer, compiles TARGET (protoc's generated
# code) without the sanitizers' and the fuzzer's instrumentation and without debug info, as libprotobuf itself is
# built: a quarter of the compile time, and no code of ours left unchecked. ASan-instrumented and plain code mix
# freely. Not under ThreadSanitizer, where protobuf's headers lay some classes out differently (map_field.h).
function(weft_plain_generated_code target)
  if(NOT (WEFT_SANITIZE MATCHES "address" OR WEFT_FUZZ) OR WEFT_SANITIZE MATCHES "thread")
    return()
  endif()
  get_target_property(options ${target} COMPILE_OPTIONS)
  # The global options are generator expressions whose lists CMake splits at each ';': every piece naming a
  # sanitizer goes, the rest (-fno-omit-frame-pointer) stays harmless.
  list(FILTER options EXCLUDE REGEX "sanitize")
  list(APPEND options "-g0")
  set_target_properties(${target} PROPERTIES COMPILE_OPTIONS "${options}")
endfunction()
