#!/usr/bin/env bash
# The CI check: formatting, then a release build and a sanitized debug build, each running every test, the
# ThreadSanitizer build of the threaded core, and a bounded run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash tools/check_format.sh
bash tools/make_examples.sh
# Line tables are all the sanitizers' reports need; full debug info costs a quarter more compile time.
export WEFT_DEBUG_INFO=-g1
for preset in release asan; do
  echo "=== build $preset ($(($(date +%s) - start)) s)"
  bash tools/build.sh "$preset"
  echo "=== test $preset ($(($(date +%s) - start)) s)"
  # LeakSanitizer runs at the exit of every test and of every `weft serve` the Python tests start and stop (their
  # harness fails a test on any sanitizer report in the server's log, shutdown included).
  # detect_stack_use_after_return: GCC's runtime leaves it off; a callback that outlived its test's stack frame
  # (engine_test) was found only by clang's, which has it on.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "build/$preset" --output-on-failure -j2 --timeout 600
done
# ThreadSanitizer on the threaded core (scheduler, engine, live repository, breakers, HTTP server, rate limiter).
# libtorch, OpenCV and protobuf are not built with TSan (protobuf's headers even lay its classes out differently under
# TSan), so this build leaves them out and runs only tests that do not use them.
echo "=== build tsan ($(($(date +%s) - start)) s)"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread -DWEFT_WITH_TORCH=OFF \
  -DWEFT_WITH_OPENCV=OFF -DCMAKE_CXX_FLAGS_DEBUG="$WEFT_DEBUG_INFO" >/dev/null
tsan_tests=(scheduler_unit_test scheduler_test engine_test http_server_test device_test device_cpu_test multiplexer_test
  live_repository_test version_plan_test repository_watcher_test scheduler_oom_test scheduler_hang_test
  engine_resilience_test circuit_breaker_test tracer_test trace_context_test auth_test)
ninja -C build/tsan -j"$(nproc)" "${tsan_tests[@]}"
echo "=== test tsan ($(($(date +%s) - start)) s)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build/tsan --output-on-failure -j2 --timeout 600 \
  -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
# libFuzzer targets (clang, ASan + UBSan) over their seeds and regressions for FUZZ_SECONDS each (docs/fuzzing.md).
echo "=== fuzz ($(($(date +%s) - start)) s)"
bash tools/fuzz.sh
echo "=== done in $(($(date +%s) - start)) s"
