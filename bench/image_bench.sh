#!/usr/bin/env bash
# Image backup/restore benchmark: cairn beside restic, borg and the raw limits
# (cat, sha256sum, zstd -1, cp), on one disk image from cairn-gendata, in one
# run. This is the *sequential baseline* that the parallel restore and verify
# issues improve on.
#
#   bash bench/image_bench.sh [--quick] [--rounds N] [--size 2G] [--dir DIR]
#                             [--cold] [--no-restic] [--no-borg] [--no-encrypted]
#                             [--no-doc] [--compare LABEL=CAIRN]
#
#   --quick      1 round on a 512 MiB image (a minute or two)
#   --rounds N   rounds (default 3); tools are interleaved run by run, and the
#                order of the tools reverses from round to round
#   --size S     image size (default 2G)
#   --dir DIR    work directory (default /var/tmp/cairn-bench; needs ~6x the
#                image size free); also $CAIRN_BENCH_DIR
#   --cold       drop the page cache before every timed step (needs root and a
#                writable /proc/sys/vm/drop_caches); default: warm cache
#   --no-restic  skip restic
#   --no-borg    skip borg (borg 1.2: `borg init --encryption=none`, archives
#                made with --compression zstd,1 and the default chunker)
#   --no-encrypted  skip tool cairn-enc: cairn with --keyfile on every
#                command (AES-256-GCM, keyed chunk ids, signed manifests; the
#                key made by `cairn key create`, its default KDF), the row to
#                compare with restic, which always encrypts
#   --no-doc     do not rewrite the results section of docs/BENCHMARKS.md
#   --compare LABEL=CAIRN  also run another cairn binary (say, an older commit's
#                build) as tool LABEL, interleaved with the others; repeatable
#
# The cairn binary is $CAIRN_BIN if set (no build then), else
# build/release/src/cairn; cairn-gendata is $CAIRN_GENDATA, else next to
# $CAIRN_BIN (BUILD/bench/cairn-gendata), else build/release's.
# From a clean checkout on Debian 12, as root: installs what is missing
# (scripts/setup-deps.sh, restic, borgbackup, time), builds the release preset, generates
# the image, runs the rounds, checks every restored file with cmp (a wrong
# byte fails the run), prints a table and writes it, with the machine details,
# between the image-bench markers in docs/BENCHMARKS.md. Raw timings stay in
# DIR/results.tsv, each tool's JSON/log output in DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=image_bench
source bench/lib.sh  # stamp_results, commit_of; the helpers defined below override its own
root=$PWD

command_line="bash bench/image_bench.sh${*:+ $*}"
rounds=3
size=2G
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-bench}
cold=0
with_restic=1
with_borg=1
write_doc=1
quick=0
declare -A cairn_bin=()  # tool label -> cairn binary
extra_cairns=()
with_encrypted=1
usage() { sed -n '9,34p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) quick=1; rounds=1; size=512M; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --cold) cold=1; shift ;;
    --no-restic) with_restic=0; shift ;;
    --no-borg) with_borg=0; shift ;;
    --no-encrypted) with_encrypted=0; shift ;;
    --no-doc) write_doc=0; shift ;;
    --compare)
      [[ $2 == *=* && -x ${2#*=} ]] || { echo "image_bench: --compare wants LABEL=PATH_TO_CAIRN" >&2; exit 2; }
      cairn_bin[${2%%=*}]=$(realpath "${2#*=}")
      extra_cairns+=("${2%%=*}")
      shift 2 ;;
    -h|--help) usage ;;
    *) echo "image_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "image_bench: --rounds must be a positive number" >&2; exit 2; }

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'image_bench: FAILED: %s\n' "$*" >&2; exit 1; }

