#!/usr/bin/env bash
# Second backup after 1 % of the data changed, and what it costs in space:
# cairn beside restic and borg, on a disk image and on a file tree from
# cairn-gendata; plus verify / check of the tree repositories with every
# byte read. The parts of the comparison suite the other scripts leave out.
#
#   bash bench/changed_bench.sh [--quick] [--rounds N] [--size 2G] [--files 20000]
#                               [--tree-size 1G] [--change-pct 1] [--piece 1M]
#                               [--image PATH] [--tree PATH] [--only image,tree]
#                               [--dir DIR] [--no-restic] [--no-borg]
#
#   --quick        1 round, 256 MiB image, tree of 2000 files / 128 MiB
#   --rounds N     rounds (default 2); fresh repositories every round, tools
#                  interleaved operation by operation, order reversed each round
#   --size S       image size (default 2G); --files N, --tree-size S: the tree
#   --change-pct P share of the data changed before the second backup (default 1)
#                    image: P % of its bytes overwritten with new random data in
#                           pieces of --piece bytes (default 1M) at evenly spread
#                           4 KiB-aligned offsets (so they do not start on 4 MiB
#                           chunk boundaries)
#                    tree:  every (100/P)-th regular file (by path) rewritten
#                           with new random bytes of the same size
#   --image PATH, --tree PATH  use these (read only) instead of generating
#                  DIR/disk-SIZE.img and DIR/tree-FILES-SIZE
#   --only LIST    image, tree or both (default)
#   --dir DIR      work directory (default /var/tmp/cairn-changed-bench; needs
#                  ~6x the data size free); also $CAIRN_BENCH_DIR
#
# Operations per data set, tool and round (each tool on a fresh repository):
#   backup-first    first backup                          MiB/s of the data
#   backup-changed  second backup after the change        MiB/s of the data
#   verify          (tree) cairn verify / restic check --read-data /
#                   borg check --verify-data over both snapshots   seconds
# The repository's size (du) is recorded after each backup: the growth from
# the first to the second backup is what 1 % of change costs in space.
# cairn's second image backup must store no more new chunks than the 4 MiB
# chunks the change touched (issue 2), or the run fails.
#
# Binaries: $CAIRN_BIN, $CAIRN_GENDATA (else build/release's; built when
# missing). Raw timings: DIR/results.tsv (bench/lib.sh's columns); the change
# made: DIR/change.json; tables: DIR/changed_bench.md (also printed).
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=changed_bench
source bench/lib.sh

command_line="bash bench/changed_bench.sh${*:+ $*}"
rounds=2
size=2G
files=20000
tree_size=1G
pct=1
piece=1M
image=
tree=
only=image,tree
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-changed-bench}
with_restic=1
with_borg=1
rounds_given=0
usage() { sed -n '7,40p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) size=256M; files=2000; tree_size=128M; ((rounds_given)) || rounds=1; shift ;;
    --rounds) rounds=$2; rounds_given=1; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --tree-size) tree_size=$2; shift 2 ;;
    --change-pct) pct=$2; shift 2 ;;
    --piece) piece=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --tree) tree=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --no-restic) with_restic=0; shift ;;
    --no-borg) with_borg=0; shift ;;
    -h|--help) usage ;;
    *) echo "changed_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "changed_bench: --rounds must be a positive number" >&2; exit 2; }
[[ $pct =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v p="$pct" 'BEGIN { exit !(p > 0 && p <= 50) }' ||
  { echo "changed_bench: --change-pct wants a number in (0, 50]" >&2; exit 2; }
declare -A want=()
IFS=, read -ra parts <<<"$only"
for s in "${parts[@]}"; do
  case $s in image|tree) want[$s]=1 ;; *) echo "changed_bench: --only takes image,tree" >&2; exit 2 ;; esac
done
piece_bytes=$(to_bytes "$piece")

