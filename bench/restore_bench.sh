#!/usr/bin/env bash
# Parallel restore benchmark: cairn restore beside restic, borg and the copy
# limit; reads in flight under injected latency; peak memory against image
# size; throughput against --jobs x --cpu-workers. One generated image, one
# local datastore, warm page cache.
#
#   bash bench/restore_bench.sh [--quick] [--rounds N] [--size 2G] [--dir DIR]
#                               [--only compare,latency,rss,jobs] [--no-restic]
#                               [--no-borg] [--no-doc] [--latencies 0,1,5,20]
#                               [--jobs-list 1,2,4,8,16,32,64] [--latency-ops restore,verify]
#                               [--sparse-size 16G]
#
#   --quick        1 round on a 256 MiB image, 2 GiB sparse image (a few minutes)
#   --rounds N     rounds (default 3); in each round every section runs once and
#                  the order of the runs inside a section alternates
#   --size S       image size (default 2G)
#   --dir DIR      work directory (default /var/tmp/cairn-restore-bench, needs
#                  ~5x the image size free); also $CAIRN_BENCH_DIR
#   --only LIST    sections to run, comma-separated (default: all four)
#                    compare  cairn restore (auto, --jobs 1, --rehearse where the
#                             binary has it), cat, cat+sync, restic restore,
#                             borg extract, interleaved
#                    latency  --inject-latency 0/1/5/20 ms x --jobs auto|N
#                    rss      peak RSS: restore of the image and of a sparse image
#                    jobs     --jobs N x --cpu-workers 1,2 (and a PNG plot)
#   --no-restic, --no-borg   leave restic / borg out of the compare section
#   --no-doc       do not rewrite the restore-bench section of docs/BENCHMARKS.md
#                  (plots then go to DIR/plots/ instead of docs/img/)
#   --latencies L  injected latencies in ms (default 0,1,5,20; 0 = no flag)
#   --jobs-list L  fixed --jobs values of the latency and jobs sweeps
#                  (default 1,2,4,8,16,32,64)
#   --latency-ops L  what the latency sweep runs: restore, verify or both
#                  (default restore,verify)
#   --sparse-size S  size of the mostly-zero image of the rss section (default
#                  8x --size: 16G); it holds the image's data in 8 slices, so it
#                  takes no more disk than the image itself
#
# The cairn binary is $CAIRN_BIN if set, else build/release/src/cairn (the
# release preset is built when missing); cairn-gendata is $CAIRN_GENDATA, else
# next to $CAIRN_BIN (BUILD/bench/cairn-gendata), else build/release's.
# From a clean checkout on Debian 12, as root: installs what is missing
# (scripts/setup-deps.sh, restic, borgbackup, gnuplot-nox, time), builds,
# generates the image, runs the rounds, checks every restored file with cmp (a
# wrong byte fails the run), prints tables and writes them, with the machine
# details, between the restore-bench markers in docs/BENCHMARKS.md, plus
# docs/img/restore_jobs.png and docs/img/restore_latency.png. Raw timings stay
# in DIR/results.tsv, each command's output in DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bench_name=restore_bench
source bench/lib.sh  # json_fields; the helpers defined below override its own

command_line="bash bench/restore_bench.sh${*:+ $*}"
[[ -n ${CAIRN_BIN:-} ]] && command_line="CAIRN_BIN=$CAIRN_BIN $command_line"
rounds=3
size=2G
sparse_size=
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-restore-bench}
only=compare,latency,rss,jobs
with_restic=1
with_borg=1
write_doc=1
latencies=0,1,5,20
jobs_list=1,2,4,8,16,32,64
latency_ops=restore,verify
usage() { sed -n '7,40p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) rounds=1; size=256M; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --sparse-size) sparse_size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-restic) with_restic=0; shift ;;
    --no-borg) with_borg=0; shift ;;
    --no-doc) write_doc=0; shift ;;
    --latencies) latencies=$2; shift 2 ;;
    --jobs-list) jobs_list=$2; shift 2 ;;
    --latency-ops) latency_ops=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "restore_bench: unknown argument '$1'" >&2; usage ;;
  esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'restore_bench: FAILED: %s\n' "$*" >&2; exit 1; }