# --- dependencies -----------------------------------------------------------
install_deps() {
  if [[ -f scripts/setup-deps.sh ]]; then
    bash scripts/setup-deps.sh
  else
    local build_deps=(build-essential cmake ninja-build g++ pkg-config libssl-dev libzstd-dev
      nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libgtest-dev
      libgmock-dev libbenchmark-dev python3 zstd)
    apt_install "${build_deps[@]}"
  fi
  local extra=(time python3 zstd)
  ((with_restic)) && extra+=(restic)
  ((with_borg)) && extra+=(borgbackup)
  apt_install "${extra[@]}"
}
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
if [[ -z ${CAIRN_GENDATA:-} && -n ${CAIRN_BIN:-} ]]; then
  guess=$(dirname "$CAIRN_BIN")/../bench/cairn-gendata
  [[ -x $guess ]] && CAIRN_GENDATA=$(realpath "$guess")
fi
if [[ -n ${CAIRN_BIN:-} && -n ${CAIRN_GENDATA:-} ]]; then
  extra=(time python3 zstd)
  ((with_restic)) && extra+=(restic)
  ((with_borg)) && extra+=(borgbackup)
  apt_install "${extra[@]}"
else
  install_deps
fi

# --- build ------------------------------------------------------------------
if [[ -z ${CAIRN_BIN:-} || -z ${CAIRN_GENDATA:-} ]]; then
  say "building the release preset (build/release)"
  [[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
  targets=()
  [[ -z ${CAIRN_BIN:-} ]] && targets+=(cairn)
  [[ -z ${CAIRN_GENDATA:-} ]] && targets+=(cairn-gendata)
  cmake --build build/release --target "${targets[@]}" >/dev/null
fi
cairn=$(realpath "${CAIRN_BIN:-$root/build/release/src/cairn}")
cairn_bin[cairn]=$cairn
cairn_bin[cairn-enc]=$cairn
gendata=$(realpath "${CAIRN_GENDATA:-$root/build/release/bench/cairn-gendata}")
[[ -x $cairn ]] || die "no cairn binary at $cairn"
[[ -x $gendata ]] || die "no cairn-gendata binary at $gendata"

# --- data -------------------------------------------------------------------
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
image=$dir/disk-$size.img
if ! python3 - "$image" "$size" <<'PY'
import json, sys
img, size = sys.argv[1:]
try:
    m = json.load(open(img + ".manifest.json"))
    import os
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

# --- measuring --------------------------------------------------------------
results=$dir/results.tsv
printf 'round\ttool\top\tseconds\trss_kib\tbytes\n' >"$results"
stamp_results "$dir"
cache_note="warm: the image (and each store) was read or written just before and fits in RAM"
drop_caches() {
  sync
  if ((cold)); then
    if { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
      cache_note="cold: page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every step"
    else
      cache_note="warm: --cold asked for, but /proc/sys/vm/drop_caches is not writable here"
    fi
  fi
}

# measure ROUND TOOL OP CMD...: times CMD (wall clock, peak RSS), logs its output.
measure() {
  local round=$1 tool=$2 op=$3
  shift 3
  local log="$dir/logs/r$round-$tool-$op.log" t0 t1 rss
  drop_caches
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" >"$log" 2>&1; then
    cat "$log" >&2
    die "round $round: $tool $op failed (log: $log)"
  fi
  t1=$(date +%s%N)
  rss=$(tail -n1 "$dir/logs/rss")
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$tool" "$op" "$secs" "$rss" "$bytes" >>"$results"
  printf '   %-7s %-16s %8.2f s %9.1f MiB/s  %7.1f MiB RSS\n' "$tool" "$op" "$secs" \
    "$(awk -v b="$bytes" -v s="$secs" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

# same_or_die WHAT FILE: a restore that wrote wrong bytes fails the benchmark.
same_or_die() {
  cmp "$image" "$2" >/dev/null || die "$1 restored different bytes: cmp $image $2"
}

store_size() {  # data bytes of files, and allocated bytes (du) of a store
  local data alloc
  data=$(find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  alloc=$(du -s -B1 "$1" | cut -f1)
  echo "$data $alloc"
}

# Copies + fsyncs (cp alone leaves the data in the page cache; the restores fsync).
copy_and_sync() { cp "$1" "$2" && sync "$2"; }
export -f copy_and_sync

export RESTIC_PASSWORD=cairn-bench
export RESTIC_CACHE_DIR=$dir/restic-cache
export BORG_BASE_DIR=$dir/borg-home  # borg's cache, config and security dirs
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
borg_compression=zstd,1
sizes=$dir/sizes.tsv
: >"$sizes"

# cairn-enc's key (the default KDF, as a user's): its passphrase from the
# environment, which only cairn-enc's commands are given the key file for.
export CAIRN_PASSPHRASE=cairn-bench
if ((with_encrypted)); then
  rm -f "$dir/key.json"
  "$cairn" key create "$dir/key.json" >"$dir/logs/key-create.log" 2>&1 ||
    { cat "$dir/logs/key-create.log" >&2; die "cairn key create failed"; }
fi

run_cairn() {  # run_cairn LABEL ROUND PHASE
  local t=$1 r=$2 bin=${cairn_bin[$1]}
  local store=$dir/$t-store out=$dir/$t-restored.img key=()
  [[ $t == cairn-enc ]] && key=(--keyfile "$dir/key.json")
  case $3 in
    backup1)
      rm -rf "$store"
      "$bin" init "$store" >/dev/null
      measure "$r" "$t" backup-first "$bin" backup -r "$store" --id vm/100 --json "${key[@]}" \
        disk0.img="$image"
      ;;
    backup2)
      measure "$r" "$t" backup-unchanged "$bin" backup -r "$store" --id vm/100 --json "${key[@]}" \
        disk0.img="$image"
      local new
      new=$(python3 -c 'import json,sys; print(sum(a["new_chunks"] for a in json.load(open(sys.argv[1]))["archives"]))' \
        "$dir/logs/r$r-$t-backup-unchanged.log")
      [[ $new == 0 ]] || die "$t: the second backup of the unchanged image stored $new new chunks"
      ;;
    restore)
      rm -f "$out"
      measure "$r" "$t" restore "$bin" restore -r "$store" vm/100/latest disk0.img "$out" --json \
        "${key[@]}"
      same_or_die "$t restore" "$out"
      rm -f "$out"
      ;;
    verify)
      measure "$r" "$t" verify "$bin" verify -r "$store" --json "${key[@]}"
      printf '%s\t%s\n' "$t" "$(store_size "$store")" >>"$sizes"
      ;;
  esac
}

run_restic() {  # run_restic restic ROUND PHASE
  local r=$2 repo=$dir/restic-repo out=$dir/restic-restored
  case $3 in
    backup1)
      rm -rf "$repo" "$RESTIC_CACHE_DIR"
      restic init -q --repo "$repo" >/dev/null
      measure "$r" restic backup-first restic backup -q --repo "$repo" --host bench "$image"
      ;;
    backup2)  # --force: re-read the image, as an image/device backup must
      measure "$r" restic backup-unchanged restic backup -q --force --repo "$repo" --host bench \
        "$image"
      ;;
    restore)
      rm -rf "$out"
      # restic does not fsync what it restores; cairn does: sync it inside the timing.
      measure "$r" restic restore bash -c \
        'restic restore -q --repo "$1" latest --target "$2" && sync "$2$3"' _ "$repo" "$out" "$image"
      same_or_die "restic restore" "$out$image"
      rm -rf "$out"
      ;;
    verify)
      measure "$r" restic verify restic check -q --read-data --repo "$repo"
      printf 'restic\t%s\n' "$(store_size "$repo")" >>"$sizes"
      ;;
  esac
}