extra=(time python3 coreutils)
((with_restic)) && extra+=(restic)
((with_borg)) && extra+=(borgbackup)
apt_install "${extra[@]}"
command -v restic >/dev/null || with_restic=0
command -v borg >/dev/null || with_borg=0
bench_bins

mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
if ((${want[image]:-0})); then
  [[ -n $image ]] || { image=$dir/disk-$size.img; ensure_image "$image" "$size"; }
  image=$(realpath "$image")
  image_bytes=$(stat -c %s "$image")
fi
if ((${want[tree]:-0})); then
  [[ -n $tree ]] || { tree=$dir/tree-$files-$tree_size; ensure_tree "$tree" "$files" "$tree_size"; }
  tree=$(realpath "$tree")
  tree_bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
fi
bench_repo_env
borg_compression=zstd,1
results=$dir/results.tsv
results_header >"$results"
stamp_results "$dir"
work_img=$dir/work.img
work_tree=$dir/work-tree

# The change, the same in every round. Image: pieces at evenly spread,
# 4 KiB-aligned offsets; prints "BYTES PIECES TOUCHED_4MIB_CHUNKS".
change_image() {
  python3 - "$1" "$pct" "$piece_bytes" <<'PY'
import os, random, sys
path, pct, piece = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
size = os.path.getsize(path)
want = int(size * pct / 100)
n = max(1, -(-want // piece))
rng = random.Random(7)
touched = set()
done = 0
with open(path, "r+b") as f:
    for k in range(n):
        length = min(piece, want - done)
        if length <= 0:
            break
        off = ((2 * k + 1) * size // (2 * n)) // 4096 * 4096
        length = min(length, size - off)
        f.seek(off)
        f.write(rng.randbytes(length))
        done += length
        touched.update(range(off >> 22, (off + length - 1 >> 22) + 1))
    os.fsync(f.fileno())
print(done, n, len(touched))
PY
}
# Tree: every (100/pct)-th regular file by path, rewritten with new random
# bytes of the same size; prints "BYTES FILES".
change_tree() {
  python3 - "$1" "$pct" <<'PY'
import os, random, sys
root, pct = sys.argv[1], float(sys.argv[2])
paths = []
for d, dirs, names in os.walk(root):
    for n in names:
        p = os.path.join(d, n)
        if os.path.isfile(p) and not os.path.islink(p):
            paths.append(p)
paths.sort()
step = max(1, round(100 / pct))
rng = random.Random(7)
done = files = 0
for p in paths[step // 2::step]:
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.write(rng.randbytes(size))
    done += size
    files += 1
print(done, files)
PY
}

cairn_backup() { "$1" backup -r "$2" --id "$3" --json "$4"; }
borg_create() { cd "$1" && borg create --json --compression "$3" "$2" "$4"; }
export -f cairn_backup borg_create

# run_op ROUND DATA OP TOOL
run_op() {
  local r=$1 data=$2 op=$3 tool=$4 src nbytes id arg
  if [[ $data == image ]]; then
    src=$work_img nbytes=$image_bytes id=vm/100 arg=disk0.img=$work_img
  else
    src=$work_tree nbytes=$tree_bytes id=host/bench arg=root.tree=$work_tree
  fi
  local store=$dir/$data-cairn-store rrepo=$dir/$data-restic-repo brepo=$dir/$data-borg-repo
  case $op:$tool in
    init:cairn) rm -rf "$store"; "$cairn" init "$store" >/dev/null ;;
    init:restic)
      rm -rf "$rrepo" "$RESTIC_CACHE_DIR"; restic init -q --repo "$rrepo" >/dev/null ;;
    init:borg)
      rm -rf "$brepo" "$BORG_BASE_DIR"; mkdir -p "$BORG_BASE_DIR"
      borg init --encryption=none "$brepo" >/dev/null 2>&1 ;;
    backup-*:cairn)
      repo=$store measure "$r" "$data" cairn "$op" "$nbytes" "$cairn" backup -r "$store" --id "$id" --json "$arg" ;;
    backup-*:restic)
      repo=$rrepo measure "$r" "$data" restic "$op" "$nbytes" restic backup -q --repo "$rrepo" --host bench "$src" ;;
    backup-*:borg)
      local name=first what=.
      [[ $op == backup-changed ]] && name=second
      # From inside the data's directory: the archive holds relative names.
      if [[ $data == image ]]; then
        repo=$brepo measure "$r" "$data" borg "$op" "$nbytes" bash -c 'borg_create "$@"' _ "$dir" \
          "$brepo::$name" "$borg_compression" "$(basename "$work_img")"
      else
        repo=$brepo measure "$r" "$data" borg "$op" "$nbytes" bash -c 'borg_create "$@"' _ "$work_tree" \
          "$brepo::$name" "$borg_compression" "$what"
      fi ;;
    verify:cairn)
      measure "$r" "$data" cairn verify "$nbytes" "$cairn" verify -r "$store" --no-ledger --json ;;
    verify:restic)
      measure "$r" "$data" restic verify "$nbytes" restic check -q --read-data --repo "$rrepo" ;;
    verify:borg)
      measure "$r" "$data" borg verify "$nbytes" borg check --verify-data "$brepo" ;;
    *) die "internal: no operation $op for $tool" ;;
  esac
}

