#!/usr/bin/env bash
# Garbage collection benchmark: `cairn gc` on a datastore of N tiny distinct
# chunks (cairn-synth-store: one snapshot, 64 KiB chunks that compress to a
# few dozen bytes, so the cost is gc's: index reads, readdir, stat, rename,
# unlink), on one thread and on the default number (cores, at least 4).
#
#   bash bench/gc_bench.sh [--chunks N] [--rounds R] [--dir DIR] [--keep]
#                          [--mark-refs M]
#
#   --chunks N   distinct chunks in the store (default 500000; ~4.5 KiB of
#                disk each, and the script holds two copies: ~10 KiB each)
#   --rounds R   rounds (default 3); each round runs every case once, the
#                order of single and parallel alternating; medians are reported
#   --dir DIR    work directory (also $CAIRN_BENCH_DIR; default
#                /dev/shm/cairn-gc-bench when /dev/shm has room, else
#                /var/tmp/cairn-gc-bench); the file system it is on is what is
#                measured: tmpfs shows gc's own cost, a disk file system adds
#                its metadata latency (unlink dominates, see docs/BENCHMARKS.md)
#   --keep       keep the base store in DIR for the next run (same N)
#   --mark-refs M  also measure gc's mark phase alone on M chunk references
#                (default 10000000, the gc issue's 10 M; 0: skip): a store
#                made by `cairn-synth-store write --index-only` (one snapshot,
#                an index of M distinct ids, no chunk files: 32 bytes of index
#                a reference), `cairn gc --grace 0 --json` once per round:
#                its mark seconds and peak RSS (the compact set of marked ids)
#
# Cases, each `cairn gc --grace 0 --json` on a warm page cache:
#   garbage  the snapshot is forgotten, every chunk is garbage: mark reads
#            nothing, the sweep stats, renames and (at the end) deletes all N.
#            Each run gets a fresh `cp -a` of the base store and a `cairn
#            forget` of its snapshot (both untimed).
#   live     every chunk referenced: mark reads N digests, the sweep lists
#            every directory and removes nothing (the store does not change,
#            so all rounds share one copy).
# Every run is checked: garbage removes exactly N chunks, live removes none
# and finds N in use; otherwise the script fails.
#
# The cairn binary is $CAIRN_BIN if set, else build/release/src/cairn;
# cairn-synth-store is $CAIRN_SYNTH, else next to $CAIRN_BIN
# (BUILD/bench/cairn-synth-store), else build/release's. The release preset is
# configured and built when a binary is missing. Peak RSS needs /usr/bin/time
# (Debian package `time`); without it that column says "-".
#
# Prints a Markdown table (medians over the rounds) with the machine details;
# raw results go to DIR/results.tsv, each command's output to DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=gc_bench
source bench/lib.sh  # stamp_results, commit_of; the helpers defined below override its own
root=$PWD

command_line="bash bench/gc_bench.sh${*:+ $*}"
[[ -n ${CAIRN_BIN:-} ]] && command_line="CAIRN_BIN=$CAIRN_BIN $command_line"
chunks=500000
rounds=3
dir=${CAIRN_BENCH_DIR:-}
keep=0
mark_refs=10000000
usage() { sed -n '2,45p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --chunks) chunks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --mark-refs) mark_refs=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "gc_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $chunks =~ ^[1-9][0-9]*$ ]] || { echo "gc_bench: --chunks must be a positive number" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "gc_bench: --rounds must be a positive number" >&2; exit 2; }
[[ $mark_refs =~ ^[0-9]+$ ]] || { echo "gc_bench: --mark-refs must be a number" >&2; exit 2; }

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'gc_bench: FAILED: %s\n' "$*" >&2; exit 1; }

# --- binaries ---------------------------------------------------------------
if [[ -n ${CAIRN_BIN:-} && -z ${CAIRN_SYNTH:-} && -x $(dirname "$CAIRN_BIN")/../bench/cairn-synth-store ]]; then
  CAIRN_SYNTH=$(dirname "$CAIRN_BIN")/../bench/cairn-synth-store