# borg stores the path it is given: create from inside $dir, so the archive
# holds disk-SIZE.img and extracts to TARGET/disk-SIZE.img.
borg_create() { cd "$(dirname "$3")" && borg create "${@:4}" "$1::$2" "$(basename "$3")"; }
# borg does not fsync what it extracts either: sync it inside the timing.
# --sparse: zero chunks become holes, as in cairn.
borg_extract() { cd "$2" && borg extract --sparse "$1::$3" "$4" && sync "$4"; }
export -f borg_create borg_extract

run_borg() {  # run_borg borg ROUND PHASE
  local r=$2 repo=$dir/borg-repo out=$dir/borg-restored name
  name=$(basename "$image")
  case $3 in
    backup1)
      rm -rf "$repo" "$BORG_BASE_DIR"
      mkdir -p "$BORG_BASE_DIR"
      borg init --encryption=none "$repo" >/dev/null
      measure "$r" borg backup-first bash -c 'borg_create "$@"' _ "$repo" img-1 "$image" \
        --json --compression "$borg_compression"
      ;;
    backup2)  # --files-cache=disabled: re-read the image (else borg skips it by mtime/inode)
      measure "$r" borg backup-unchanged bash -c 'borg_create "$@"' _ "$repo" img-2 "$image" \
        --json --compression "$borg_compression" --files-cache=disabled
      local new
      new=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["archive"]["stats"]["deduplicated_size"])' \
        "$dir/logs/r$r-borg-backup-unchanged.log")
      ((new < 1048576)) || die "borg: the second backup of the unchanged image stored $new new bytes"
      ;;
    restore)
      rm -rf "$out"
      mkdir -p "$out"
      measure "$r" borg restore bash -c 'borg_extract "$@"' _ "$repo" "$out" img-2 "$name"
      same_or_die "borg extract" "$out/$name"
      rm -rf "$out"
      ;;
    verify)
      measure "$r" borg verify borg check --verify-data "$repo"
      printf 'borg\t%s\n' "$(store_size "$repo")" >>"$sizes"
      ;;
  esac
}

