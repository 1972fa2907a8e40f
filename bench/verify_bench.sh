#!/usr/bin/env bash
# Parallel verify benchmark: cairn verify beside restic check --read-data,
# borg check --verify-data and its own sequential modes; the machine's limit
# for verify's CPU work; reads in flight under injected latency; peak memory
# against the number of chunks, with and without the ledger. One local
# datastore holding three snapshots of one generated image.
#
#   bash bench/verify_bench.sh [--quick] [--rounds N] [--size 2G] [--change 64M]
#                              [--dir DIR] [--only compare,limit,latency,rss]
#                              [--cold] [--no-restic] [--no-borg] [--no-doc]
#                              [--latencies 0,1,5,20] [--jobs-list 1,2,4,8,16,32,64]
#                              [--chunk-counts 10000,100000,1000000] [--rss-rounds 1]
#
#   --quick        1 round, 256 MiB image, chunk counts 5000,20000,50000
#                  (a few minutes)
#   --rounds N     rounds (default 3); in each round every section runs once and
#                  the order of the runs inside a section alternates
#   --size S       image size (default 2G)
#   --change S     bytes overwritten with new random data before backups 2 and 3
#                  (default size/32: 64M for 2G), at 1/4 and 5/8 of the image
#                  (+1 MiB, so the changes do not start on a chunk boundary)
#   --dir DIR      work directory (default /var/tmp/cairn-verify-bench; needs
#                  ~5x the image size free, plus ~4.5 KiB per synthetic chunk);
#                  also $CAIRN_BENCH_DIR
#   --only LIST    sections to run, comma-separated (default: all four)
#                    compare  cairn verify (auto; --jobs 1 --cpu-workers 1;
#                             --jobs 1), restic check --read-data, borg check
#                             --verify-data, interleaved
#                    limit    the decode limit (cairn-synth-store decode-limit:
#                             CRC + zstd + SHA-256 of every chunk in memory on
#                             all CPUs, and on one) beside cairn verify
#                    latency  --inject-latency 0/1/5/20 ms x --jobs auto|N
#                    rss      peak RSS of cairn verify on synthetic stores of N
#                             distinct chunks: --no-ledger, ledger recording,
#                             ledger skipping (--outdated-after 1)
#   --cold         also run the compare section with the page cache dropped
#                  before every command (needs a writable /proc/sys/vm/drop_caches;
#                  without one the cold rows are left out and the report says so)
#   --no-restic, --no-borg   leave restic / borg out of the compare section
#   --no-doc       do not rewrite the verify-bench section of docs/BENCHMARKS.md
#                  (plots then go to DIR/plots/ instead of docs/img/)
#   --latencies L  injected latencies in ms (default 0,1,5,20; 0 = no flag)
#   --jobs-list L  fixed --jobs values of the latency sweep (default 1,2,4,8,16,32,64)
#   --chunk-counts L  distinct chunks of the rss section's synthetic stores
#                  (default 10000,100000,1000000; 64 KiB chunks, ~4.5 KiB of
#                  disk each; the stores are kept in DIR and reused)
#   --rss-rounds N the rss section runs in the first N rounds only (default 1:
#                  peak RSS hardly varies, and 1M chunks take minutes per run:
#                  ~1 ms per chunk on the 2-CPU reference machine under load)
#
# The cairn binary is $CAIRN_BIN if set, else build/release/src/cairn (the
# release preset is built when missing); cairn-gendata and cairn-synth-store
# are $CAIRN_GENDATA / $CAIRN_SYNTH, else next to $CAIRN_BIN
# (BUILD/bench/...), else build/release's.
# From a clean checkout on Debian 12, as root: installs what is missing
# (scripts/setup-deps.sh, restic, borgbackup, gnuplot-nox, time), builds,
# generates the image, makes the three versions and backs them up with every
# tool, runs the rounds (every cairn verify must report ok and the same
# logical bytes, or the run fails), prints tables and writes them, with the
# machine details, between the verify-bench markers in docs/BENCHMARKS.md, plus
# docs/img/verify_compare.png, verify_latency.png and verify_rss.png. Raw
# results stay in DIR/results.tsv, each command's output in DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bench_name=verify_bench
source bench/lib.sh  # json_fields; the helpers defined below override its own

