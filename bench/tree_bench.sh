#!/usr/bin/env bash
# Tree archive benchmark: cairn backup/restore/ls/cat of a directory tree
# beside restic and borg (and `cp -a` for restore), on one file tree from
# cairn-gendata, in one run.
#
#   bash bench/tree_bench.sh [--quick] [--rounds N] [--files N] [--size S]
#                            [--dir DIR] [--target-dir DIR] [--no-restic] [--no-borg]
#                            [--no-encrypted] [--update-docs]
#
#   --quick        --files 5000 --size 256M, 1 round (a few minutes)
#   --rounds N     rounds (default 2); every operation runs once per tool per
#                  round, the tools interleaved operation by operation, their
#                  order reversed from round to round; tables show medians
#   --files N      files in the tree (default 20000)
#   --size S       total bytes of file contents (default 1G)
#   --dir DIR      work directory (default /var/tmp/cairn-tree-bench; needs
#                  ~6x the tree size free); also $CAIRN_BENCH_DIR
#   --target-dir DIR  where the restores write (default: DIR/restored); a
#                  tmpfs like /dev/shm takes the disk out of the restore
#                  timings (the writeback of `sync` otherwise dominates them)
#   --no-restic, --no-borg   leave restic / borg out
#   --no-encrypted leave out cairn-enc: cairn with --keyfile on every command
#                  (the key from `cairn key create`, its default KDF), the
#                  figure to hold against restic, which always encrypts
#   --update-docs  also write the section between the tree-bench markers of
#                  docs/BENCHMARKS.md (appended when the markers are missing);
#                  without it the section only goes to DIR/tree_bench.md
#
# Operations (each tool, every round, on fresh repositories):
#   backup-1   first backup of the tree              MiB/s of file bytes
#   backup-2   second backup, nothing changed        MiB/s of file bytes
#   restore    full restore into a new directory, then `sync`   MiB/s
#              (cairn: --jobs auto; cairn-seq: --jobs 1; cp: `cp -a`)
#   ls         list every entry of the snapshot      seconds
#   cat        one small file to stdout              seconds
#              (cairn cat, restic dump, borg extract --stdout)
# Every restored tree is compared with the source (`diff -r --no-dereference`),
# every `cat` with the file: a wrong byte fails the run. The page cache stays
# warm (the tree and the repositories fit in RAM; dropping caches needs a
# writable /proc/sys/vm/drop_caches, which this benchmark does not assume).
#
# The cairn binary is $CAIRN_BIN if set, else build/release/src/cairn (the
# release preset is built when missing); cairn-gendata is $CAIRN_GENDATA, else
# next to $CAIRN_BIN (BUILD/bench/cairn-gendata), else build/release's.
# As root on Debian 12, installs what is missing (scripts/setup-deps.sh,
# restic, borgbackup, time). Raw timings: DIR/results.tsv; each command's
# output: DIR/logs/; tables: bench/tree_report.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=tree_bench
source bench/lib.sh  # stamp_results, commit_of; the helpers defined below override its own
root=$PWD

command_line="bash bench/tree_bench.sh${*:+ $*}"
[[ -n ${CAIRN_BIN:-} ]] && command_line="CAIRN_BIN=$CAIRN_BIN $command_line"
rounds=2
files=20000
size=1G
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-tree-bench}
with_restic=1
with_borg=1
update_docs=0
rounds_given=0
target_dir=
with_encrypted=1
usage() { sed -n '6,47p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) files=5000; size=256M; ((rounds_given)) || rounds=1; shift ;;
    --rounds) rounds=$2; rounds_given=1; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --target-dir) target_dir=$2; shift 2 ;;
    --no-restic) with_restic=0; shift ;;
    --no-borg) with_borg=0; shift ;;
    --no-encrypted) with_encrypted=0; shift ;;
    --update-docs) update_docs=1; shift ;;
    -h|--help) usage ;;
    *) echo "tree_bench: unknown argument '$1'" >&2; usage ;;
  esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'tree_bench: FAILED: %s\n' "$*" >&2; exit 1; }