[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "restore_bench: --rounds must be a positive number" >&2; exit 2; }
declare -A want=()
IFS=, read -ra sections <<<"$only"
for s in "${sections[@]}"; do
  case $s in compare|latency|rss|jobs) want[$s]=1 ;;
    *) echo "restore_bench: --only: unknown section '$s' (compare, latency, rss, jobs)" >&2; exit 2 ;;
  esac
done
IFS=, read -ra lat_values <<<"$latencies"
IFS=, read -ra fixed_jobs <<<"$jobs_list"
IFS=, read -ra lat_ops <<<"$latency_ops"
for v in "${lat_values[@]}" "${fixed_jobs[@]}"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "restore_bench: '$v' is not a number" >&2; exit 2; }
done
for v in "${lat_ops[@]}"; do
  [[ $v == restore || $v == verify ]] || { echo "restore_bench: --latency-ops takes restore,verify" >&2; exit 2; }
done
to_bytes() { numfmt --from=iec "${1%B}" 2>/dev/null || die "cannot read size '$1'"; }
bytes_wanted=$(to_bytes "$size")
sparse_bytes=$(to_bytes "${sparse_size:-$((bytes_wanted * 8))}")
((sparse_bytes >= bytes_wanted)) || die "--sparse-size must be at least --size"
((${want[compare]:-0})) || { with_restic=0; with_borg=0; }

# --- dependencies -----------------------------------------------------------
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) -eq 0 ]] || die "missing packages ${missing[*]}; run as root or install them"
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
need_build=0
[[ -z ${CAIRN_BIN:-} ]] && need_build=1
if [[ -z ${CAIRN_GENDATA:-} && -n ${CAIRN_BIN:-} ]]; then
  guess=$(dirname "$CAIRN_BIN")/../bench/cairn-gendata
  [[ -x $guess ]] && CAIRN_GENDATA=$(realpath "$guess")
fi
[[ -z ${CAIRN_GENDATA:-} ]] && need_build=1
if ((need_build)); then
  if [[ -f scripts/setup-deps.sh ]]; then
    bash scripts/setup-deps.sh
  else
    apt_install build-essential cmake ninja-build g++ pkg-config libssl-dev libzstd-dev \
      nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libgtest-dev \
      libgmock-dev libbenchmark-dev
  fi
fi
extra=(time python3 coreutils)
((with_restic)) && extra+=(restic)
((with_borg)) && extra+=(borgbackup)
((${want[jobs]:-0} || ${want[latency]:-0})) && extra+=(gnuplot-nox)
apt_install "${extra[@]}"