command_line="bash bench/verify_bench.sh${*:+ $*}"
[[ -n ${CAIRN_BIN:-} ]] && command_line="CAIRN_BIN=$CAIRN_BIN $command_line"
rounds=3
size=2G
change=
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-verify-bench}
only=compare,limit,latency,rss
cold=0
with_restic=1
with_borg=1
write_doc=1
latencies=0,1,5,20
jobs_list=1,2,4,8,16,32,64
chunk_counts=10000,100000,1000000
rss_rounds=1
usage() { sed -n '8,62p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) rounds=1; size=256M; chunk_counts=5000,20000,50000; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --change) change=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --cold) cold=1; shift ;;
    --no-restic) with_restic=0; shift ;;
    --no-borg) with_borg=0; shift ;;
    --no-doc) write_doc=0; shift ;;
    --latencies) latencies=$2; shift 2 ;;
    --jobs-list) jobs_list=$2; shift 2 ;;
    --chunk-counts) chunk_counts=$2; shift 2 ;;
    --rss-rounds) rss_rounds=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "verify_bench: unknown argument '$1'" >&2; usage ;;
  esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'verify_bench: FAILED: %s\n' "$*" >&2; exit 1; }

[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "verify_bench: --rounds must be a positive number" >&2; exit 2; }
[[ $rss_rounds =~ ^[1-9][0-9]*$ ]] || { echo "verify_bench: --rss-rounds must be a positive number" >&2; exit 2; }
declare -A want=()
IFS=, read -ra sections <<<"$only"
for s in "${sections[@]}"; do
  case $s in compare|limit|latency|rss) want[$s]=1 ;;
    *) echo "verify_bench: --only: unknown section '$s' (compare, limit, latency, rss)" >&2; exit 2 ;;
  esac
done
IFS=, read -ra lat_values <<<"$latencies"
IFS=, read -ra fixed_jobs <<<"$jobs_list"
IFS=, read -ra counts <<<"$chunk_counts"
for v in "${lat_values[@]}" "${fixed_jobs[@]}" "${counts[@]}"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "verify_bench: '$v' is not a number" >&2; exit 2; }
done
for v in "${counts[@]}"; do ((v > 0)) || { echo "verify_bench: chunk counts must be > 0" >&2; exit 2; }; done
to_bytes() { numfmt --from=iec "${1%B}" 2>/dev/null || die "cannot read size '$1'"; }
bytes_wanted=$(to_bytes "$size")
change_bytes=$(to_bytes "${change:-$((bytes_wanted / 32))}")
mib=1048576
change_bytes=$((change_bytes / mib * mib))
((change_bytes >= mib)) || die "--change must be at least 1M (a 2G image changes 64M per version)"
need_image=0
((${want[compare]:-0} || ${want[limit]:-0} || ${want[latency]:-0})) && need_image=1
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
if [[ -n ${CAIRN_BIN:-} ]]; then
  bench_dir=$(dirname "$CAIRN_BIN")/../bench
  [[ -z ${CAIRN_GENDATA:-} && -x $bench_dir/cairn-gendata ]] && CAIRN_GENDATA=$(realpath "$bench_dir/cairn-gendata")
  [[ -z ${CAIRN_SYNTH:-} && -x $bench_dir/cairn-synth-store ]] && CAIRN_SYNTH=$(realpath "$bench_dir/cairn-synth-store")
fi
need_build=0
[[ -z ${CAIRN_BIN:-} || -z ${CAIRN_GENDATA:-} || -z ${CAIRN_SYNTH:-} ]] && need_build=1
if ((need_build)); then
  if [[ -f scripts/setup-deps.sh ]]; then
    bash scripts/setup-deps.sh
  else
    apt_install build-essential cmake ninja-build g++ pkg-config libssl-dev libzstd-dev \
      nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libgtest-dev \
      libgmock-dev libbenchmark-dev
  fi
fi
extra=(time python3 coreutils gnuplot-nox)
((with_restic)) && extra+=(restic)
((with_borg)) && extra+=(borgbackup)
apt_install "${extra[@]}"

