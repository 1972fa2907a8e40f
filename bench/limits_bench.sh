#!/usr/bin/env bash
# The machine's raw limits on the benchmark image: what reading, copying,
# hashing and (de)compressing the same bytes costs without any backup tool.
# Backup, restore and verify figures are read against these lines.
#
#   bash bench/limits_bench.sh [--quick] [--rounds N] [--size 2G] [--image PATH]
#                              [--dir DIR] [--no-cairn-benchmark]
#
#   --quick        1 round, 256 MiB image
#   --rounds N     rounds (default 3); the order of the commands reverses each round
#   --size S       image size (default 2G); --image PATH uses that file instead
#                  (read only) of generating DIR/disk-SIZE.img
#   --dir DIR      work directory (default /var/tmp/cairn-limits-bench; needs
#                  ~3x the image size free); also $CAIRN_BENCH_DIR
#   --no-cairn-benchmark  do not run `cairn benchmark --json` (and the
#                  chunker micro-benchmark)
#
# Rows (tool "raw"; MiB/s = image bytes ÷ wall-clock seconds):
#   cat          cat IMG > /dev/null                 read limit (page cache)
#   cp+fsync     cp IMG COPY && sync COPY            write limit
#   sha256sum    sha256sum IMG                       coreutils, one core
#   sha256-1     openssl dgst -sha256 IMG            OpenSSL (SHA-NI where the CPU has it), one core
#   sha256-all   nproc × openssl dgst -sha256, each over its 1/nproc slice of IMG
#                (slices cut into DIR beforehand, untimed)
#   zstd-1       zstd -1 -c IMG > /dev/null          one thread (cairn's level)
#   zstd-1-all   zstd -1 -T0 -c IMG > /dev/null      all cores
#   unzstd       zstd -d -c IMG.zst > /dev/null      decompress the same image, one thread
# Once per run, when the binary has them: `cairn benchmark --json` (per-core
# and all-core rates of every stage of the chunk path) into
# DIR/cairn-benchmark.json, and `cairn-micro-bench --benchmark_filter=BM_Chunker`
# into DIR/micro-bench.json.
#
# Raw timings: DIR/results.tsv (bench/lib.sh's columns); table:
# DIR/limits_bench.md (also printed).
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=limits_bench
source bench/lib.sh

command_line="bash bench/limits_bench.sh${*:+ $*}"
rounds=3
size=2G
image=
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-limits-bench}
with_cairn_benchmark=1
rounds_given=0
usage() { sed -n '6,31p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) size=256M; ((rounds_given)) || rounds=1; shift ;;
    --rounds) rounds=$2; rounds_given=1; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --no-cairn-benchmark) with_cairn_benchmark=0; shift ;;
    -h|--help) usage ;;
    *) echo "limits_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "limits_bench: --rounds must be a positive number" >&2; exit 2; }

apt_install time python3 coreutils zstd openssl
bench_bins
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
[[ -n $image ]] || { image=$dir/disk-$size.img; ensure_image "$image" "$size"; }
image=$(realpath "$image")
bytes=$(stat -c %s "$image")
ncpu=$(nproc)
results=$dir/results.tsv
results_header >"$results"
stamp_results "$dir"

say "cutting the image into $ncpu slices and compressing it once (untimed)"
slices=()
part=$(((bytes + ncpu - 1) / ncpu))
for ((i = 0; i < ncpu; i++)); do
  slices+=("$dir/slice-$i")
  dd if="$image" of="$dir/slice-$i" iflag=skip_bytes,count_bytes skip=$((i * part)) count="$part" \
    bs=4M status=none
done
zstd -1 -q -f -c "$image" >"$dir/image.zst"
zst_bytes=$(stat -c %s "$dir/image.zst")

copy_and_sync() { cp "$1" "$2" && sync "$2"; }
# sha_all SLICE...: OpenSSL SHA-256 of each slice file, all at once (one
# process per core; the slices were cut from the image beforehand, untimed).
sha_all() {
  local f
  for f in "$@"; do openssl dgst -sha256 "$f" >/dev/null & done
  wait
}
export -f copy_and_sync sha_all

one() {  # one ROUND OP
  local r=$1
  case $2 in
    cat) measure "$r" image raw cat "$bytes" bash -c 'cat "$1" >/dev/null' _ "$image" ;;
    cp+fsync)
      rm -f "$dir/copy.img"
      measure "$r" image raw cp+fsync "$bytes" bash -c 'copy_and_sync "$1" "$2"' _ "$image" "$dir/copy.img"
      rm -f "$dir/copy.img" ;;
    sha256sum) measure "$r" image raw sha256sum "$bytes" sha256sum "$image" ;;
    sha256-1) measure "$r" image raw sha256-1 "$bytes" openssl dgst -sha256 "$image" ;;
    sha256-all)
      measure "$r" image raw sha256-all "$bytes" bash -c 'sha_all "$@"' _ "${slices[@]}" ;;
    zstd-1) measure "$r" image raw zstd-1 "$bytes" bash -c 'zstd -1 -q -c "$1" >/dev/null' _ "$image" ;;
    zstd-1-all)
      measure "$r" image raw zstd-1-all "$bytes" bash -c 'zstd -1 -T0 -q -c "$1" >/dev/null' _ "$image" ;;
    unzstd)
      measure "$r" image raw unzstd "$bytes" bash -c 'zstd -d -q -c "$1" >/dev/null' _ "$dir/image.zst" ;;
  esac
}