# --- build ------------------------------------------------------------------
if ((need_build)); then
  say "building the release preset (build/release)"
  [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
  targets=()
  [[ -z ${CAIRN_BIN:-} ]] && targets+=(cairn)
  [[ -z ${CAIRN_GENDATA:-} ]] && targets+=(cairn-gendata)
  cmake --build build/release --target "${targets[@]}" >/dev/null
fi
cairn=$(realpath "${CAIRN_BIN:-$root/build/release/src/cairn}")
gendata=$(realpath "${CAIRN_GENDATA:-$root/build/release/bench/cairn-gendata}")
[[ -x $cairn ]] || die "no cairn binary at $cairn"
[[ -x $gendata ]] || die "no cairn-gendata binary at $gendata"

# --- data -------------------------------------------------------------------
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
free_bytes=$(df -B1 --output=avail "$dir" | tail -n1)
((free_bytes > bytes_wanted * 5)) ||
  say "warning: $dir has $((free_bytes >> 20)) MiB free; the run needs about 5x the image size"
image=$dir/disk-$size.img
if ! python3 - "$image" <<'PY'
import json, os, sys
img = sys.argv[1]
try:
    m = json.load(open(img + ".manifest.json"))
    ok = m.get("generator") == "cairn-gendata" and m.get("seed") == 1 and os.path.getsize(img) == m["size"]
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
then
  say "generating a $size image with cairn-gendata"
  "$gendata" image "$image" --size "$size" --seed 1 -q
fi
bytes=$(stat -c %s "$image")
image_sha=$(sha256sum "$image" | cut -d' ' -f1)

export RESTIC_PASSWORD=cairn-bench
export RESTIC_CACHE_DIR=$dir/restic-cache
export BORG_BASE_DIR=$dir/borg-home
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
store=$dir/cairn-store
restic_repo=$dir/restic-repo
borg_repo=$dir/borg-repo
borg_compression=zstd,1

say "backing up the image (untimed): cairn$( ((with_restic)) && echo ", restic")$( ((with_borg)) && echo ", borg")"
rm -rf "$store" "$restic_repo" "$borg_repo" "$RESTIC_CACHE_DIR" "$BORG_BASE_DIR"
"$cairn" init "$store" >/dev/null
"$cairn" backup -r "$store" --id vm/100 --json disk0.img="$image" >"$dir/logs/setup-cairn-backup.log"
if ((with_restic)); then
  restic init -q --repo "$restic_repo" >/dev/null
  restic backup -q --repo "$restic_repo" --host bench "$image" >"$dir/logs/setup-restic-backup.log"
fi
if ((with_borg)); then
  mkdir -p "$BORG_BASE_DIR"
  borg init --encryption=none "$borg_repo" >/dev/null
  # From inside $dir, so the archive holds the relative name disk-SIZE.img.
  (cd "$dir" && borg create --compression "$borg_compression" "$borg_repo::img" "$(basename "$image")") \
    >"$dir/logs/setup-borg-create.log" 2>&1
fi

# The rss section's mostly-zero image: 8 slices of the image's data, spread
# over a sparse file of --sparse-size bytes (holes in between). Slices start
# on 4 MiB boundaries, so the store dedups them against the image's chunks.
sparse=$dir/sparse-$sparse_bytes.img
if ((${want[rss]:-0})); then
  slice_mib=$((bytes / 8 / 1048576))
  step_mib=$((sparse_bytes / 8 / 1048576 / 4 * 4))
  ((slice_mib >= 1)) || die "--size is too small for the rss section"
  if [[ ! -f $sparse.done || $(cat "$sparse.done") != "$image_sha" ]]; then
    say "making a $((sparse_bytes >> 20)) MiB sparse image with $((slice_mib * 8)) MiB of data"
    rm -f "$sparse" "$sparse.done"
    truncate -s "$sparse_bytes" "$sparse"
    for ((i = 0; i < 8; i++)); do
      dd if="$image" of="$sparse" bs=1M skip=$((i * slice_mib)) seek=$((i * step_mib)) \
        count=$slice_mib conv=notrunc,sparse status=none
    done
    echo "$image_sha" >"$sparse.done"
  fi
  "$cairn" backup -r "$store" --id vm/200 --json disk0.img="$sparse" >"$dir/logs/setup-cairn-backup-sparse.log"
fi

# --- measuring --------------------------------------------------------------
results=$dir/results.tsv
printf 'round\tsection\tcase\tjobs\tcpu\tlat\tseconds\trss_kib\tbytes\tjson_s\tjobs_final\tjobs_max\tjobs_mean\n' >"$results"
stamp_results "$dir"
sync


# measure ROUND SECTION CASE JOBS CPU LAT NBYTES CMD...: times CMD (wall clock,
# peak RSS) and appends a line to results.tsv.
measure() {
  local round=$1 section=$2 case=$3 jobs=$4 cpu=$5 lat=$6 nbytes=$7
  shift 7
  local tag="r$round-$section-$case-j$jobs-c$cpu-l$lat"
  local log="$dir/logs/$tag.log" t0 t1 rss secs
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" </dev/null >"$log" 2>&1; then
    cat "$log" >&2
    die "round $round: $section $case (jobs $jobs, cpu $cpu, latency $lat) failed (log: $log)"
  fi
  t1=$(date +%s%N)
  rss=$(tail -n1 "$dir/logs/rss")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$section" "$case" "$jobs" "$cpu" \
    "$lat" "$secs" "$rss" "$nbytes" "$(json_fields "$log" seconds jobs.final jobs.max jobs.mean)" >>"$results"
  printf '   %-8s %-9s jobs %-4s cpu %-2s lat %-3s %8.2f s %8.1f MiB/s %7.1f MiB RSS\n' \
    "$section" "$case" "$jobs" "$cpu" "$lat" "$secs" \
    "$(awk -v b="$nbytes" -v s="$secs" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

# same_or_die WHAT EXPECTED GOT: a restore that wrote a wrong byte fails the run.
same_or_die() {
  cmp "$2" "$3" >/dev/null || die "$1 restored different bytes: cmp $2 $3"
}

out=$dir/restored.img
# cairn_restore ROUND SECTION CASE JOBS CPU LAT [SNAPSHOT_ID EXPECTED]
cairn_restore() {
  local r=$1 section=$2 case=$3 jobs=$4 cpu=$5 lat=$6 id=${7:-vm/100} expected=${8:-$image}
  local args=(restore -r "$store" "$id/latest" disk0.img "$out" --json)
  [[ $jobs != - ]] && args+=(--jobs "$jobs")
  [[ $cpu != - ]] && args+=(--cpu-workers "$cpu")
  [[ $lat != - && $lat != 0 ]] && args+=(--inject-latency "$lat")
  rm -f "$out"
  sync
  measure "$r" "$section" "$case" "$jobs" "$cpu" "$lat" "$(stat -c %s "$expected")" "$cairn" "${args[@]}"
  same_or_die "cairn restore ($section $case jobs $jobs cpu $cpu latency $lat)" "$expected" "$out"
  rm -f "$out"
}
cairn_verify() {  # cairn_verify ROUND JOBS LAT
  local r=$1 jobs=$2 lat=$3
  local args=(verify -r "$store" vm/100 --json --jobs "$jobs")
  [[ $lat != 0 ]] && args+=(--inject-latency "$lat")
  measure "$r" latency verify "$jobs" - "$lat" "$bytes" "$cairn" "${args[@]}"
}

# Writers: cat alone leaves the data in the page cache; cairn fsyncs; restic
# and borg do not, so their timings include a sync of the file.
cat_copy() { cat "$1" >"$2"; }
cat_sync() { cat "$1" >"$2" && sync "$2"; }
restic_restore() { restic restore -q --repo "$1" latest --target "$2" && sync "$2$3"; }
borg_extract() { cd "$2" && borg extract --sparse "$1::img" "$3" && sync "$3"; }
export -f cat_copy cat_sync restic_restore borg_extract

compare_one() {  # compare_one ROUND TOOL
  local r=$1
  case $2 in
    cairn) cairn_restore "$r" compare cairn auto - - ;;
    cairn-j1) cairn_restore "$r" compare cairn-j1 1 - - ;;
    cairn-rehearse)  # fetch, decode and check everything, write nothing
      measure "$r" compare cairn-rehearse auto - - "$bytes" "$cairn" restore -r "$store" \
        vm/100/latest disk0.img --rehearse --json ;;
    cat|cat+sync)
      rm -f "$out"; sync
      local fn=cat_copy
      [[ $2 == cat+sync ]] && fn=cat_sync
      measure "$r" compare "$2" - - - "$bytes" bash -c "$fn \"\$1\" \"\$2\"" _ "$image" "$out"
      same_or_die "$2" "$image" "$out"
      rm -f "$out" ;;
    restic)
      local target=$dir/restic-restored
      rm -rf "$target"; sync
      measure "$r" compare restic - - - "$bytes" bash -c 'restic_restore "$1" "$2" "$3"' _ \
        "$restic_repo" "$target" "$image"
      same_or_die "restic restore" "$image" "$target$image"
      rm -rf "$target" ;;
    borg)
      local target=$dir/borg-restored name
      name=$(basename "$image")
      rm -rf "$target"; mkdir -p "$target"; sync
      measure "$r" compare borg - - - "$bytes" bash -c 'borg_extract "$1" "$2" "$3"' _ \
        "$borg_repo" "$target" "$name"
      same_or_die "borg extract" "$image" "$target/$name"
      rm -rf "$target" ;;
  esac
}