# --- build ------------------------------------------------------------------
if ((need_build)); then
  say "building the release preset (build/release)"
  [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
  targets=()
  [[ -z ${CAIRN_BIN:-} ]] && targets+=(cairn)
  [[ -z ${CAIRN_GENDATA:-} ]] && targets+=(cairn-gendata)
  [[ -z ${CAIRN_SYNTH:-} ]] && targets+=(cairn-synth-store)
  cmake --build build/release --target "${targets[@]}" >/dev/null
fi
cairn=$(realpath "${CAIRN_BIN:-$root/build/release/src/cairn}")
gendata=$(realpath "${CAIRN_GENDATA:-$root/build/release/bench/cairn-gendata}")
synth=$(realpath "${CAIRN_SYNTH:-$root/build/release/bench/cairn-synth-store}")
[[ -x $cairn ]] || die "no cairn binary at $cairn"
[[ -x $gendata ]] || die "no cairn-gendata binary at $gendata"
[[ -x $synth ]] || die "no cairn-synth-store binary at $synth"

# --- data -------------------------------------------------------------------
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
free_bytes=$(df -B1 --output=avail "$dir" | tail -n1)
synth_need=0
if ((${want[rss]:-0})); then
  for n in "${counts[@]}"; do
    [[ -f $dir/synth-$n/.synth-done ]] || synth_need=$((synth_need + n * 4608))
  done
fi
need=$((need_image * bytes_wanted * 5 + synth_need))
((free_bytes > need)) ||
  say "warning: $dir has $((free_bytes >> 20)) MiB free; the run needs about $((need >> 20)) MiB"

py_json() {  # py_json FILE EXPR: a field of a JSON file (python expression over j)
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

export RESTIC_PASSWORD=cairn-bench
export RESTIC_CACHE_DIR=$dir/restic-cache
export BORG_BASE_DIR=$dir/borg-home
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
store=$dir/cairn-store
restic_repo=$dir/restic-repo
borg_repo=$dir/borg-repo
borg_compression=zstd,1
image=$dir/disk-$size.img
work=$dir/work.img
logical=0
unique_chunks=0
if ((need_image)); then
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
  off1=$(((bytes / 4 / mib + 1) * mib))
  off2=$(((bytes * 5 / 8 / mib + 1) * mib))
  ((off2 + change_bytes <= bytes)) || die "--change $change is too large for a $size image"

  # Three versions of one image: v1 as generated, v2 and v3 each with
  # --change bytes of new random data (seeds 2, 3) at another offset.
  patch_image() {  # patch_image SEED OFFSET
    python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(int(sys.argv[1])).randbytes(int(sys.argv[2])))' \
      "$1" "$change_bytes" | dd of="$work" bs=1M seek=$(($2 / mib)) conv=notrunc iflag=fullblock status=none
  }
  backup_all() {  # backup_all VERSION
    local v=$1
    "$cairn" backup -r "$store" --id vm/100 --json disk0.img="$work" >"$dir/logs/setup-cairn-backup-$v.log"
    if ((with_restic)); then
      restic backup -q --force --repo "$restic_repo" --host bench "$work" >"$dir/logs/setup-restic-backup-$v.log"
    fi
    if ((with_borg)); then
      # From inside $dir, so the archive holds the relative name work.img.
      (cd "$dir" && borg create --compression "$borg_compression" --files-cache=disabled \
        "$borg_repo::img-$v" "$(basename "$work")") >"$dir/logs/setup-borg-create-$v.log" 2>&1
    fi
  }
  say "three versions of the image ($((change_bytes >> 20)) MiB changed at $((off1 >> 20)) MiB, then at $((off2 >> 20)) MiB), backed up (untimed) by cairn$( ((with_restic)) && echo ", restic")$( ((with_borg)) && echo ", borg")"
  rm -rf "$store" "$restic_repo" "$borg_repo" "$RESTIC_CACHE_DIR" "$BORG_BASE_DIR"
  "$cairn" init "$store" >/dev/null
  ((with_restic)) && restic init -q --repo "$restic_repo" >/dev/null
  if ((with_borg)); then
    mkdir -p "$BORG_BASE_DIR"
    borg init --encryption=none "$borg_repo" >/dev/null
  fi
  cp "$image" "$work"
  backup_all 1
  patch_image 2 "$off1"
  backup_all 2
  patch_image 3 "$off2"
  backup_all 3
  rm -f "$work"
  # The logical bytes: plaintext of every distinct chunk, as cairn verify
  # counts them (raw_bytes). Every tool's throughput divides this by its time.
  "$cairn" verify -r "$store" --no-ledger --json >"$dir/logs/setup-cairn-verify.log" 2>"$dir/logs/setup-cairn-verify.err" ||
    die "the untimed cairn verify failed (log: $dir/logs/setup-cairn-verify.log)"
  [[ $(py_json "$dir/logs/setup-cairn-verify.log" 'j["ok"] and len(j["snapshots"]) == 3') == True ]] ||
    die "the cairn store does not hold three good snapshots"
  logical=$(py_json "$dir/logs/setup-cairn-verify.log" 'j["raw_bytes"]')
  stored=$(py_json "$dir/logs/setup-cairn-verify.log" 'j["stored_bytes"]')
  unique_chunks=$(py_json "$dir/logs/setup-cairn-verify.log" 'j["unique_chunks"]')
  ((logical > 0)) || die "cairn verify counted no logical bytes"
fi

# The rss section's synthetic stores, one per chunk count, kept between runs.
synth_version=1
declare -A synth_note=()
if ((${want[rss]:-0})); then
  for n in "${counts[@]}"; do
    s=$dir/synth-$n
    if [[ ! -f $s/.synth-done || $(cat "$s/.synth-done") != "$synth_version $n" ]]; then
      say "making a synthetic store of $n distinct 64 KiB chunks (cairn-synth-store write)"
      rm -rf "$s"
      "$synth" write "$s" --chunks "$n" >"$dir/logs/setup-synth-$n.log"
      echo "$synth_version $n" >"$s/.synth-done"
    fi
    synth_note[$n]=$(py_json "$s/../logs/setup-synth-$n.log" '"%.0f s" % j["seconds"]' 2>/dev/null || echo "earlier run")
  done
fi

# --- measuring --------------------------------------------------------------
results=$dir/results.tsv
printf 'round\tsection\tcase\tjobs\tcpu\tlat\tseconds\trss_kib\tbytes\tchunks\tjson_s\tjobs_final\tjobs_max\tchecked\n' >"$results"
stamp_results "$dir"
sync

cache_note="warm (every store but the synthetic ones was read just before the rounds and fits in RAM)"
can_drop=0
if ((cold)); then
  if { sync && echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    can_drop=1
    cache_note+="; compare-cold rows: page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every command"
  else
    cache_note+="; --cold asked for, but /proc/sys/vm/drop_caches is not writable here: no cold rows"
    say "warning: --cold: /proc/sys/vm/drop_caches is not writable; only warm rows"
  fi
fi


log_tag=  # appended to the log names (the rss section: -nCHUNKS)
# measure ROUND SECTION CASE JOBS CPU LAT KIND CMD...: times CMD (wall clock,
# peak RSS; the page cache dropped first for section compare-cold) and
# appends a line to results.tsv. KIND: "cairn" (a cairn verify: must say ok,
# its raw_bytes are the bytes), "synth" (cairn-synth-store: its raw_bytes), or
# the logical bytes to count (restic, borg).
measure() {
  local round=$1 section=$2 case=$3 jobs=$4 cpu=$5 lat=$6 kind=$7
  shift 7
  local tag="r$round-$section-$case-j$jobs-c$cpu-l$lat$log_tag"
  local log="$dir/logs/$tag.log" t0 t1 rss secs fields nbytes nchunks
  [[ $section == compare-cold ]] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" </dev/null >"$log" 2>"$log.err"; then
    cat "$log" "$log.err" >&2
    die "round $round: $section $case (jobs $jobs, cpu $cpu, latency $lat) failed (log: $log)"
  fi
  t1=$(date +%s%N)
  rss=$(tail -n1 "$dir/logs/rss")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  IFS=$'\t' read -r json_s jfinal jmax raw uniq checked ok <<<"$(json_fields "$log" seconds jobs.final jobs.max raw_bytes unique_chunks checked_chunks ok)"
  case $kind in
    cairn)
      [[ $ok == True ]] || die "round $round: $section $case: cairn verify did not report ok (log: $log)"
      nbytes=$raw nchunks=$uniq ;;
    synth) nbytes=$raw nchunks=$uniq ;;
    *) nbytes=$kind nchunks=$unique_chunks json_s=- checked=- ;;
  esac
  if [[ $section != rss ]] && ((logical > 0)) && [[ $nbytes != "$logical" ]]; then
    die "round $round: $section $case counted $nbytes logical bytes, the store holds $logical (log: $log)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$section" "$case" \
    "$jobs" "$cpu" "$lat" "$secs" "$rss" "$nbytes" "$nchunks" "$json_s" "$jfinal" "$jmax" \
    "$checked" >>"$results"
  local rate_s=$secs  # the decode limit: its own timed pass, not the loading
  [[ $kind == synth ]] && rate_s=$json_s
  printf '   %-12s %-14s jobs %-4s cpu %-2s lat %-3s %8.2f s %8.1f MiB/s %7.1f MiB RSS\n' \
    "$section" "$case" "$jobs" "$cpu" "$lat" "$secs" \
    "$(awk -v b="$nbytes" -v s="$rate_s" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