fi
cairn=${CAIRN_BIN:-$root/build/release/src/cairn}
synth=${CAIRN_SYNTH:-$root/build/release/bench/cairn-synth-store}
if [[ ! -x $cairn || ! -x $synth ]]; then
  say "building the release preset (build/release)"
  [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
  cmake --build build/release --target cairn cairn-synth-store >/dev/null
fi
cairn=$(realpath "$cairn")
synth=$(realpath "$synth")
[[ -x $cairn ]] || die "no cairn binary at $cairn"
[[ -x $synth ]] || die "no cairn-synth-store binary at $synth"
command -v python3 >/dev/null || die "python3 is needed to read the JSON reports"
timer=()
[[ -x /usr/bin/time ]] && timer=(/usr/bin/time -v)

# JSON field(s) of a file: json_get FILE EXPR (EXPR uses j).
json_get() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# --- stores -----------------------------------------------------------------
need_kib=$((chunks * 10))
if [[ -z $dir ]]; then
  dir=/var/tmp/cairn-gc-bench
  shm_free=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')
  ((${shm_free:-0} > need_kib * 2)) && dir=/dev/shm/cairn-gc-bench
fi
mkdir -p "$dir/logs"
dir=$(realpath "$dir")
free_kib=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
((free_kib > need_kib)) || die "$dir has $((free_kib / 1024)) MiB free, needs ~$((need_kib / 1024)) MiB"
live=$dir/live-$chunks
work=$dir/work
rm -rf "$work"
if [[ ! -f $live/.bench-done ]]; then
  rm -rf "$live"
  say "making a store of $chunks distinct chunks (cairn-synth-store write)"
  "$synth" write "$live" --chunks "$chunks" >"$dir/logs/synth.json"
  cp "$dir/logs/synth.json" "$live/.bench-done"
fi
snapshot=$(json_get "$live/.bench-done" 'j["snapshot"]')
refs=$dir/refs-$mark_refs
if ((mark_refs > 0)) && [[ ! -f $refs/.bench-done ]]; then
  rm -rf "$refs"
  say "making an index of $mark_refs chunk references, no chunks (cairn-synth-store write --index-only)"
  "$synth" write "$refs" --chunks "$mark_refs" --index-only >"$dir/logs/synth-refs.json"
  cp "$dir/logs/synth-refs.json" "$refs/.bench-done"
fi

# --- runs -------------------------------------------------------------------
results=$dir/results.tsv
printf 'round\tcase\tthreads\twall_s\tmark_s\tsweep_s\tchunk_files\tremoved\tpeak_rss_kib\n' >"$results"
stamp_results "$dir"

# run_gc ROUND CASE THREADS STORE: one timed gc, checked, appended to results.
run_gc() {
  local round=$1 case=$2 threads=$3 store=$4 log=$dir/logs/$1-$2-$3
  local args=(gc -r "$store" --grace 0 --json)
  [[ $threads != default ]] && args+=(--threads "$threads")
  sync
  local t0 t1
  t0=$(date +%s.%N)
  if ((${#timer[@]})); then
    "${timer[@]}" -o "$log.time" "$cairn" "${args[@]}" >"$log.json" 2>"$log.err" || die "gc failed: $(cat "$log.err")"
  else
    "$cairn" "${args[@]}" >"$log.json" 2>"$log.err" || die "gc failed: $(cat "$log.err")"
  fi
  t1=$(date +%s.%N)
  local removed in_use files mark sweep used rss=-
  removed=$(json_get "$log.json" 'j["removed_chunks"]')
  in_use=$(json_get "$log.json" 'j["in_use_chunks"]')
  files=$(json_get "$log.json" 'j["chunk_files"]')
  mark=$(json_get "$log.json" 'j["mark_seconds"]')
  sweep=$(json_get "$log.json" 'j["sweep_seconds"]')
  used=$(json_get "$log.json" 'j["threads"]')
  if [[ $case == garbage ]]; then
    ((removed == chunks)) || die "$case run removed $removed chunks, not $chunks ($log.json)"
  else
    ((removed == 0 && in_use == chunks)) || die "$case run removed $removed, found $in_use in use ($log.json)"
  fi
  [[ -f $log.time ]] && rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log.time")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$case" "$used" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" "$mark" "$sweep" "$files" "$removed" "$rss" >>"$results"
  say "round $round: $case, $used threads: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"
}

# mark_gc ROUND: gc on the index-only store, its mark phase measured.
marks=$dir/mark.tsv
printf 'round\trefs\tthreads\twall_s\tmark_s\tpeak_rss_kib\treferenced\n' >"$marks"
mark_gc() {
  local log=$dir/logs/$1-mark rss=- t0 t1
  t0=$(date +%s.%N)
  "${timer[@]}" ${timer:+-o "$log.time"} "$cairn" gc -r "$refs" --grace 0 --json >"$log.json" 2>"$log.err" ||
    die "gc failed: $(cat "$log.err")"
  t1=$(date +%s.%N)
  [[ -f $log.time ]] && rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log.time")
  local removed
  removed=$(json_get "$log.json" 'j["removed_chunks"]')
  ((removed == 0)) || die "gc of the index-only store removed $removed chunks ($log.json)"
  [[ $(json_get "$log.json" 'j["referenced_chunks"]') == "$mark_refs" ]] ||
    die "gc marked $(json_get "$log.json" 'j["referenced_chunks"]') chunks, not $mark_refs ($log.json)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$mark_refs" "$(json_get "$log.json" 'j["threads"]')" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" "$(json_get "$log.json" 'j["mark_seconds"]')" \
    "$rss" "$(json_get "$log.json" 'j["referenced_chunks"]')" >>"$marks"
  say "round $1: mark of $mark_refs references: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s, peak RSS ${rss} KiB"
}

for ((r = 1; r <= rounds; r++)); do
  order=(1 default)
  ((r % 2 == 0)) && order=(default 1)
  for threads in "${order[@]}"; do
    rm -rf "$work"
    cp -a "$live" "$work"
    "$cairn" forget -r "$work" "$snapshot" >"$dir/logs/forget.log"
    run_gc "$r" garbage "$threads" "$work"
    rm -rf "$work"
  done
  for threads in "${order[@]}"; do
    run_gc "$r" live "$threads" "$live"
  done
  ((mark_refs > 0)) && mark_gc "$r"
done
((keep)) || rm -rf "$live" "$refs"

# --- report -----------------------------------------------------------------
fs_type=$(df -PT "$dir" | awk 'NR==2 {print $2}')
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
python3 - "$results" "$chunks" "$rounds" "$(nproc)" "$fs_type" "$cpu" "$command_line" "$dir" "$marks" <<'EOF'
import csv, os, statistics, sys
path, chunks, rounds, ncpu, fs, cpu, cmd, d, marks = sys.argv[1:]
rows = list(csv.DictReader(open(path), delimiter="\t"))
def med(case, threads, key):
    v = [float(r[key]) for r in rows if r["case"] == case and r["threads"] == threads and r[key] != "-"]
    return statistics.median(v) if v else None
print(f"gc of a store of {int(chunks):,} chunks, median of {rounds} rounds; "
      f"{ncpu} CPUs ({cpu}), {fs} ({d}), warm page cache")
print()
print("| case | threads | wall s | mark s | sweep s | chunk files/s | peak RSS MiB | parallel speed-up |")
print("|---|---|---|---|---|---|---|---|")
for case in ("garbage", "live"):
    threads = sorted({r["threads"] for r in rows if r["case"] == case}, key=int)
    single = med(case, "1", "wall_s")
    for t in threads:
        wall = med(case, t, "wall_s")
        rss = med(case, t, "peak_rss_kib")
        speed = f"{single / wall:.2f}x" if t != "1" and single else "-"
        print(f"| {case} | {t} | {wall:.2f} | {med(case, t, 'mark_s'):.2f} | "
              f"{med(case, t, 'sweep_s'):.2f} | {int(chunks) / wall:,.0f} | "
              f"{'-' if rss is None else f'{rss / 1024:.0f}'} | {speed} |")
print()
print("garbage: every chunk unreferenced (snapshot forgotten): all removed; "
      "live: every chunk referenced: none removed.")
m = list(csv.DictReader(open(marks), delimiter="\t")) if os.path.exists(marks) else []
if m:
    refs = int(m[0]["refs"])
    mk = statistics.median(float(r["mark_s"]) for r in m)
    rss = [float(r["peak_rss_kib"]) for r in m if r["peak_rss_kib"] != "-"]
    rss = statistics.median(rss) * 1024 if rss else None
    print()
    print(f"Mark phase alone on {refs:,} chunk references (an index-only store: "
          f"`cairn-synth-store write --index-only`), median of {len(m)}: mark {mk:.2f} s "
          f"({refs / mk / 1e6:.1f} M references/s), peak RSS "
          + (f"{rss / 2**20:.0f} MiB ({rss / refs:.1f} bytes a reference, the whole process)" if rss else "-")
          + ".")
print(f"Reproduce: `{cmd}`")
EOF
