#!/usr/bin/env bash
# What client-side encryption (issue 7) costs: cairn backup, restore (to a
# file and --rehearse) and verify of the same data, plain and encrypted, side
# by side on this machine. Issue 7's target: restore and verify of encrypted
# data within 10 % of plain.
#
#   bash bench/crypt_bench.sh [--quick] [--runs N] [--size 1G] [--image PATH]
#                             [--with-tree] [--files 20000] [--tree-size 1G]
#                             [--default-kdf] [--dir DIR]
#
#   --quick        3 runs (default 5); same data
#   --runs N       runs; in each, every operation runs plain and encrypted one
#                  after the other, which goes first alternating run by run
#   --size S       image size (default 1G; cairn-gendata image, seed 1: the VM
#                  image mix of zeros, random, text and duplicates);
#                  --image PATH uses that file instead (read only)
#   --with-tree    also a file tree (cairn-gendata tree, seed 2) of --files
#                  files (default 20000) and --tree-size bytes (default 1G)
#   --default-kdf  the timed commands use the key wrapped with `cairn key
#                  create`'s own KDF (scrypt N=2^16, r=8), whose unwrap every
#                  encrypted command pays once when it starts; by default they
#                  use the same key rewrapped with CAIRN_TEST_WEAK_KDF=1, so the
#                  figures are those of the data path, and the unwrap is
#                  measured on its own (operation "unwrap") and added in the
#                  table's last columns
#   --dir DIR      work directory (default /var/tmp/cairn-crypt-bench; needs
#                  ~4x the data size free); also $CAIRN_BENCH_DIR
#
# Operations per data set, variant (plain, encrypted) and run:
#   backup    cairn backup into a fresh datastore        MiB/s of the data
#   restore   cairn restore to a new file (image) or directory (tree)
#   rehearse  cairn restore --rehearse (fetch, decode, check; writes nothing)
#   verify    cairn verify --no-ledger (every chunk of the datastore read and
#             checked each run; with the key, the content too)
#   unwrap    (once per run) cairn verify of an empty datastore without a key,
#             with the weak-KDF key and with the default-KDF key: the key
#             file's KDF cost, paid once per encrypted command
# The encrypted variant passes --keyfile to every command (backup, restore,
# verify). Besides wall-clock seconds, each command's CPU seconds (user +
# sys, /usr/bin/time) are recorded: on a shared, busy machine the CPU ratio
# is steadier than the wall-clock one. Everything runs with a warm page cache: the datastore was just
# written and fits in memory, and this script cannot drop caches; so these
# are the CPU costs of encryption, not disk ones. Every restored image is
# compared with the original (cmp, untimed) in the first run, and encrypted
# verify must report its content checked.
#
# Binaries: $CAIRN_BIN, $CAIRN_GENDATA (else build/release's; built when
# missing). Raw timings: DIR/results.tsv (bench/lib.sh's columns) and
# DIR/cpu.tsv (CPU seconds of each command); table: DIR/crypt_bench.md (also
# printed).
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=crypt_bench
source bench/lib.sh

command_line="bash bench/crypt_bench.sh${*:+ $*}"
runs=5
size=1G
image=
with_tree=0
files=20000
tree_size=1G
default_kdf=0
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-crypt-bench}
runs_given=0
usage() { sed -n '7,28p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) ((runs_given)) || runs=3; shift ;;
    --runs) runs=$2; runs_given=1; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --with-tree) with_tree=1; shift ;;
    --files) files=$2; shift 2 ;;
    --tree-size) tree_size=$2; shift 2 ;;
    --default-kdf) default_kdf=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "crypt_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "crypt_bench: --runs must be a positive number" >&2; exit 2; }

apt_install time python3 coreutils
bench_bins
"$cairn" key --help >/dev/null 2>&1 || die "this cairn has no \`key\` command (issue 7)"

mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
image_note="\`cairn-gendata image --size $size --seed 1\`"
[[ -n $image ]] && image_note="$image (given with --image)"
[[ -n $image ]] || { image=$dir/disk-$size.img; ensure_image "$image" "$size"; }
image=$(realpath "$image")
image_bytes=$(stat -c %s "$image")
datasets=(image)
tree= tree_bytes=0
if ((with_tree)); then
  tree=$dir/tree-$files-$tree_size
  ensure_tree "$tree" "$files" "$tree_size"
  tree=$(realpath "$tree")
  tree_bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  datasets+=(tree)
fi
results=$dir/results.tsv
results_header >"$results"
stamp_results "$dir"

# The key, wrapped twice: with `cairn key create`'s default KDF (key.json)
# and, the same master key, with the weak test KDF (key-weak.json). Its
# passphrase comes from the environment; plain commands get neither a key
# file nor CAIRN_KEYFILE.
unset CAIRN_KEYFILE CAIRN_PASSPHRASE_FILE CAIRN_TEST_WEAK_KDF
export CAIRN_PASSPHRASE=cairn-crypt-bench
key=$dir/key.json weak_key=$dir/key-weak.json
rm -f "$key" "$weak_key"
"$cairn" key create "$key" >"$dir/logs/key-create.log" 2>&1 ||
  { cat "$dir/logs/key-create.log" >&2; die "cairn key create failed"; }
cp "$key" "$weak_key"
printf '%s' "$CAIRN_PASSPHRASE" >"$dir/passphrase"
CAIRN_TEST_WEAK_KDF=1 "$cairn" key change-passphrase "$weak_key" --new-passphrase-file "$dir/passphrase" \
  --kdf scrypt >>"$dir/logs/key-create.log" 2>&1 ||
  { cat "$dir/logs/key-create.log" >&2; die "cairn key change-passphrase (weak KDF) failed"; }
rm -f "$dir/passphrase"
kdf_of() { "$cairn" key show "$1" 2>/dev/null | sed -n 's/^kdf *//p' | awk 'NR == 1'; }
if ((default_kdf)); then
  key_args=(--keyfile "$key")
  kdf_note="the default KDF ($(kdf_of "$key")) in every timed command"
else
  key_args=(--keyfile "$weak_key")
  kdf_note="timed commands: the test KDF ($(kdf_of "$weak_key"), CAIRN_TEST_WEAK_KDF=1); unwrap measured with the default ($(kdf_of "$key"))"
fi
empty=$dir/empty-store
rm -rf "$empty"
"$cairn" init "$empty" >/dev/null

store_of() { echo "$dir/$1-$2-store"; }  # DATA VARIANT
keys_for() { [[ $1 == encrypted ]] && printf '%s\n' "${key_args[@]}"; return 0; }

# timed RUN DATA VARIANT OP NBYTES CMD...: lib.sh's measure, with the CPU
# seconds (user + sys) of CMD appended to $cpu_results.
cpu_results=$dir/cpu.tsv
printf 'round\tdata\ttool\top\twall_s\tuser_s\tsys_s\n' >"$cpu_results"
timed() {
  local r=$1 data=$2 v=$3 op=$4 nbytes=$5 f
  shift 5
  f=$dir/logs/cpu-r$r-$data-$v-$op
  measure "$r" "$data" "$v" "$op" "$nbytes" /usr/bin/time -f '%e %U %S' -o "$f" "$@"
  printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$data" "$v" "$op" "$(tail -n1 "$f" | tr ' ' '\t')" >>"$cpu_results"
}