# cairn_verify ROUND SECTION CASE JOBS CPU LAT STORE [ledger [EXTRA...]]:
# --no-ledger, unless the 8th argument is "ledger" (the rss section's ledger
# runs: plain verify, plus EXTRA).
cairn_verify() {
  local r=$1 section=$2 case=$3 jobs=$4 cpu=$5 lat=$6 st=$7
  shift 7
  local args=(verify -r "$st" --json)
  if [[ ${1:-} == ledger ]]; then shift; args+=("$@"); else args+=(--no-ledger); fi
  [[ $jobs != auto ]] && args+=(--jobs "$jobs")
  [[ $cpu != - ]] && args+=(--cpu-workers "$cpu")
  [[ $lat != - && $lat != 0 ]] && args+=(--inject-latency "$lat")
  measure "$r" "$section" "$case" "$jobs" "$cpu" "$lat" cairn "$cairn" "${args[@]}"
}

compare_one() {  # compare_one ROUND SECTION TOOL
  local r=$1 sec=$2
  case $3 in
    cairn) cairn_verify "$r" "$sec" cairn auto - - "$store" ;;
    cairn-seq) cairn_verify "$r" "$sec" cairn-seq 1 1 - "$store" ;;
    cairn-j1) cairn_verify "$r" "$sec" cairn-j1 1 - - "$store" ;;
    restic) measure "$r" "$sec" restic - - - "$logical" restic check -q --read-data --repo "$restic_repo" ;;
    borg) measure "$r" "$sec" borg - - - "$logical" borg check --verify-data "$borg_repo" ;;
  esac
}