tools=(cairn)
((with_restic)) && tools+=(restic)
((with_borg)) && tools+=(borg)
datasets=()
((${want[image]:-0})) && datasets+=(image)
((${want[tree]:-0})) && datasets+=(tree)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "benchmark: $rounds round(s), ${pct} % changed, data: ${datasets[*]}, tools: ${tools[*]}, work dir $dir"
echo '{}' >"$dir/change.json"
for ((r = 1; r <= rounds; r++)); do
  say "round $r/$rounds"
  for data in "${datasets[@]}"; do
    if [[ $data == image ]]; then
      rm -f "$work_img"; cp "$image" "$work_img"
    else
      rm -rf "$work_tree"; cp -a "$tree" "$work_tree"
    fi
    sync
    for op in init backup-first change backup-changed verify; do
      if [[ $op == change ]]; then
        if [[ $data == image ]]; then
          read -r changed pieces touched <<<"$(change_image "$work_img")"
          say "image: $changed bytes changed in $pieces pieces, $touched chunks of 4 MiB touched"
        else
          read -r changed nfiles <<<"$(change_tree "$work_tree")"
          say "tree: $nfiles files rewritten, $changed bytes"
        fi
        python3 - "$dir/change.json" "$data" "$changed" "${pieces:-}" "${touched:-}" "${nfiles:-}" \
          "${image_bytes:-0}" "${tree_bytes:-0}" "$pct" <<'PY'
import json, sys
path, data, changed, pieces, touched, nfiles, ib, tb, pct = sys.argv[1:]
j = json.load(open(path))
total = int(ib) if data == "image" else int(tb)
e = {"changed_bytes": int(changed), "data_bytes": total, "pct_asked": float(pct),
     "pct_changed": round(100 * int(changed) / total, 3)}
if data == "image":
    e.update(pieces=int(pieces), touched_chunks=int(touched))
else:
    e.update(files=int(nfiles))
j[data] = e
json.dump(j, open(path, "w"), indent=1)
PY
        sync
        continue
      fi
      [[ $op == verify && $data == image ]] && continue  # image verify: image_bench / verify_bench
      while read -r t; do run_op "$r" "$data" "$op" "$t"; done < <(in_order "$r" "${tools[@]}")
      if [[ $op == backup-changed && $data == image ]]; then
        new=$(python3 -c 'import json,sys; print(sum(a["new_chunks"] for a in json.load(open(sys.argv[1]))["archives"]))' \
          "$dir/logs/r$r-image-cairn-backup-changed.log")
        ((new <= touched)) || die "cairn stored $new new chunks for a change that touched $touched chunks"
        python3 - "$dir/change.json" "$new" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["image"]["cairn_new_chunks"] = int(sys.argv[2])
