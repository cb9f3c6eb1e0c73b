#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) into build/fuzz with clang, ASan and UBSan, then runs each
# for FUZZ_SECONDS seconds (default 10: about a minute for the eleven, two at a time on two cores) over its seeds
# (fuzz/corpus/<target>) and regressions (fuzz/regressions/<target>), FUZZ_JOBS at a time (default: one per core;
# FUZZ_JOBS=1 for one at a time), and prints each one's executions. Exits non-zero when
# any target found a crash, a leak, a timeout or an out-of-memory; the reproducer is printed (base64) and kept in
# build/fuzz/artifacts/<target>/. Inputs that found new coverage collect in build/fuzz/corpus/<target>.
#
# FUZZ_RUNS, when set, also stops each target after that many executions (the long run: docs/fuzzing.md).
# FUZZ_BUILD_ONLY=1 builds the targets and runs none (tools/test_all.sh builds them while other stages test).
#
# Usage: tools/fuzz.sh [target...]            every target when none is named
#        FUZZ_RUNS=10000000 FUZZ_SECONDS=3600 nice tools/fuzz.sh config_pbtxt
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-10}
runs_limit=()
[[ -n "${FUZZ_RUNS:-}" ]] && runs_limit=(-runs="$FUZZ_RUNS")
all=(http_infer_request grpc_infer_request shared_memory_registration config_pbtxt sha256sums repository_request
  content_coding trace_context credentials loadgen_replies http_request_head)
targets=("${@:-${all[@]}}")
# -use_value_profile=1: the operands of comparisons (sizes, counts) guide the mutations. With it the gRPC target
# found its wrapped byte size (fuzz/regressions/) from the seeds in 50 s; without it, not in 120 s.
# Longest input per target: a request with a few KiB of tensor data; the shared memory target's input also
# carries the object's contents (4 KiB); configs are under 2 KiB; a manifest of a few dozen lines fits in 4 KiB, and
# so does a load request with a config, and trace headers with a settings body, and a key file or JWKS of a few keys, and a model metadata reply with its flags.
declare -A max_len=([http_infer_request]=4096 [grpc_infer_request]=4096 [shared_memory_registration]=6144
  [config_pbtxt]=4096 [sha256sums]=4096 [repository_request]=4096 [content_coding]=4096 [trace_context]=4096
  [credentials]=4096 [loadgen_replies]=4096 [http_request_head]=4096)
declare -A dict=([http_infer_request]=json [grpc_infer_request]=grpc [shared_memory_registration]=json
  [config_pbtxt]=pbtxt [sha256sums]=sha256sums [repository_request]=json [content_coding]=content_coding
  [trace_context]=trace [credentials]=credentials [loadgen_replies]=loadgen [http_request_head]=http_head)

cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-16}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_FUZZ=ON -DWEFT_SANITIZE=address,undefined -DWEFT_BUILD_TESTS=OFF -DWEFT_WITH_TORCH=OFF \
  -DWEFT_WITH_OPENCV=OFF -DWEFT_WITH_CUDA=OFF >/dev/null
ninja -C build/fuzz -j"$(nproc)" weft_fuzz
[[ "${FUZZ_BUILD_ONLY:-}" == 1 ]] && exit 0

# One target's run: its log, and its summary line and exit status in build/fuzz/<target>.{summary,rc}.
run_target() {
  local t=$1
  local work=build/fuzz/corpus/$t artifacts=build/fuzz/artifacts/$t log=build/fuzz/$t.log
  rm -rf "$artifacts"
  mkdir -p "$work" "$artifacts"
  local corpora=("$work" "fuzz/corpus/$t")
  [[ -d fuzz/regressions/$t ]] && corpora+=("fuzz/regressions/$t")
  local rc=0 begin
  begin=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build/fuzz/fuzz/${t}_fuzz" -max_total_time="$seconds" "${runs_limit[@]}" -max_len="${max_len[$t]}" \
    -dict="fuzz/dict/${dict[$t]}.dict" -use_value_profile=1 -timeout=30 -rss_limit_mb=2048 -error_exitcode=77 \
    -timeout_exitcode=77 -artifact_prefix="$artifacts/" -print_final_stats=1 "${corpora[@]}" >"$log" 2>&1 || rc=$?
  local elapsed=$(($(date +%s) - begin)) runs rate corpus
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  corpus=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  printf '%-28s %10s runs in %5s s %7s exec/s  corpus %-12s %s\n' "$t" "${runs:-?}" "$elapsed" "${rate:-?}" \
    "${corpus:-?}" "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")" >"build/fuzz/$t.summary"
  echo "$rc" >"build/fuzz/$t.rc"
}

# A target runs on one thread: FUZZ_JOBS targets (default: one per core) run at once.
jobs_limit=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  [[ -n "${dict[$t]:-}" ]] || { echo "unknown target $t (${all[*]})" >&2; exit 2; }
done
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_limit)); do wait -n || true; done
  echo "=== fuzz $t: ${seconds} s"
  rm -f "build/fuzz/$t.summary" "build/fuzz/$t.rc"
  run_target "$t" &
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
  rc=$(cat "build/fuzz/$t.rc" 2>/dev/null || echo "?")
  summary+=("$(cat "build/fuzz/$t.summary" 2>/dev/null || echo "$t: no result")")
  if [[ $rc != 0 ]]; then
    failed+=("$t")
    echo "--- $t failed (exit $rc); the end of build/fuzz/$t.log:"
    tail -n 80 "build/fuzz/$t.log"
    for a in "build/fuzz/artifacts/$t"/*; do
      [[ -f "$a" ]] || continue
      echo "--- reproducer $a (replay: build/fuzz/fuzz/${t}_fuzz $a), base64:"
      base64 -w 0 "$a"
      echo
    done
  fi
done
echo "=== fuzz summary (at most ${seconds} s per target${FUZZ_RUNS:+, $FUZZ_RUNS runs})"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (reproducers under build/fuzz/artifacts/; docs/fuzzing.md says what to do)" >&2
  exit 1
fi