say "benchmark: $rounds round(s), image $image ($bytes bytes), work dir $dir"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  measure "$r" raw cat bash -c 'cat "$1" >/dev/null' _ "$image"
  measure "$r" raw sha256sum sha256sum "$image"
  measure "$r" raw zstd-1 bash -c 'zstd -1 -q -c "$1" >/dev/null' _ "$image"
  rm -f "$dir/copy.img"
  measure "$r" raw cp+fsync bash -c 'copy_and_sync "$1" "$2"' _ "$image" "$dir/copy.img"
  rm -f "$dir/copy.img"
  tools=(cairn "${extra_cairns[@]}")
  ((with_encrypted)) && tools+=(cairn-enc)
  ((with_restic)) && tools+=(restic)
  ((with_borg)) && tools+=(borg)
  if ((r % 2 == 0)); then  # alternate who goes first
    rev=()
    for ((i = ${#tools[@]} - 1; i >= 0; i--)); do rev+=("${tools[i]}"); done
    tools=("${rev[@]}")
  fi
  for phase in backup1 backup2 restore verify; do
    for t in "${tools[@]}"; do
      case $t in
        restic) run_restic restic "$r" "$phase" ;;
        borg) run_borg borg "$r" "$phase" ;;
        *) run_cairn "$t" "$r" "$phase" ;;
      esac
    done
  done
done

# --- report -----------------------------------------------------------------
if [[ -n ${CAIRN_BIN:-} && -z ${CAIRN_BENCH_COMMIT:-} ]] &&
  c=$(git -C "$(dirname "$cairn")" rev-parse --short HEAD 2>/dev/null); then
  # $CAIRN_BIN built in another checkout (a worktree): that checkout's commit
  top=$(git -C "$(dirname "$cairn")" rev-parse --show-toplevel)
  [[ -n $(git -C "$top" status --porcelain --untracked-files=no -- src CMakeLists.txt) ]] &&
    c+=" (with uncommitted changes in src/)"
  commit=$c