json.dump(j, open(sys.argv[1], "w"), indent=1)
PY
      fi
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$work_img" "$work_tree"

# --- report -----------------------------------------------------------------
versions="cairn $("$cairn" --version 2>/dev/null | awk 'NR == 1' || echo '?')"
((with_restic)) && versions+="; $(restic version | cut -d' ' -f1-2)"
((with_borg)) && versions+="; $(borg --version) (\`borg init --encryption=none\`, \`--compression $borg_compression\`)"
table=$(python3 - "$results" "$dir/change.json" <<'PY'
import collections, json, statistics, sys
MIB = 1 << 20
lines = open(sys.argv[1]).read().splitlines()
header = lines[0].split("\t")
rows = [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
change = json.load(open(sys.argv[2]))
by = collections.defaultdict(list)
for r in rows:
    by[(r["data"], r["op"], r["tool"])].append(r)
tools = [t for t in ("cairn", "restic", "borg") if any(k[2] == t for k in by)]
med = statistics.median
for data in ("image", "tree"):
    if not any(k[0] == data for k in by):
        continue
    c = change.get(data, {})
    what = (f"{c.get('changed_bytes', 0) / MIB:.1f} MiB ({c.get('pct_changed', 0)} %) in {c.get('pieces')} pieces, "
            f"{c.get('touched_chunks')} chunks of 4 MiB touched; cairn stored {c.get('cairn_new_chunks')} new chunks"
            if data == "image" else
            f"{c.get('files')} files rewritten, {c.get('changed_bytes', 0) / MIB:.1f} MiB ({c.get('pct_changed', 0)} %)")
    print(f"**{data}** ({c.get('data_bytes', 0) / MIB:.0f} MiB; change: {what})")
    print()
    print("| operation | " + " | ".join(f"{t} MiB/s (s)" for t in tools) + " | " +
          " | ".join(f"{t} peak RSS MiB" for t in tools) + " |")
    print("|---|" + "---:|" * (2 * len(tools)))
    for op in ("backup-first", "backup-changed", "verify"):
        cells, rss = [], []
        for t in tools:
            v = by.get((data, op, t))
            if not v:
                cells.append("–"); rss.append("–"); continue
            s = med(float(r["seconds"]) for r in v)
            rate = med(int(r["bytes"]) / MIB / float(r["seconds"]) for r in v)
            cells.append(f"{rate:.0f} ({s:.2f})")
            rss.append(f"{max(int(r['rss_kib']) for r in v) / 1024:.0f}")
        if any(x != "–" for x in cells):
            print(f"| {op} | " + " | ".join(cells) + " | " + " | ".join(rss) + " |")
    cells = []
    for t in tools:
        a = by.get((data, "backup-first", t)); b = by.get((data, "backup-changed", t))
        if a and b and a[0]["repo_bytes"] != "-" and b[0]["repo_bytes"] != "-":
            first = med(int(r["repo_bytes"]) for r in a); second = med(int(r["repo_bytes"]) for r in b)
            cells.append(f"{first / MIB:.0f} → {second / MIB:.0f} (+{(second - first) / MIB:.1f})")
        else:
            cells.append("–")
    print("| repository MiB (du): first → after the change (growth) | " + " | ".join(cells) +
          " |" + " |" * len(tools))
    print()
PY
)
section=$(
  echo "### Second backup with ${pct} % changed"
  echo
  echo "Latest run: \`$command_line\` ($rounds round(s); fresh repositories every round; medians)"
  echo
  echo "- versions: $versions"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end"
  echo "- data: image \`cairn-gendata image --size $size --seed 1\`; tree \`cairn-gendata tree --files $files --size $tree_size --seed 2\`"
  echo "- MiB/s = the data set's bytes ÷ wall-clock seconds of the command, the same for every tool"
  echo
  echo "$table"
)
printf '%s\n' "$section" >"$dir/changed_bench.md"
echo
echo "$section"
say "tables written to $dir/changed_bench.md"
