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

# ThreadSanitizer on the threaded core (scheduler, engine, live repository, breakers, HTTP server, rate limiter).
# libtorch, OpenCV and protobuf are not built with TSan (protobuf's headers even lay its classes out differently under
# TSan), so this build leaves them out and runs only tests that do not use them.
tsan_tests=(scheduler_unit_test scheduler_test engine_test http_server_test device_test device_cpu_test multiplexer_test
  live_repository_test version_plan_test repository_watcher_test scheduler_oom_test scheduler_hang_test
  engine_resilience_test circuit_breaker_test tracer_test trace_context_test auth_test)
build_tsan_and_fuzz() {
  cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread -DWEFT_WITH_TORCH=OFF \
    -DWEFT_WITH_OPENCV=OFF -DCMAKE_CXX_FLAGS_DEBUG="$WEFT_DEBUG_INFO" >/dev/null
  ninja -C build/tsan -j"$(nproc)" "${tsan_tests[@]}"
  FUZZ_BUILD_ONLY=1 bash tools/fuzz.sh
}

for preset in release asan; do
  echo "=== build $preset ($(($(date +%s) - start)) s)"
  bash tools/build.sh "$preset"
  if [[ $preset == release ]]; then
    # The test stages leave about half of the two cores idle (servers starting, clients waiting on them). The
    # ThreadSanitizer and fuzz builds take that idle time at the lowest priority instead of running after the
    # tests; a test's threads, at normal priority, preempt them as soon as they wake.
    echo "=== build tsan and fuzz in the background, nice 19 ($(($(date +%s) - start)) s)"
    (renice -n 19 -p "$BASHPID" >/dev/null; build_tsan_and_fuzz) >build/background_build.log 2>&1 &
    background=$!
    # A failing stage ends the script: the background builds go with it (ninja stops its compilers on SIGTERM).
    trap 'pkill -TERM -P "$background" 2>/dev/null; kill "$background" 2>/dev/null || true' EXIT
  fi
  echo "=== test $preset ($(($(date +%s) - start)) s)"
  # LeakSanitizer runs at the exit of every test and of every `weft serve` the Python tests start and stop (their
  # harness fails a test on any sanitizer report in the server's log, shutdown included).
  # detect_stack_use_after_return: GCC's runtime leaves it off; a callback that outlived its test's stack frame
  # (engine_test) was found only by clang's, which has it on.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "build/$preset" --output-on-failure -j2 --timeout 600
done

echo "=== wait for the tsan and fuzz builds ($(($(date +%s) - start)) s)"
if ! wait "$background"; then
  tail -n 100 build/background_build.log
  echo "the tsan or fuzz build failed (build/background_build.log)" >&2
  exit 1
fi
trap - EXIT
echo "=== test tsan ($(($(date +%s) - start)) s)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build/tsan --output-on-failure -j2 --timeout 600 \
  -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
# libFuzzer targets (clang, ASan + UBSan) over their seeds and regressions for FUZZ_SECONDS each (docs/fuzzing.md).
# Built above; fuzz.sh's own build step finds nothing left to do.
echo "=== fuzz ($(($(date +%s) - start)) s)"
bash tools/fuzz.sh
echo "=== done in $(($(date +%s) - start)) s"