[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "tree_bench: --rounds must be a positive number" >&2; exit 2; }
[[ $files =~ ^[1-9][0-9]*$ ]] || { echo "tree_bench: --files must be a positive number" >&2; exit 2; }
numfmt --from=iec "${size%B}" >/dev/null 2>&1 || { echo "tree_bench: cannot read size '$size'" >&2; exit 2; }

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
extra=(time python3 coreutils diffutils findutils)
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
  cmake --build build/release --target "${targets[@]}" >/dev/null
fi
cairn=$(realpath "${CAIRN_BIN:-$root/build/release/src/cairn}")
gendata=$(realpath "${CAIRN_GENDATA:-$root/build/release/bench/cairn-gendata}")
[[ -x $cairn ]] || die "no cairn binary at $cairn"
[[ -x $gendata ]] || die "no cairn-gendata binary at $gendata"

# --- data -------------------------------------------------------------------
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
data=$dir/tree-$files-$size
seed=2
if ! python3 - "$data" "$files" "$seed" <<'PY'
import json, os, sys
path, files, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    m = json.load(open(path + ".manifest.json"))
    ok = os.path.isdir(path) and m.get("generator") == "cairn-gendata" and \
        m.get("seed") == seed and m.get("files") == files and \
        not os.path.exists(path + ".partial")
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
then
  say "generating a tree of $files files, $size, with cairn-gendata"
  rm -rf "$data" "$data.manifest.json"
  touch "$data.partial"
  "$gendata" tree "$data" --files "$files" --size "$size" --seed "$seed" -q
  rm -f "$data.partial"
fi
# File bytes (each regular file once, hardlinks are not generated), counts.
read -r bytes nfiles <<<"$(find "$data" -type f -printf '%s\n' | awk '{ s += $1; n++ } END { print s + 0, n + 0 }')"
ndirs=$(find "$data" -type d | wc -l)
nlinks=$(find "$data" -type l | wc -l)
# The file of `cat`: the first (by name) regular file of 1-16 KiB.
small=$(cd "$data" && find . -type f -size +0 -size -17k -printf '%P\n' | LC_ALL=C sort | awk 'NR == 1')
[[ -n $small ]] || small=$(cd "$data" && find . -type f -printf '%P\n' | LC_ALL=C sort | awk 'NR == 1')
[[ -n $small ]] || die "the tree has no regular file"
small_bytes=$(stat -c %s "$data/$small")

export RESTIC_PASSWORD=cairn-bench
export RESTIC_CACHE_DIR=$dir/restic-cache
export BORG_BASE_DIR=$dir/borg-home
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
store=$dir/cairn-store
enc_store=$dir/cairn-enc-store
restic_repo=$dir/restic-repo
borg_repo=$dir/borg-repo
borg_compression=zstd,1
if [[ -n $target_dir ]]; then
  mkdir -p "$target_dir"
  target=$(cd "$target_dir" && pwd)/cairn-tree-bench-restored
else
  target=$dir/restored
fi
cat_out=$dir/cat.out

# --- measuring --------------------------------------------------------------
results=$dir/results.tsv
printf 'round\ttool\top\tseconds\trss_kib\tbytes\n' >"$results"
stamp_results "$dir"

