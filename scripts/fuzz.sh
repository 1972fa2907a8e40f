#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 20) from
# fresh seed corpora. They live in the sanitizer tree (cmake --preset
# asan-ubsan → build/asan-ubsan: clang, ASan + UBSan + libFuzzer's coverage,
# shared with the sanitizer tests, so CI compiles the sources once for both).
# Exits non-zero when a target crashes, leaks, trips a sanitizer or an
# invariant; the reproducer is left in build/asan-ubsan/artifacts/<target>/.
#
#   scripts/fuzz.sh [--no-build] [SECONDS]
#
# --no-build: the targets are already built (scripts/test.sh builds the tree).
#
# Needs clang and libFuzzer: apt-get install -y clang libclang-rt-14-dev libfuzzer-14-dev
set -euo pipefail

build_first=1
if [[ "${1:-}" == "--no-build" ]]; then
  build_first=0
  shift
fi
seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [--no-build] [SECONDS]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build/asan-ubsan"
jobs="${CAIRN_FUZZ_BUILD_JOBS:-$(nproc)}"

if ((build_first)); then
  cmake --preset asan-ubsan >/dev/null
  cmake --build "$build" -j "$jobs" --target blob_fuzz fixed_index_fuzz manifest_fuzz ledger_fuzz \
    dynamic_index_fuzz tree_fuzz key_file_fuzz http_request_fuzz chunk_frames_fuzz s3_xml_fuzz \
    fuzz_seeds
fi

# Fresh seeds from the current encoders; the corpora grow in build/asan-ubsan/corpus
# across runs (new inputs found are kept there, never in the source tree).
"$build/fuzz/fuzz_seeds" "$build/corpus"

# target:max_len:extra flags. The fixed index needs its 4096-byte header
# plus room for digests; blobs and manifests stay small so runs are fast; a
# ledger input of 4096 bytes spans many of ledger_fuzz's small read blocks.
# An HTTP input of 32 KiB holds a header over the server's 16 KiB limit; a
# chunk answer of 8192 bytes holds several frames over chunk_frames_fuzz's
# 4096-byte payload maximum.
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
  "s3_xml_fuzz:4096:-dict=$root/fuzz/s3_xml.dict"
)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs one target: its regression inputs, then SECONDS of fuzzing. Prints
# its report when done (targets run side by side, one per core, so their
# output is kept apart) and returns non-zero on a finding.
run_target() {
  local name=$1 max_len=$2 extra=$3
  local corpus="$build/corpus/$name" artifacts="$build/artifacts/$name"
  mkdir -p "$corpus" "$artifacts"
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
  echo "== $name: ${seconds}s, max_len $max_len"
  # shellcheck disable=SC2086  # $extra is empty or one flag
  if ! "$build/fuzz/$name" "$corpus" $extra \
      -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 >"$build/$name.log" 2>&1; then
    echo "!! $name FAILED; last lines of $build/$name.log:"
    tail -n 40 "$build/$name.log"
    ls -l "$artifacts" || true
    return 1
  fi
  grep -E "^(stat::number_of_executed_units|stat::new_units_added):" "$build/$name.log" || true
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