# in_order ROUND ITEMS...: the items, reversed in even rounds.
in_order() {
  local r=$1
  shift
  if ((r % 2 == 0)); then
    local i
    for ((i = $#; i >= 1; i--)); do echo "${!i}"; done
  else
    printf '%s\n' "$@"
  fi
}

# `restore --rehearse` (no writes) separates the CPU side from the disk where
# the binary has it.
has_rehearse=0
"$cairn" restore --help 2>&1 | grep -q -- --rehearse && has_rehearse=1
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "benchmark: $rounds round(s), image $image ($bytes bytes), sections $only, work dir $dir"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  if ((${want[compare]:-0})); then
    say "compare"
    tools=(cairn cairn-j1 cat cat+sync)
    ((has_rehearse)) && tools+=(cairn-rehearse)
    ((with_restic)) && tools+=(restic)
    ((with_borg)) && tools+=(borg)
    while read -r t; do compare_one "$r" "$t"; done < <(in_order "$r" "${tools[@]}")
  fi
  if ((${want[latency]:-0})); then
    say "latency"
    for lat in "${lat_values[@]}"; do
      for op in "${lat_ops[@]}"; do
        while read -r j; do
          if [[ $op == restore ]]; then cairn_restore "$r" latency restore "$j" - "$lat"
          else cairn_verify "$r" "$j" "$lat"; fi
        done < <(in_order "$r" auto "${fixed_jobs[@]}")
      done
    done
  fi
  if ((${want[rss]:-0})); then
    say "rss"
    while read -r c; do
      if [[ $c == image ]]; then cairn_restore "$r" rss "image-$size" auto - -
      else cairn_restore "$r" rss "sparse-$(numfmt --to=iec --format=%.0f "$sparse_bytes")" auto - - vm/200 "$sparse"; fi
    done < <(in_order "$r" image sparse)
  fi
  if ((${want[jobs]:-0})); then
    say "jobs"
    for cpu in 1 2; do
      while read -r j; do cairn_restore "$r" jobs restore "$j" "$cpu" -; done \
        < <(in_order "$r" "${fixed_jobs[@]}")
    done
  fi
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# --- report -----------------------------------------------------------------
# The commit of the binary: its own checkout's (a worktree, an older build)
# when $CAIRN_BIN lives in one, else this checkout's; $CAIRN_BENCH_COMMIT wins.
commit_of() {
  local d=$1 c
  c=$(git -C "$d" rev-parse --short HEAD 2>/dev/null) || return 1
  [[ -n $(git -C "$d" status --porcelain --untracked-files=no -- \
    "$(git -C "$d" rev-parse --show-toplevel)/src" 2>/dev/null) ]] && c+=" (with uncommitted changes in src/)"
  echo "$c"
}
if [[ -n ${CAIRN_BENCH_COMMIT:-} ]]; then
  commit=$CAIRN_BENCH_COMMIT
else
  commit=$(commit_of "$(dirname "$cairn")" || commit_of "$root" || echo unknown)
fi
machine=$(
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $commit; binary: \`$cairn\`"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) online CPUs (nproc)"
  echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- filesystem of $dir: $(findmnt -no FSTYPE,SOURCE -T "$dir" | tr -s ' ')"
  echo "- kernel: $(uname -r); OS: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end"
  versions="cairn $("$cairn" --version 2>/dev/null | head -n1 || echo '?')"
  ((with_restic)) && versions+="; $(restic version | cut -d' ' -f1-2)"
  ((with_borg)) && versions+="; $(borg --version) (\`borg init --encryption=none\`, \`--compression $borg_compression\`, default chunker)"
  echo "- versions: $versions"
  echo "- image: $bytes bytes from \`cairn-gendata image --size $size --seed 1\`, sha256 ${image_sha:0:16}…"
  ((${want[rss]:-0})) && echo "- sparse image: $sparse_bytes bytes, holes except 8 slices of $((bytes / 8 >> 20)) MiB of the image at every $((sparse_bytes / 8 >> 20)) MiB"
  echo "- page cache: warm (the image and the stores were read or written just before and fit in RAM)"
  echo "- rounds: $rounds; sections: $only"
)
if ((write_doc)); then plot_dir=$root/docs/img; else plot_dir=$dir/plots; fi
mkdir -p "$plot_dir" "$dir/plots"
tables=$(python3 bench/restore_report.py "$results" "$dir/plots")
subtitle="$size image, $(nproc) CPUs, $rounds round(s), commit ${commit%% *}"
plots=()
if ((${want[jobs]:-0})) && [[ -f $dir/plots/restore_jobs.dat ]]; then
  gnuplot -e "datafile='$dir/plots/restore_jobs.dat'; outfile='$plot_dir/restore_jobs.png'; subtitle='$subtitle'" \
    bench/plot_restore_jobs.gp
  plots+=(restore_jobs)
fi
if ((${want[latency]:-0})) && [[ -f $dir/plots/restore_latency.dat ]]; then
  gnuplot -e "datafile='$dir/plots/restore_latency.dat'; autofile='$dir/plots/restore_latency_auto.dat'; outfile='$plot_dir/restore_latency.png'; subtitle='$subtitle'" \
    bench/plot_restore_latency.gp
  plots+=(restore_latency)
fi
echo
echo "$machine"
echo
echo "$tables"
for p in "${plots[@]}"; do echo "plot: $plot_dir/$p.png"; done

if ((write_doc)); then
  doc=docs/BENCHMARKS.md
  section=$(
    echo "<!-- restore-bench:begin (written by bench/restore_bench.sh; edit outside the markers) -->"
    echo "## Parallel restore"
    echo
    echo "Restore of one generated image from a local datastore, warm page cache. Throughput is"
    echo "the image size over the wall-clock time of the command, the same for every tool (zero"
    echo "chunks included: cairn writes them as holes and fsyncs the target; restic and borg"
    echo "timings include a \`sync\` of the file). Verify rows count the image size too."
    echo "\`--inject-latency MS\` (a sleep before every chunk read) and \`--cpu-workers N\` are hidden"
    echo "benchmark options of \`restore\` and \`verify\`. Every restored file is checked with \`cmp\`."
    echo
    echo '```sh'
    echo 'bash bench/restore_bench.sh                  # 3 rounds, 2 GiB image, 16 GiB sparse image'
    echo 'bash bench/restore_bench.sh --quick          # 1 round, 256 MiB image (a few minutes)'
    echo 'bash bench/restore_bench.sh --only latency   # sections: compare, latency, rss, jobs'
    echo 'CAIRN_BIN=/path/to/build/src/cairn bash bench/restore_bench.sh   # another build'
    echo '```'
    echo
    echo "- **compare**: \`cairn restore -r STORE vm/100/latest disk0.img NEW\` (\`--jobs auto\` and"
    echo "  \`--jobs 1\`), \`cat IMG > NEW\` with and without \`sync NEW\` (the copy limit),"
    echo "  \`restic restore\`, \`borg extract --sparse\` (repository \`--encryption=none\`,"
    echo "  \`--compression $borg_compression\`), interleaved; the order reverses every round."
    ((has_rehearse)) &&
      echo "  \`cairn restore --rehearse\` (fetch, decode, check, write nothing) shows the side without the disk."
    echo "- **latency**: \`cairn restore\` (and \`cairn verify vm/100\`) with \`--inject-latency\`"
    echo "  ${latencies//,/, } ms (0: no flag), \`--jobs auto\` against \`--jobs\` ${jobs_list//,/, }."
    echo "  Targets: auto ≥ 0.90 × the best fixed N at every latency; auto at 20 ms ≥ 0.80 × auto"
    echo "  at 0 ms."
    echo "- **rss**: peak RSS (\`/usr/bin/time -f %M\`) of \`cairn restore\` of the image and of a"
    echo "  sparse image of $(numfmt --to=iec --format=%.0f "$sparse_bytes") holding the image's data in 8 slices, holes in between."
    echo "- **jobs**: \`cairn restore --jobs N --cpu-workers W\`, W = 1, 2, no injected latency."
    echo "- Raw timings: \`DIR/results.tsv\` (default \`/var/tmp/cairn-restore-bench\`); each"
    echo "  command's output: \`DIR/logs/\`; tables: \`bench/restore_report.py\`; plots:"
    echo "  \`bench/plot_restore_*.gp\`."
    echo
    echo "Latest run: \`$command_line\` ($rounds round(s), $size image)"
    echo
    echo "$machine"
    echo
    echo "$tables"
    for p in "${plots[@]}"; do
      echo
      echo "![$p](img/$p.png)"
    done
    echo "<!-- restore-bench:end -->"
  )
  if [[ -f $doc ]] && grep -q '<!-- restore-bench:begin' "$doc"; then
    python3 - "$doc" "$section" <<'PY'
import re, sys
path, section = sys.argv[1:]
text = open(path).read()
text = re.sub(r"<!-- restore-bench:begin.*?<!-- restore-bench:end -->", lambda m: section, text, flags=re.S)
open(path, "w").write(text)
PY
  else
    printf '\n%s\n' "$section" >>"$doc"
  fi
  say "results written to $doc"
fi