limit_one() {  # limit_one ROUND CASE
  local r=$1
  case $2 in
    limit) measure "$r" limit limit - "$(nproc)" - synth "$synth" decode-limit "$store" --passes 3 ;;
    limit-1t) measure "$r" limit limit-1t - 1 - synth "$synth" decode-limit "$store" --threads 1 --passes 3 ;;
    cairn) cairn_verify "$r" limit cairn auto - - "$store" ;;
  esac
}

rss_one() {  # rss_one ROUND N: no ledger, then a fresh ledger recording, then skipping
  local r=$1 n=$2 st=$dir/synth-$2
  log_tag=-n$n
  cairn_verify "$r" rss no-ledger auto - - "$st"
  rm -rf "$st/.ledger"
  cairn_verify "$r" rss ledger-record auto - - "$st" ledger
  cairn_verify "$r" rss ledger-skip auto - - "$st" ledger --outdated-after 1
  local log="$dir/logs/r$r-rss-ledger-skip-jauto-c--l-$log_tag.log"
  log_tag=
  [[ $(py_json "$log" 'j["checked_chunks"] == 0 and j["skipped"]["fresh_chunks"] == j["unique_chunks"]') == True ]] ||
    die "round $r: the ledger run with --outdated-after 1 checked chunks again (log: $log)"
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

# Warm cache: read every store once before the rounds (not the synthetic
# stores: the rss section measures memory, and reading 1M files takes minutes).
warm=("$store")
((with_restic)) && warm+=("$restic_repo")
((with_borg)) && warm+=("$borg_repo")
for d in "${warm[@]}"; do [[ -d $d ]] && find "$d" -type f -exec cat {} + >/dev/null; done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "benchmark: $rounds round(s), image $image, sections $only, work dir $dir"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  if ((${want[compare]:-0})); then
    tools=(cairn cairn-seq cairn-j1)
    ((with_restic)) && tools+=(restic)
    ((with_borg)) && tools+=(borg)
    secs=(compare)
    ((can_drop)) && secs+=(compare-cold)
    for sec in "${secs[@]}"; do
      say "$sec"
      while read -r t; do compare_one "$r" "$sec" "$t"; done < <(in_order "$r" "${tools[@]}")
    done
  fi
  if ((${want[limit]:-0})); then
    say "limit"
    while read -r c; do limit_one "$r" "$c"; done < <(in_order "$r" limit cairn limit-1t)
  fi
  if ((${want[latency]:-0})); then
    say "latency"
    for lat in "${lat_values[@]}"; do
      while read -r j; do cairn_verify "$r" latency verify "$j" - "$lat" "$store"; done \
        < <(in_order "$r" auto "${fixed_jobs[@]}")
    done
  fi
  if ((${want[rss]:-0} && r <= rss_rounds)); then
    say "rss"
    while read -r n; do rss_one "$r" "$n"; done < <(in_order "$r" "${counts[@]}")
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
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) online CPUs (nproc)$(grep -q sha_ni /proc/cpuinfo && echo ', SHA-NI')"
  echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- filesystem of $dir: $(findmnt -no FSTYPE,SOURCE -T "$dir" | tr -s ' ')"
  echo "- kernel: $(uname -r); OS: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end"
  versions="cairn $("$cairn" --version 2>/dev/null | head -n1 || echo '?')"
  ((with_restic)) && versions+="; $(restic version | cut -d' ' -f1-2)"
  ((with_borg)) && versions+="; $(borg --version) (\`borg init --encryption=none\`, \`--compression $borg_compression\`, default chunker)"
  echo "- versions: $versions"
  if ((need_image)); then
    echo "- image: $bytes bytes from \`cairn-gendata image --size $size --seed 1\`, sha256 ${image_sha:0:16}…;" \
      "versions 2 and 3 overwrite $((change_bytes >> 20)) MiB with new random data at $((off1 >> 20)) MiB, then at $((off2 >> 20)) MiB"
    echo "- cairn store: 3 snapshots, $unique_chunks distinct chunks, logical (raw) $logical bytes" \
      "($(awk -v b="$logical" 'BEGIN { printf "%.0f", b / 1048576 }') MiB), stored $stored bytes"
  fi
  if ((${want[rss]:-0})); then
    notes=""
    for n in "${counts[@]}"; do notes+="${notes:+, }$n (${synth_note[$n]})"; done
    echo "- synthetic stores (\`cairn-synth-store write DIR --chunks N\`, 64 KiB chunks): $notes"
  fi
  echo "- page cache: $cache_note"
  echo "- rounds: $rounds ($((rss_rounds < rounds ? rss_rounds : rounds)) for rss); sections: $only"
)
if ((write_doc)); then plot_dir=$root/docs/img; else plot_dir=$dir/plots; fi
mkdir -p "$plot_dir" "$dir/plots"
tables=$(python3 bench/verify_report.py "$results" "$dir/plots")
subtitle="$size image x 3 versions, $(nproc) CPUs, $rounds round(s), commit ${commit%% *}"
plots=()
for p in verify_compare verify_latency verify_rss; do
  [[ -f $dir/plots/$p.dat ]] || continue
  sub=$subtitle
  [[ $p == verify_rss ]] && sub="synthetic stores, $(nproc) CPUs, $((rss_rounds < rounds ? rss_rounds : rounds)) round(s), commit ${commit%% *}"
  gnuplot -e "datadir='$dir/plots'; outfile='$plot_dir/$p.png'; subtitle='$sub'" "bench/plot_$p.gp"
  plots+=("$p")