# run_op RUN DATA OP VARIANT
run_op() {
  local r=$1 data=$2 op=$3 v=$4 nbytes id arg archive target
  local store
  store=$(store_of "$data" "$v")
  local -a k
  mapfile -t k < <(keys_for "$v")
  if [[ $data == image ]]; then
    nbytes=$image_bytes id=vm/100 archive=disk0.img arg=disk0.img=$image
  else
    nbytes=$tree_bytes id=host/bench archive=root.tree arg=root.tree=$tree
  fi
  target=$dir/restored-$data-$v
  case $op in
    backup)
      rm -rf "$store"
      "$cairn" init "$store" >/dev/null
      repo=$store timed "$r" "$data" "$v" backup "$nbytes" \
        "$cairn" backup -r "$store" "${k[@]}" --id "$id" --json "$arg" ;;
    restore)
      rm -rf "$target"
      timed "$r" "$data" "$v" restore "$nbytes" \
        "$cairn" restore -r "$store" "${k[@]}" --json "$id/latest" "$archive" "$target"
      if ((r == 1)); then
        if [[ $data == image ]]; then
          cmp -s "$image" "$target" || die "run $r: the $v restore of the image differs from it"
        else
          diff -r -q "$tree" "$target" >/dev/null || die "run $r: the $v restore of the tree differs from it"
        fi
      fi
      rm -rf "$target" ;;
    rehearse)
      timed "$r" "$data" "$v" rehearse "$nbytes" \
        "$cairn" restore -r "$store" "${k[@]}" --json "$id/latest" "$archive" --rehearse ;;
    verify)
      timed "$r" "$data" "$v" verify "$nbytes" \
        "$cairn" verify -r "$store" "${k[@]}" --no-ledger --json
      local log=$dir/logs/r$r-$data-$v-verify.log
      if [[ $v == encrypted ]] && ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("content_checked") else 1)' "$log"; then
        die "run $r: encrypted verify did not check the content (log: $log)"
      fi ;;
    unwrap)  # variants: plain (no key), encrypted (the timed commands' key), default-kdf
      [[ $v == default-kdf ]] && k=(--keyfile "$key")
      timed "$r" key "$v" unwrap 0 "$cairn" verify -r "$empty" "${k[@]}" --no-ledger --json ;;
    *) die "internal: no operation $op" ;;
  esac
}

variants=(plain encrypted)
load_start=$(cut -d' ' -f1-3 /proc/loadavg) psi_start=$(psi)
cat "$image" >/dev/null  # warm the cache
say "benchmark: $runs run(s), data: ${datasets[*]}, key KDF: $kdf_note, work dir $dir"
for ((r = 1; r <= runs; r++)); do
  say "run $r/$runs"
  while read -r v; do run_op "$r" key unwrap "$v"; done < <(in_order "$r" plain encrypted default-kdf)
  for data in "${datasets[@]}"; do
    for op in backup restore rehearse verify; do
      while read -r v; do run_op "$r" "$data" "$op" "$v"; done < <(in_order "$r" "${variants[@]}")
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg) psi_end=$(psi)
stored=$(for data in "${datasets[@]}"; do
  for v in "${variants[@]}"; do
    printf '%s %s %s\n' "$data" "$v" "$(du -s -B1 "$(store_of "$data" "$v")" | cut -f1)"
  done
done)

