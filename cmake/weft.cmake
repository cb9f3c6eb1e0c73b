# weft_test(NAME SOURCES... LIBS ...): one gtest binary registered with ctest.
function(weft_test name)
  if(NOT WEFT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "WEFT_SOURCE_DIR=${PROJECT_SOURCE_DIR}" TIMEOUT 600)
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
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