elif [[ -z ${CAIRN_BIN:-} ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git rev-parse --short HEAD)
  [[ -n $(git status --porcelain --untracked-files=no -- src CMakeLists.txt) ]] &&
    commit+=" (with uncommitted changes in src/)"
else  # an exported tree (git archive): say which commit it came from
  commit=${CAIRN_BENCH_COMMIT:-unknown}
fi
machine=$(
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $commit"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) online CPUs"
  echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- filesystem of $dir: $(findmnt -no FSTYPE,SOURCE -T "$dir" | tr -s ' ')"
  echo "- kernel: $(uname -r); OS: $(. /etc/os-release && echo "$PRETTY_NAME")"
  for t in "${extra_cairns[@]}"; do echo "- $t: ${cairn_bin[$t]}"; done
  versions="cairn $("$cairn" --version 2>/dev/null | head -n1 || echo '?')"
  ((with_restic)) && versions+="; $(restic version | cut -d' ' -f1-2)"
  ((with_borg)) && versions+="; $(borg --version) (\`borg init --encryption=none\`, \`--compression $borg_compression\`, default chunker)"
  versions+="; zstd $(zstd --version | grep -o 'v[0-9.]*' | head -n1)"
  echo "- versions: $versions"
  echo "- image: $bytes bytes from \`cairn-gendata image --size $size --seed 1\`, sha256 ${image_sha:0:16}…"
  echo "- page cache: $cache_note"
  echo "- rounds: $rounds"
)
table=$(python3 - "$results" "$sizes" <<'PY'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
sizes = {}
for l in open(sys.argv[2]):
    tool, data, alloc = l.split()
    sizes[tool] = (int(data), int(alloc))
ops = collections.OrderedDict()
for rnd, tool, op, secs, rss, nbytes in rows:
    ops.setdefault((tool, op), []).append((float(secs), int(rss), int(nbytes)))
order = {"raw": 0, "cairn": 1, "restic": 9, "borg": 10}
opo = ["cat", "sha256sum", "zstd-1", "cp+fsync", "backup-first", "backup-unchanged", "restore", "verify"]
mib = 1 << 20
print("| tool | operation | median MiB/s | min – max MiB/s | median s | peak RSS MiB | store: data / on disk MiB |")
print("|---|---|---:|---:|---:|---:|---:|")
for (tool, op), v in sorted(ops.items(), key=lambda kv: (order.get(kv[0][0], 5), kv[0][0], opo.index(kv[0][1]) if kv[0][1] in opo else 99)):
    rates = [b / mib / s for s, _, b in v]
    med_s = statistics.median(s for s, _, _ in v)
    rss = max(r for _, r, _ in v) / 1024
    store = ""
    if op == "backup-first" and tool in sizes:
        d, a = sizes[tool]
        store = f"{d / mib:.0f} / {a / mib:.0f}"
    print(f"| {tool} | {op} | {statistics.median(rates):.0f} | {min(rates):.0f} – {max(rates):.0f} "
          f"| {med_s:.2f} | {rss:.0f} | {store} |")
PY
)
echo
echo "$machine"
echo
echo "$table"

if ((write_doc)); then
  doc=docs/BENCHMARKS.md
  section=$(
    echo "<!-- image-bench:begin (written by bench/image_bench.sh; edit outside the markers) -->"
    echo "Latest run: \`$command_line\` ($rounds round(s), $size image)"
    echo
    echo "$machine"
    echo
    echo "$table"
    echo "<!-- image-bench:end -->"
  )
  if [[ -f $doc ]] && grep -q '<!-- image-bench:begin' "$doc"; then
    python3 - "$doc" "$section" <<'PY'
import re, sys
path, section = sys.argv[1:]
text = open(path).read()
text = re.sub(r"<!-- image-bench:begin.*?<!-- image-bench:end -->", lambda m: section, text, flags=re.S)
open(path, "w").write(text)
PY
  else
    printf '\n## Image backup/restore (sequential baseline)\n\n%s\n' "$section" >>"$doc"
  fi
  say "results written to $doc"
fi