ops=(cat cp+fsync sha256sum sha256-1 sha256-all zstd-1 zstd-1-all unzstd)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
cat "$image" >/dev/null  # warm the cache
say "benchmark: $rounds round(s), image $image ($bytes bytes), work dir $dir"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  while read -r op; do one "$r" "$op"; done < <(in_order "$r" "${ops[@]}")
done
rm -f "$dir/cairn-benchmark.json" "$dir/micro-bench.json"
if ((with_cairn_benchmark)); then
  if "$cairn" --help 2>&1 | grep -qE '^ +benchmark '; then
    secs=1
    [[ $rounds == 1 ]] && secs=0.3
    say "cairn benchmark --json --seconds $secs"
    "$cairn" benchmark --json --seconds "$secs" >"$dir/cairn-benchmark.json" 2>"$dir/logs/cairn-benchmark.err" ||
      { say "cairn benchmark failed (log: $dir/logs/cairn-benchmark.err)"; rm -f "$dir/cairn-benchmark.json"; }
  else
    say "this cairn has no \`benchmark\` command yet: no per-stage figures"
  fi
  micro=$(dirname "$cairn")/../bench/cairn-micro-bench
  [[ -n ${CAIRN_MICRO:-} ]] && micro=$CAIRN_MICRO
  if [[ -x $micro ]]; then
    say "cairn-micro-bench (chunker, SHA-256; one core)"
    "$micro" --benchmark_filter='BM_(Chunker|Sha256)$' --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_format=json \
      >"$dir/micro-bench.json" 2>"$dir/logs/micro-bench.err" || rm -f "$dir/micro-bench.json"
  fi
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
rm -f "${slices[@]}"

table=$(python3 - "$results" "$dir" <<'PY'
import collections, json, os, statistics, sys
MIB = 1 << 20
lines = open(sys.argv[1]).read().splitlines()
header = lines[0].split("\t")
rows = [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
notes = {
    "cat": "`cat IMG > /dev/null` (read, page cache)",
    "cp+fsync": "`cp IMG COPY && sync COPY` (write limit)",
    "sha256sum": "`sha256sum IMG` (coreutils, one core)",
    "sha256-1": "`openssl dgst -sha256 IMG` (one core)",
    "sha256-all": "`openssl dgst -sha256` on every core at once, one slice of IMG each",
    "zstd-1": "`zstd -1` compress, one thread",
    "zstd-1-all": "`zstd -1 -T0` compress, all cores",
    "unzstd": "`zstd -d` of the same image, one thread",
}
by = collections.OrderedDict()
for r in rows:
    by.setdefault(r["op"], []).append(r)
print("| limit | command | median MiB/s | min – max MiB/s | median s | peak RSS MiB |")
print("|---|---|---:|---:|---:|---:|")
for op in notes:
    v = by.get(op)
    if not v:
        continue
    rates = [int(r["bytes"]) / MIB / float(r["seconds"]) for r in v]
    print(f"| {op} | {notes[op]} | {statistics.median(rates):.0f} | {min(rates):.0f} – {max(rates):.0f} | "
          f"{statistics.median(float(r['seconds']) for r in v):.2f} | "
          f"{max(int(r['rss_kib']) for r in v) / 1024:.0f} |")
bench = os.path.join(sys.argv[2], "cairn-benchmark.json")
if os.path.exists(bench):
    j = json.load(open(bench))
    print()
    print(f"`cairn benchmark --json` ({j.get('threads')} threads for all cores; MB/s = 10^6 bytes/s):")
    print()
    print("| stage | per core MB/s | all cores MB/s | PBS reference MB/s | note |")
    print("|---|---:|---:|---:|---|")
    f = lambda x: "–" if x is None else f"{x:.0f}"
    for row in j.get("rows", []):
        print(f"| {row['name']} | {f(row.get('per_core_mb_s'))} | {f(row.get('all_cores_mb_s'))} | "
              f"{f(row.get('pbs_reference_mb_s'))} | {row.get('note', '')} |")
micro = os.path.join(sys.argv[2], "micro-bench.json")
if os.path.exists(micro):
    j = json.load(open(micro))
    cells = []
    for b in j.get("benchmarks", []):
        if b.get("aggregate_name") == "median" and "bytes_per_second" in b:
            cells.append(f"{b['run_name']} {b['bytes_per_second'] / 2**30:.2f} GiB/s")
    if cells:
        print()
        print("`cairn-micro-bench` (one core, median of 3): " + "; ".join(cells) + ".")
PY
)
section=$(
  echo "### Raw limits of this machine"
  echo
  echo "Latest run: \`$command_line\` ($rounds round(s), $bytes-byte image from \`cairn-gendata\`, warm cache, medians)"
  echo
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end"
  echo "- versions: $(zstd --version | grep -o 'v[0-9.]*' | head -n1 | sed 's/^/zstd /'); $(openssl version | cut -d' ' -f1-2); $(sha256sum --version | head -n1)"
  echo "- the image compresses to $((zst_bytes >> 20)) MiB with \`zstd -1\`"
  echo
  echo "$table"
)
printf '%s\n' "$section" >"$dir/limits_bench.md"
echo
echo "$section"
say "tables written to $dir/limits_bench.md"