# measure ROUND TOOL OP NBYTES CMD...: times CMD (wall clock, peak RSS) and
# appends a line to results.tsv; the command's stdout goes to $cat_out when
# OP is cat, to the log otherwise.
measure() {
  local round=$1 tool=$2 op=$3 nbytes=$4
  shift 4
  local log="$dir/logs/r$round-$tool-$op.log" t0 t1 rss secs status=0
  sync
  t0=$(date +%s%N)
  if [[ $op == cat ]]; then
    /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" </dev/null >"$cat_out" 2>"$log" || status=$?
  else
    /usr/bin/time -f '%M' -o "$dir/logs/rss" "$@" </dev/null >"$log" 2>&1 || status=$?
  fi
  if ((status != 0)); then
    tail -n 30 "$log" >&2
    die "round $round: $tool $op failed (log: $log)"
  fi
  t1=$(date +%s%N)
  rss=$(tail -n1 "$dir/logs/rss")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$tool" "$op" "$secs" "$rss" "$nbytes" >>"$results"
  printf '   %-9s %-9s %8.2f s %9.1f MiB/s %8.1f MiB RSS\n' "$tool" "$op" "$secs" \
    "$(awk -v b="$nbytes" -v s="$secs" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

# same_tree_or_die WHAT DIR: a restore that differs from the source fails the run.
same_tree_or_die() {
  diff -r --no-dereference "$data" "$2" >"$dir/logs/diff.log" 2>&1 ||
    die "$1 restored a different tree: diff -r --no-dereference $data $2 (see $dir/logs/diff.log)"
}
same_cat_or_die() {
  cmp "$data/$small" "$cat_out" >/dev/null || die "$1 printed different bytes for $small"
}

# Helpers run under /usr/bin/time (exported for bash -c).
# Every restore ends with `sync -f TARGET` (syncfs of the target's filesystem,
# what cairn itself does), so all tools pay the same writeback.
cairn_restore() { "$1" restore -r "$2" host/bench/latest root.tree "$3" "${@:4}" && sync -f "$3"; }
restic_restore() { restic restore -q --repo "$1" latest --target "$2" && sync -f "$2"; }
borg_extract() { mkdir -p "$2" && cd "$2" && borg extract "$1::second" && sync -f "$2"; }
cp_tree() { cp -a "$1" "$2" && sync -f "$2"; }
borg_create() { cd "$1" && borg create --compression "$3" "$2" .; }
export -f cairn_restore restic_restore borg_extract cp_tree borg_create

# cairn-enc's key: its passphrase from the environment; only cairn-enc's
# commands are given the key file.
export CAIRN_PASSPHRASE=cairn-bench
if ((with_encrypted)); then
  rm -f "$dir/key.json"
  "$cairn" key create "$dir/key.json" >"$dir/logs/key-create.log" 2>&1 ||
    { cat "$dir/logs/key-create.log" >&2; die "cairn key create failed"; }
fi

# run_op ROUND OP TOOL
run_op() {
  local r=$1 op=$2 tool=$3
  local store=$store key=()
  if [[ $tool == cairn-enc ]]; then
    store=$enc_store
    key=(--keyfile "$dir/key.json")
  fi
  case $op:$tool in
    init:cairn|init:cairn-enc)
      rm -rf "$store"; "$cairn" init "$store" >/dev/null ;;
    init:restic)
      rm -rf "$restic_repo" "$RESTIC_CACHE_DIR"; restic init -q --repo "$restic_repo" >/dev/null ;;
    init:borg)
      rm -rf "$borg_repo" "$BORG_BASE_DIR"; mkdir -p "$BORG_BASE_DIR"
      borg init --encryption=none "$borg_repo" >/dev/null 2>&1 ;;
    backup-1:cairn|backup-2:cairn|backup-1:cairn-enc|backup-2:cairn-enc)
      local t=01
      [[ $op == backup-2 ]] && t=02
      measure "$r" "$tool" "$op" "$bytes" "$cairn" backup -r "$store" --id host/bench \
        --time "2026-01-01T00:00:${t}Z" --json "${key[@]}" "root.tree=$data" ;;
    backup-1:restic|backup-2:restic)
      measure "$r" restic "$op" "$bytes" restic backup -q --repo "$restic_repo" --host bench "$data" ;;
    backup-1:borg|backup-2:borg)
      local name=first
      [[ $op == backup-2 ]] && name=second
      measure "$r" borg "$op" "$bytes" bash -c 'borg_create "$1" "$2" "$3"' _ "$data" \
        "$borg_repo::$name" "$borg_compression" ;;
    restore:cairn|restore:cairn-seq|restore:cairn-enc)
      rm -rf "$target"; sync
      local extra=("${key[@]}")
      [[ $tool == cairn-seq ]] && extra=(--jobs 1)
      measure "$r" "$tool" restore "$bytes" bash -c 'cairn_restore "$@"' _ "$cairn" "$store" \
        "$target" "${extra[@]}"
      same_tree_or_die "$tool restore" "$target"
      rm -rf "$target" ;;
    restore:restic)
      rm -rf "$target"; sync
      measure "$r" restic restore "$bytes" bash -c 'restic_restore "$1" "$2"' _ "$restic_repo" "$target"
      same_tree_or_die "restic restore" "$target$data"
      rm -rf "$target" ;;
    restore:borg)
      rm -rf "$target"; sync
      measure "$r" borg restore "$bytes" bash -c 'borg_extract "$1" "$2"' _ "$borg_repo" "$target"
      same_tree_or_die "borg extract" "$target"
      rm -rf "$target" ;;
    restore:cp)
      rm -rf "$target"; sync
      measure "$r" cp restore "$bytes" bash -c 'cp_tree "$1" "$2"' _ "$data" "$target"
      same_tree_or_die "cp -a" "$target"
      rm -rf "$target" ;;
    ls:cairn|ls:cairn-enc)
      measure "$r" "$tool" ls 0 "$cairn" ls -r "$store" host/bench/latest root.tree "${key[@]}" ;;
    ls:restic)
      measure "$r" restic ls 0 restic ls -q --repo "$restic_repo" latest ;;
    ls:borg)
      measure "$r" borg ls 0 borg list "$borg_repo::second" ;;
    cat:cairn|cat:cairn-enc)
      measure "$r" "$tool" cat "$small_bytes" "$cairn" cat -r "$store" host/bench/latest root.tree \
        "$small" "${key[@]}"
      same_cat_or_die "$tool cat" ;;
    cat:restic)
      measure "$r" restic cat "$small_bytes" restic dump -q --repo "$restic_repo" latest "$data/$small"
      same_cat_or_die "restic dump" ;;
    cat:borg)
      measure "$r" borg cat "$small_bytes" borg extract --stdout "$borg_repo::second" "$small"
      same_cat_or_die "borg extract --stdout" ;;
    *:cairn-seq|*:cp) ;;  # restore only
    *) die "internal: no operation $op for $tool" ;;
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

