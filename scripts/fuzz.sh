#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 20) from
# fresh seed corpora and the corpus kept in the repo (fuzz/corpus/<target>/).
# They live in the sanitizer tree (cmake --preset asan-ubsan →
# build/asan-ubsan: clang, ASan + UBSan + libFuzzer's coverage, shared with
# the sanitizer tests, so CI compiles the sources once for both). Exits
# non-zero when a target crashes, leaks, trips a sanitizer or an invariant;
# the reproducer is left in build/asan-ubsan/artifacts/<target>/.
#
#   scripts/fuzz.sh [--no-build] [SECONDS]
#   scripts/fuzz.sh [--no-build] --minutes N
#
# --no-build: the targets are already built (scripts/test.sh builds the tree).
# --minutes N: the long form (issue 29): every target N minutes; what it
#   found that adds coverage is merged into fuzz/corpus/<target>/ (libFuzzer
#   -merge=1: only inputs that reach new code; commit them, so that every
#   later run, CI's short ones too, starts from there), and a failing input
#   is copied to fuzz/regressions/<target>/ (replayed first by every run:
#   commit it with the fix). Ends with one line per target: executions, new
#   units, coverage, corpus files before and after
#   (docs/BENCHMARKS.md, "Fuzzing").
# CAIRN_FUZZ_BUILD=DIR: another sanitizer tree's targets (default
#   build/asan-ubsan); CAIRN_FUZZ_JOBS: targets side by side (default: cores);
#   CAIRN_FUZZ_TARGETS="NAME …": only those targets.
#
# Needs clang and libFuzzer: apt-get install -y clang libclang-rt-14-dev libfuzzer-14-dev
set -euo pipefail

usage() {
  echo "usage: $0 [--no-build] [SECONDS | --minutes N]" >&2
  exit 2
}
build_first=1
seconds=20
long=0
while (($#)); do
  case $1 in
    --no-build) build_first=0; shift ;;
    --minutes)
      [[ "${2:-}" =~ ^[0-9]+$ ]] && [[ "$2" -ge 1 ]] || usage
      seconds=$(($2 * 60))
      long=1
      shift 2
      ;;
    *)
      [[ "$1" =~ ^[0-9]+$ ]] && [[ "$1" -ge 1 ]] || usage
      seconds=$1
      shift
      ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${CAIRN_FUZZ_BUILD:-$root/build/asan-ubsan}"
jobs="${CAIRN_FUZZ_BUILD_JOBS:-$(nproc)}"

if ((build_first)); then
  cmake --preset asan-ubsan >/dev/null
  cmake --build "$build" -j "$jobs" --target blob_fuzz fixed_index_fuzz manifest_fuzz ledger_fuzz \
    dynamic_index_fuzz tree_fuzz key_file_fuzz http_request_fuzz chunk_frames_fuzz http_body_fuzz \
    s3_xml_fuzz nbd_session_fuzz overlay_header_fuzz fuzz_seeds
fi

# Fresh seeds from the current encoders; the corpora grow in build/asan-ubsan/corpus
# across runs (new inputs found are kept there; only --minutes merges what
# adds coverage into the source tree's fuzz/corpus).
"$build/fuzz/fuzz_seeds" "$build/corpus"

