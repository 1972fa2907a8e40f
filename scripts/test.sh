#!/usr/bin/env bash
# Sets up and runs every test: installs dependencies, then
#   1. release build: unit + integration tests (ctest), with a real S3
#      server on loopback for the S3 tests (scripts/s3-server.sh)
#   2. ASan/UBSan build: the same tests (the 2 GiB case shrunk)
#   3. TSan build: the unit tests of the concurrent code (pipeline, backup,
#      store, and the server, client and their network code)
#   4. libFuzzer: each decoder's fuzz target for a short run
# and ends with one line "N passed, N failed".
#
#   bash scripts/test.sh            everything (what CI runs)
#   bash scripts/test.sh --quick    release build and tests only
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
CAIRN_WITH_FUZZ=$((1 - quick)) bash scripts/setup-deps.sh || exit 1

passed=0
failed=0
# Runs ctest in a build dir and adds its counts to the totals.
run_ctest() {
  local dir=$1; shift
  local log
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure -j2 "$@" 2>&1 | tee "$log"
  local line total bad
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [[ -z "$line" ]]; then
    failed=$((failed + 1))
  else
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    bad=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
    passed=$((passed + total - bad))
    failed=$((failed + bad))
  fi
  rm -f "$log"
}

# Each stage's heading says how long the run has taken so far, so a CI log
# shows where its minutes went.
started=$SECONDS
stage() { printf '\n=== %s (at %d s)\n' "$*" $((SECONDS - started)); }
build() {
  cmake --preset "$1" >/dev/null && cmake --build "build/$1" "${@:2}" || { failed=$((failed + 1)); return 1; }
}

# A real S3 server on loopback (Ceph RGW, scripts/s3-server.sh, docs/S3.md)
# for the S3 datastore tests, which skip without S3_ENDPOINT: started beside
# the release build, kept for the ASan stage (the S3 backend runs only in
# those tests), stopped on exit. One that already answers (started by hand)
# is used and left running. A server that cannot start counts as a failure.
s3_env=${CAIRN_S3_DIR:-/tmp/cairn-s3}/s3.env
s3_log=$(mktemp)
s3_pid=
s3_ours=0
stop_s3() {
  if [[ -n $s3_pid ]]; then
    wait "$s3_pid" && s3_ours=1
    s3_pid=
  fi
  if ((s3_ours)); then bash scripts/s3-server.sh stop >/dev/null 2>&1; fi
  rm -f "$s3_log"
}
trap stop_s3 EXIT
if bash scripts/s3-server.sh status && [[ -f $s3_env ]]; then
  echo "using the S3 server already running ($s3_env)" >"$s3_log"
else
  bash scripts/s3-server.sh start >"$s3_log" 2>&1 &
  s3_pid=$!
fi
# Waits for the server and exports S3_* (and AWS_*) for the tests.
wait_s3() {
  if [[ -n $s3_pid ]]; then
    local rc=0
    wait "$s3_pid" || rc=$?
    s3_pid=
    if ((rc != 0)); then
      echo "S3 server: could not start (exit $rc); the S3 tests will be skipped (counted as 1 failure):"
      tail -n 20 "$s3_log"
      failed=$((failed + 1))
      return 0
    fi
    s3_ours=1
  fi
  if [[ -f $s3_env ]]; then
    set -a
    . "$s3_env"
    set +a
    echo "S3 server: $S3_ENDPOINT"
  fi
}

stage "release build + tests"
build release
built=$?
wait_s3
((built == 0)) && run_ctest build/release

if ((!quick)); then
  stage "ASan/UBSan build + tests"
  build asan-ubsan && CAIRN_TEST_LARGE=0 run_ctest build/asan-ubsan

  stage "TSan build + concurrency tests"
  build tsan --target cairn_unit_tests &&
    run_ctest build/tsan -R 'Pipeline|BoundedQueue|WorkerGroup|Backup|LocalChunkStore|ImageRestore|TreeRestore|Verify|ProgressBar|PrefixSet|GcTest|Tls|Http|Net|Token|ServerConfig|RemoteUrl|TrustedServers|QueryString|ChunkFrames|TaskManager|S3Client|ConcurrencyController|ChunkCache|StreamReader|OverlayDevice|InstantDevice|NbdSession|NbdServer|SnapshotFs'

  stage "fuzz targets (20 s each)"
  if bash scripts/fuzz.sh 20; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi

printf '\n%d passed, %d failed (%d s)\n' "$passed" "$failed" $((SECONDS - started))
((failed == 0))