done
echo
echo "$machine"
echo
echo "$tables"
for p in "${plots[@]}"; do echo "plot: $plot_dir/$p.png"; done

if ((write_doc)); then
  doc=docs/BENCHMARKS.md
  section=$(
    echo "<!-- verify-bench:begin (written by bench/verify_bench.sh; edit outside the markers) -->"
    echo "## Parallel verify"
    echo
    echo "Verify of one local datastore holding three snapshots of a generated image (the"
    echo "second and third each overwrite $((change_bytes >> 20)) MiB with new random data), warm page cache"
    echo "unless a row says cold. Throughput is in *logical* MiB/s: the plaintext bytes of every"
    echo "distinct chunk (\`raw_bytes\` of \`cairn verify --json\`, the same number for every tool)"
    echo "over the wall-clock time of the command. Every cairn run passes \`--no-ledger\` (hidden:"
    echo "neither reads nor records the ledger), so each does the full work, except the ledger"
    echo "rows of **rss**. \`--cpu-workers N\` and \`--inject-latency MS\` are hidden benchmark"
    echo "options. Every cairn verify must report ok and the same logical bytes, or the run fails."
    echo
    echo '```sh'
    echo 'bash bench/verify_bench.sh                  # 3 rounds, 2 GiB image, 10k/100k/1M chunks'
    echo 'bash bench/verify_bench.sh --quick          # 1 round, 256 MiB image, 5k/20k/50k chunks'
    echo 'bash bench/verify_bench.sh --only rss --chunk-counts 10000,100000   # sections: compare, limit, latency, rss'
    echo 'bash bench/verify_bench.sh --cold           # also compare with the page cache dropped'
    echo 'CAIRN_BIN=/path/to/build/src/cairn bash bench/verify_bench.sh   # another build'
    echo '```'
    echo
    echo "- **compare**: \`cairn verify -r STORE --no-ledger\` (\`--jobs auto\`), the sequential mode"
    echo "  \`--jobs 1 --cpu-workers 1\` (one reader, one checker) and \`--jobs 1\` (one reader, checks"
    echo "  on all cores), \`restic check --read-data\`, \`borg check --verify-data\` (repository"
    echo "  \`--encryption=none\`, \`--compression $borg_compression\`), interleaved; the order reverses every"
    echo "  round. Targets: cairn ≥ 5 × restic, ≥ 1.8 × its sequential mode."
    echo "- **limit**: \`cairn-synth-store decode-limit STORE\` (bench/synth_store.cc) reads every"
    echo "  distinct chunk of the three snapshots into memory (untimed), then times exactly the"
    echo "  per-chunk check verify makes (\`blob::DecodeChunkView\`: CRC32C of the stored bytes,"
    echo "  zstd decompression, SHA-256 against the id; then the length) on all online CPUs"
    echo "  pulling chunks from one counter: no file I/O, no pipeline, the median of 3 passes."
    echo "  That is the machine's CPU limit for verify on warm data (\`cairn verify\` on a tmpfs copy"
    echo "  would still carry the pipeline's own costs, so it would be no limit); cairn verify's share of it"
    echo "  (its wall clock, and its own \`seconds\`) has the target ≥ 0.85. One thread shows the"
    echo "  per-core speed."
    echo "- **latency**: \`cairn verify --no-ledger --inject-latency MS\` (a sleep before every chunk"
    echo "  read), ${latencies//,/, } ms (0: no flag), \`--jobs auto\` against \`--jobs\` ${jobs_list//,/, }."
    echo "  Target: auto ≥ 0.90 × the best fixed N at every latency."
    echo "- **rss**: peak RSS (\`/usr/bin/time -f %M\`) of \`cairn verify\` on stores made by"
    echo "  \`cairn-synth-store write STORE --chunks N\`: one snapshot whose image index holds N"
    echo "  distinct 64 KiB chunks (\`index::kMinChunkSize\`; zeros but for the chunk number in the"
    echo "  last 8 bytes, ~100 bytes stored), written through \`LocalChunkStore::Insert\` and"
    echo "  \`datastore::SnapshotWriter\`. Three runs per N: \`--no-ledger\`; with a fresh ledger"
    echo "  (records every chunk, then compacts); again with \`--outdated-after 1\` (loads the"
    echo "  ledger, skips every chunk). The slope between sizes is the memory per chunk; target"
    echo "  ≤ ~64 bytes per chunk without the ledger. The section runs in the first"
    echo "  \`--rss-rounds\` rounds only (default 1): each full run of a store reads every chunk"
    echo "  file, so 1M chunks take minutes (the s in the table)."
    echo "- Raw results: \`DIR/results.tsv\` (default \`/var/tmp/cairn-verify-bench\`); each"
    echo "  command's output: \`DIR/logs/\`; tables: \`bench/verify_report.py\`; plots:"
    echo "  \`bench/plot_verify_*.gp\`."
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
    echo "<!-- verify-bench:end -->"
  )
  python3 - "$doc" "$section" <<'PY'
import re, sys
path, section = sys.argv[1:]
try:
    text = open(path).read()
except FileNotFoundError:
    text = ""
if "<!-- verify-bench:begin" in text:
    text = re.sub(r"<!-- verify-bench:begin.*?<!-- verify-bench:end -->", lambda m: section, text, flags=re.S)
elif "<!-- restore-bench:end -->" in text:  # right after the restore-bench section
    text = text.replace("<!-- restore-bench:end -->", "<!-- restore-bench:end -->\n\n" + section, 1)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
  say "results written to $doc"
fi