# --- report -----------------------------------------------------------------
table=$(python3 - "$results" "$cpu_results" "$image_bytes" "$tree_bytes" "$default_kdf" "$stored" <<'PY'
import collections, statistics, sys
MIB = 1 << 20
res, cpu_path, image_bytes, tree_bytes, default_kdf, stored_text = sys.argv[1:]
sizes = {"image": int(image_bytes), "tree": int(tree_bytes)}
default_kdf = default_kdf == "1"
stored = {}
for l in stored_text.splitlines():
    d, v, b = l.split()
    stored[(d, v)] = int(b)
def table(path):
    lines = open(path).read().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
wall = collections.defaultdict(dict)  # (data, op, variant) -> {run: seconds}
for r in table(res):
    wall[(r["data"], r["op"], r["tool"])][int(r["round"])] = float(r["seconds"])
cpu = collections.defaultdict(dict)
for r in table(cpu_path):
    cpu[(r["data"], r["op"], r["tool"])][int(r["round"])] = float(r["user_s"]) + float(r["sys_s"])
med = statistics.median
u = {v: med(wall[("key", "unwrap", v)].values()) for v in ("plain", "encrypted", "default-kdf")
     if wall.get(("key", "unwrap", v))}
# What the default KDF's unwrap adds to a command, beyond the timed key's.
extra = None
if len(u) == 3:
    extra = -(u["encrypted"] - u["plain"]) if default_kdf else u["default-kdf"] - u["encrypted"]
target_ops = {"restore", "rehearse", "verify"}
last = "without the key unwrap" if default_kdf else "with the default KDF's unwrap"
print("| data | operation | plain s (MiB/s) | encrypted s (MiB/s) | **encrypted / plain** (median s) | "
      "per-run ratios min – median – max | CPU s plain → encrypted (ratio) | " + last +
      " | target ≤ 1.10 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for data in ("image", "tree"):
    for op in ("backup", "restore", "rehearse", "verify"):
        p, e = wall.get((data, op, "plain")), wall.get((data, op, "encrypted"))
        if not p or not e:
            continue
        n = sizes[data]
        mp, me = med(p.values()), med(e.values())
        ratios = sorted(e[k] / p[k] for k in p if k in e)
        cp, ce = cpu.get((data, op, "plain")), cpu.get((data, op, "encrypted"))
        cpu_cell = (f"{med(cp.values()):.2f} → {med(ce.values()):.2f} ({med(ce.values()) / med(cp.values()):.3f})"
                    if cp and ce else "–")
        adj = f"{(me + extra) / mp:.3f}" if extra is not None else "–"
        ok = ""
        if op in target_ops:
            ok = "yes" if me / mp <= 1.10 else "no"
        spread = lambda v: (max(v.values()) - min(v.values())) / 2
        print(f"| {data} | {op} | {mp:.2f} ({n / MIB / mp:.0f}) ± {spread(p):.2f} | "
              f"{me:.2f} ({n / MIB / me:.0f}) ± {spread(e):.2f} | **{me / mp:.3f}** | "
              f"{ratios[0]:.3f} – {med(ratios):.3f} – {ratios[-1]:.3f} | {cpu_cell} | {adj} | {ok} |")
print()
if len(u) == 3:
    print(f"Key unwrap (`cairn verify` of an empty datastore): {u['plain']:.3f} s without a key, "
          f"{u['encrypted']:.3f} s with the timed commands' key, {u['default-kdf']:.3f} s with the "
          f"default-KDF key (medians): the default KDF costs **{u['default-kdf'] - u['plain']:.2f} s** "
          f"once per encrypted command.")
    print()
for data in ("image", "tree"):
    if (data, "plain") in stored:
        p, e = stored[(data, "plain")], stored[(data, "encrypted")]
        print(f"- {data}: {sizes[data] / MIB:.0f} MiB of data; datastore after backup: plain {p / MIB:.0f} MiB, "
              f"encrypted {e / MIB:.0f} MiB (du)")
PY
)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'aes|vaes|pclmulqdq|vpclmulqdq|sha_ni|avx2|avx512f' | tr '\n' ' ')
section=$(
  echo "### Encryption: plain vs encrypted"
  echo
  echo "Latest run: \`$command_line\` ($runs run(s), plain and encrypted interleaved run by run, who goes first alternating; medians; ± = half the min–max spread)"
  echo
  machine_details "$dir"
  echo "- CPU flags for crypto: ${flags:-none}"
  echo "- cairn: $("$cairn" --version 2>/dev/null | awk 'NR == 1' || echo '?'); key KDF: $kdf_note"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end; CPU pressure (some avg300): $psi_start at the start, $psi_end at the end"
  echo "- data: image $image_note$( ((with_tree)) && echo "; tree \`cairn-gendata tree --files $files --size $tree_size --seed 2\`")"
  echo "- warm page cache throughout (the datastores were just written; caches are not dropped): CPU cost, not disk"
  echo "- MiB/s = the data's bytes ÷ wall-clock seconds of the whole command (start-up and key unwrap included); CPU s = user + sys"
  echo
  echo "$table"
)
printf '%s\n' "$section" >"$dir/crypt_bench.md"
echo
echo "$section"
say "tables written to $dir/crypt_bench.md"