tools=(cairn)
((with_encrypted)) && tools+=(cairn-enc)
((with_restic)) && tools+=(restic)
((with_borg)) && tools+=(borg)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "benchmark: $rounds round(s), tree $data ($nfiles files, $ndirs directories, $nlinks symlinks, $bytes bytes), work dir $dir"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  for op in init backup-1 backup-2 restore ls cat; do
    list=("${tools[@]}")
    [[ $op == restore ]] && list+=(cairn-seq cp)
    while read -r t; do run_op "$r" "$op" "$t"; done < <(in_order "$r" "${list[@]}")
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
store_bytes() { du -s -B1 "$1" 2>/dev/null | cut -f1; }
sizes="cairn $(store_bytes "$store")"
((with_encrypted)) && sizes+=", cairn-enc $(store_bytes "$enc_store")"
((with_restic)) && sizes+=", restic $(store_bytes "$restic_repo")"
((with_borg)) && sizes+=", borg $(store_bytes "$borg_repo")"

# --- report -----------------------------------------------------------------
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
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | awk 'NR == 1'), $(nproc) online CPUs (nproc)"
  echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- filesystem of $dir: $(findmnt -no FSTYPE,SOURCE -T "$dir" | tr -s ' ')"
  echo "- restores write to $target: $(findmnt -no FSTYPE,SOURCE -T "$(dirname "$target")" | tr -s ' ')"
  echo "- kernel: $(uname -r); OS: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end"
  versions="cairn $("$cairn" --version 2>/dev/null | awk 'NR == 1' || echo '?')"
  ((with_restic)) && versions+="; $(restic version | cut -d' ' -f1-2) (default repository version and compression)"
  ((with_borg)) && versions+="; $(borg --version) (\`borg init --encryption=none\`, \`--compression $borg_compression\`)"
  echo "- versions: $versions"
  echo "- tree: \`cairn-gendata tree --files $files --size $size --seed $seed\`: $nfiles files, $ndirs directories, $nlinks symlinks, $bytes bytes of content"
  echo "- single file: \`$small\` ($small_bytes bytes)"
  echo "- repository sizes after the last round (du, bytes): $sizes"
  echo "- page cache: warm (the tree and the repositories fit in RAM; caches are not dropped)"
  echo "- rounds: $rounds"
)
tables=$(python3 bench/tree_report.py "$results")
section=$(
  echo "<!-- tree-bench:begin (written by bench/tree_bench.sh; edit outside the markers) -->"
  echo "## Tree archives"
  echo
  echo "Backup, restore, listing and single-file reads of a directory tree, cairn beside restic"
  echo "and borg, on fresh repositories every round, warm page cache. Throughput is the tree's"
  echo "file bytes over the wall-clock time of the command; every restore is followed by"
  echo "\`sync -f TARGET\` (inside the timing, the same for every tool) and checked with \`diff -r\`."
  echo
  echo '```sh'
  echo 'bash bench/tree_bench.sh                 # 2 rounds, 20000 files, 1 GiB'
  echo 'bash bench/tree_bench.sh --quick         # 1 round, 5000 files, 256 MiB'
  echo 'bash bench/tree_bench.sh --target-dir /dev/shm   # restores to tmpfs: no disk in the timings'
  echo 'bash bench/tree_bench.sh --update-docs   # also rewrite this section'
  echo '```'
  echo
  echo "- **backup-1** / **backup-2**: first backup, then a second one with nothing changed"
  echo "  (\`cairn backup --id host/bench root.tree=DIR\`, \`restic backup\`, \`borg create\` from inside DIR)."
  echo "- **restore**: \`cairn restore SNAP root.tree NEW\` (\`--jobs auto\`; cairn-seq: \`--jobs 1\`),"
  echo "  \`restic restore latest --target NEW\`, \`borg extract\` in NEW, and \`cp -a DIR NEW\` as the copy limit."
  echo "- **ls**: \`cairn ls\`, \`restic ls latest\`, \`borg list REPO::ARCHIVE\` (output to a file)."
  echo "- **cat**: one small file to stdout: \`cairn cat\`, \`restic dump\`, \`borg extract --stdout\`."
  echo "- Raw timings: \`DIR/results.tsv\` (default \`/var/tmp/cairn-tree-bench\`); each command's"
  echo "  output: \`DIR/logs/\`; tables: \`bench/tree_report.py\`."
  echo
  echo "Latest run: \`$command_line\`"
  echo
  echo "$machine"
  echo
  echo "$tables"
  echo "<!-- tree-bench:end -->"
)
printf '%s\n' "$section" >"$dir/tree_bench.md"
echo
echo "$section"
say "section written to $dir/tree_bench.md"
if ((update_docs)); then
  doc=docs/BENCHMARKS.md
  if [[ -f $doc ]] && grep -q '<!-- tree-bench:begin' "$doc"; then
    python3 - "$doc" "$section" <<'PY'
import re, sys
path, section = sys.argv[1:]
text = open(path).read()
text = re.sub(r"<!-- tree-bench:begin.*?<!-- tree-bench:end -->", lambda m: section, text, flags=re.S)
open(path, "w").write(text)
PY
  else
    printf '\n%s\n' "$section" >>"$doc"
  fi
  say "results written to $doc"
fi