# target:max_len:extra flags. The fixed index needs its 4096-byte header
# plus room for digests; blobs and manifests stay small so runs are fast; a
# ledger input of 4096 bytes spans many of ledger_fuzz's small read blocks.
# An HTTP input of 32 KiB holds a header over the server's 16 KiB limit; a
# chunk answer of 8192 bytes holds several frames over chunk_frames_fuzz's
# 4096-byte payload maximum; a response body of 8192 bytes, several chunks.
targets=(
  "blob_fuzz:4096:"
  "fixed_index_fuzz:8192:"
  "manifest_fuzz:4096:-dict=$root/fuzz/manifest.dict"
  "ledger_fuzz:4096:-dict=$root/fuzz/ledger.dict"
  "dynamic_index_fuzz:8192:"
  "tree_fuzz:4096:"
  "key_file_fuzz:2048:-dict=$root/fuzz/key_file.dict"
  "http_request_fuzz:32768:-dict=$root/fuzz/http_request.dict"
  "chunk_frames_fuzz:8192:"
  "http_body_fuzz:8192:"
  "s3_xml_fuzz:4096:-dict=$root/fuzz/s3_xml.dict"
  "nbd_session_fuzz:4096:-dict=$root/fuzz/nbd.dict"
  "overlay_header_fuzz:8192:"
)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs one target: its regression inputs, then SECONDS of fuzzing. Prints
# its report when done (targets run side by side, one per core, so their
# output is kept apart) and returns non-zero on a finding.
run_target() {
  local name=$1 max_len=$2 extra=$3
  local corpus="$build/corpus/$name" artifacts="$build/artifacts/$name"
  local kept="$root/fuzz/corpus/$name"
  mkdir -p "$corpus" "$artifacts" "$kept"
  # Inputs that once failed (fuzz/regressions/<target>/) are replayed first.
  local regressions="$root/fuzz/regressions/$name"
  if [[ -d "$regressions" ]] && compgen -G "$regressions/*" >/dev/null; then
    echo "== $name: replaying $(find "$regressions" -type f | wc -l) regression input(s)"
    if ! "$build/fuzz/$name" "$regressions"/* >"$build/$name.regressions.log" 2>&1; then
      echo "!! $name FAILED on a regression input; last lines of $build/$name.regressions.log:"
      tail -n 40 "$build/$name.regressions.log"
      return 1
    fi
  fi
  local kept_before
  kept_before=$(find "$kept" -type f | wc -l)
  echo "== $name: ${seconds}s, max_len $max_len, $kept_before input(s) in fuzz/corpus"
  # New inputs go to the first directory (the build's); the kept corpus is
  # read only.
  # shellcheck disable=SC2086  # $extra is empty or one flag
  if ! "$build/fuzz/$name" "$corpus" "$kept" $extra \
      -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 >"$build/$name.log" 2>&1; then
    echo "!! $name FAILED; last lines of $build/$name.log:"
    tail -n 40 "$build/$name.log"
    ls -l "$artifacts" || true
    if ((long)); then
      # Crashes, leaks and memory blow-ups are kept; a timeout may be a
      # starved machine (rerun the target alone to tell it from a hang).
      mkdir -p "$regressions"
      local f
      for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/oom-*; do
        [[ -f $f ]] && cp "$f" "$regressions"/ &&
          echo "!! $name: $(basename "$f") copied to fuzz/regressions/$name/ (commit it with the fix)"
      done
    fi
    return 1
  fi
  grep -E "^(stat::number_of_executed_units|stat::new_units_added):" "$build/$name.log" || true
  if ((long)); then
    # What adds coverage joins the kept corpus.
    "$build/fuzz/$name" -merge=1 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      "$kept" "$corpus" >"$build/$name.merge.log" 2>&1 ||
      { echo "!! $name: merging into fuzz/corpus failed:"; tail -n 20 "$build/$name.merge.log"; return 1; }
    local execs new cov
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$name.log")
    new=$(sed -n 's/^stat::new_units_added: *//p' "$build/$name.log")
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$build/$name.log" | tail -1)
    echo "summary $name: ${seconds}s, ${execs:-?} executions, ${new:-?} new units, ${cov:-cov: ?}," \
      "fuzz/corpus $kept_before -> $(find "$kept" -type f | wc -l) inputs"
  fi
}

# One target per core at a time (each libFuzzer process is single-threaded).
parallel="${CAIRN_FUZZ_JOBS:-$(nproc)}"
failed=()
pids=()
names=()
reap() {  # waits for the oldest running target
  local out="$build/${names[0]}.report"
  if ! wait "${pids[0]}"; then failed+=("${names[0]}"); fi
  cat "$out"
  rm -f "$out"
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for spec in "${targets[@]}"; do
  IFS=: read -r name max_len extra <<<"$spec"
  # CAIRN_FUZZ_TARGETS="a b": only those.
  [[ -z ${CAIRN_FUZZ_TARGETS:-} || " $CAIRN_FUZZ_TARGETS " == *" $name "* ]] || continue
  ((${#pids[@]} >= parallel)) && reap
  run_target "$name" "$max_len" "$extra" >"$build/$name.report" 2>&1 &
  pids+=($!)
  names+=("$name")
done
while ((${#pids[@]})); do reap; done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a finding"
