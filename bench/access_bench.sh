#!/usr/bin/env bash
# Instant access (issue 25): `cairn nbd` and `cairn mount` on the suite's
# data sets (a cairn-gendata image and tree), beside `cairn restore`.
#
#   bash bench/access_bench.sh [--quick] [--rounds N] [--size 2G] [--files 20000]
#                              [--tree-size 1G] [--image PATH] [--tree PATH]
#                              [--dir DIR] [--update-docs]
#
#   --quick        128 MiB image, 2000 files / 128 MiB, 1 round, 3 s of random reads
#   --rounds N     rounds (default 3); tables show medians
#   --image, --tree  the cairn-gendata image (seed 1) and tree (seed 2) to use
#                  (generated there when missing; bench/run_all.sh passes its own)
#   --dir DIR      work directory (default /var/tmp/cairn-access-bench)
#   --update-docs  also write the section between the access-bench markers of
#                  docs/BENCHMARKS.md; without it the section goes to
#                  DIR/access_bench.md only
#
# Measured, each round (the issue's targets in brackets):
#   first-byte    seconds from starting `cairn nbd` (or `cairn mount`) until the
#                 first 4 KiB of the image can be read (bench/access_probe.py:
#                 its own NBD client; open+read on the mount), local store and
#                 through `cairn serve` on loopback TLS [< 1 s, local]
#   sequential    `cairn restore ... - >/dev/null`, `cairn restore --rehearse`
#                 (fetch, decode, check; nothing written), `nbdcopy URI null:` of the export, `cat` of the
#                 image file in the mount > /dev/null: all to nowhere
#                 [nbdcopy and cat >= 0.7x `cairn restore ... - >/dev/null`;
#                 the rehearsal is shown as the stricter reference]
#   to a file     `cairn restore` of the image to a file, `cp` of it out of the
#                 mount, `nbdcopy` of the export to a file, each + sync, on
#                 DIR's file system (cp and nbdcopy skip the holes, as
#                 restore does) [>= 0.7x restore]; `cp` of the source
#                 image (a local file) beside them: what cp itself costs
#   random        4 KiB reads at random aligned offsets, 4 threads, 10 s, via
#                 the export and the mount: IOPS, plaintext bytes the cache
#                 loaded per byte read, peak RSS of cairn (/usr/bin/time) beside
#                 --cache (256M) [RSS within the cache + a fixed overhead]
#   tree          a fresh mount each: `find` over the tree, `cat` of one small
#                 file [< 1 s each]; `cp -a` of the tree out of the mount beside
#                 `cairn restore` of it, each followed by `sync`, same target
#                 file system [cp -a >= 0.5x restore's speed]; `cp -a` of the
#                 source tree (a local directory) beside them: cp -a's own cost
# Ratios are medians of each round's ratio (the pair ran side by side).
# On a shared machine run it as `chrt -r 10 bash bench/access_bench.sh ...`
# (round-robin real-time priority: the measured commands are not preempted
# by batch work; the kernel still keeps 5 % for everything else).
# The page cache stays warm (the datastore fits in RAM); the store is local
# unless the row says remote. Raw numbers: DIR/results.tsv; logs: DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=access_bench
source bench/lib.sh

command_line="bash bench/access_bench.sh${*:+ $*}"
rounds=3
size=2G
files=20000
tree_size=1G
seconds=10
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-access-bench}
update_docs=0
rounds_given=0
quick=0
image=
tree=
usage() { sed -n '5,48p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --rounds) rounds=$2; rounds_given=1; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --tree-size) tree_size=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --tree) tree=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --update-docs) update_docs=1; shift ;;
    -h|--help) usage ;;
    *) echo "access_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
if ((quick)); then
  size=128M files=2000 tree_size=128M seconds=3
  ((rounds_given)) || rounds=1
fi

apt_install time libnbd-bin fuse3 python3
bench_bins --no-synth
mkdir -p "$dir/logs" "$dir/data"
probe="python3 $PWD/bench/access_probe.py"
image=${image:-$dir/data/image-$size}
tree=${tree:-$dir/data/tree-$files}
ensure_image "$image" "$size"
ensure_tree "$tree" "$files" "$tree_size"
image_bytes=$(stat -c %s "$image")
tree_bytes=$(du -sb --apparent-size "$tree" | cut -f1)

store=$dir/store
if [[ ! -f $store/.ready-$size-$files ]]; then
  say "backing up the image and the tree into $store"
  rm -rf "$store"
  "$cairn" init "$store" >/dev/null
  "$cairn" backup -r "$store" --id vm/100 "disk0.img=$image" >"$dir/logs/backup-image.log"
  "$cairn" backup -r "$store" --id host/web "root.tree=$tree" >"$dir/logs/backup-tree.log"
  touch "$store/.ready-$size-$files"
fi

# A cairn serve on loopback for the remote rows.
state=$dir/state cache=$dir/cache
rm -rf "$state" "$cache"
mkdir -p "$state"
token=$("$cairn" token create bench --state-dir "$state" --store main --role reader 2>/dev/null)
"$cairn" serve --listen 127.0.0.1:0 --store "main=$store" --state-dir "$state" \
  </dev/null >"$dir/logs/serve.out" 2>"$dir/logs/serve.err" &
server_pid=$!
mnt=$dir/mnt
cleanup() {
  mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt"
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 300); do grep -q 'listening on' "$dir/logs/serve.out" && break; sleep 0.1; done
line=$(grep -m1 'listening on' "$dir/logs/serve.out") || die "cairn serve did not start"
url=$(grep -o 'https://127.0.0.1:[0-9]*' <<<"$line")/main
fingerprint=$(grep -o 'fingerprint [0-9a-f:]*' <<<"$line" | cut -d' ' -f2)
remote_env=(CAIRN_TOKEN="$token" CAIRN_FINGERPRINT="$fingerprint" CAIRN_CACHE_DIR="$cache")
mkdir -p "$mnt"
sock=$dir/nbd.sock

results=$dir/results.tsv
printf 'round\tcase\tvalue\tunit\textra\n' >"$results"
stamp_results "$dir"
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:--}" >>"$results"; }
secs_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }

# stop PID: SIGTERM and wait (a mount unmounts itself).
stop() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  mountpoint -q "$mnt" && fusermount3 -u -z "$mnt" || true
}
wait_mounted() { for _ in $(seq 600); do mountpoint -q "$mnt" && return 0; sleep 0.05; done; die "no mount"; }
wait_socket() { for _ in $(seq 600); do [[ -S $sock ]] && return 0; sleep 0.05; done; die "no socket"; }

# first_byte ROUND CASE KIND TARGET CMD...
first_byte() {
  local r=$1 case=$2 kind=$3 target=$4 out
  shift 4
  out=$(env "${remote_env[@]}" $probe first-byte "$kind" "$target" -- "$@") || die "$case: no first byte"
  record "$r" "$case" "$(sed -n 1p <<<"$out")" s
  stop "$(sed -n 2p <<<"$out")"
  printf '   %-26s %6.3f s\n' "$case" "$(sed -n 1p <<<"$out")" >&2
}

# timed ROUND CASE BYTES CMD...: wall seconds of CMD, as MiB/s too.
timed() {
  local r=$1 case=$2 bytes=$3 t0 t1 s
  shift 3
  t0=$(date +%s%N)
  "$@" >"$dir/logs/r$r-$case.log" 2>&1 || { tail "$dir/logs/r$r-$case.log" >&2; die "$case failed"; }
  t1=$(date +%s%N)
  s=$(secs_of "$t0" "$t1")
  record "$r" "$case" "$s" s "$bytes"
  printf '   %-26s %7.2f s %9.1f MiB/s\n' "$case" "$s" "$(awk -v b="$bytes" -v s="$s" 'BEGIN { print b / 1048576 / s }')" >&2
}

# random ROUND KIND: the random 4 KiB reads through a fresh export or mount
# under /usr/bin/time; records IOPS, loaded bytes per byte read, peak RSS.
random_reads() {
  local r=$1 kind=$2 pid target out rss fetched read
  if [[ $kind == nbd ]]; then
    /usr/bin/time -f %M -o "$dir/logs/rss-$kind" "$cairn" nbd -r "$store" vm/100/latest disk0.img \
      --listen "unix:$sock" >/dev/null 2>"$dir/logs/r$r-random-$kind.err" &
    pid=$!
    wait_socket
    target=$sock
  else
    /usr/bin/time -f %M -o "$dir/logs/rss-$kind" "$cairn" mount -r "$store" "$mnt" >/dev/null \
      2>"$dir/logs/r$r-random-$kind.err" &
    pid=$!
    wait_mounted
    target=$mnt/vm/100/latest/disk0.img
  fi
  out=$($probe random "$kind" "$target" "$image_bytes" --threads 4 --seconds "$seconds" --seed "$r")
  # /usr/bin/time forwards the signal to cairn and reports its peak RSS.
  kill -TERM "$(pgrep -P "$pid" -x cairn)" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  mountpoint -q "$mnt" && fusermount3 -u -z "$mnt" || true
  rss=$(tail -n1 "$dir/logs/rss-$kind")
  # "fetched 12 chunks (48.00 MiB)": the plaintext bytes the cache loaded.
  fetched=$(grep -o 'fetched [0-9]* chunks ([^)]*)' "$dir/logs/r$r-random-$kind.err" |
    awk -F'[( )]+' '{ v = $4; u = $5; m = u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1; printf "%.0f", v * m }')
  read=$(json_fields <(echo "$out") bytes)
  record "$r" "random-$kind-iops" "$(json_fields <(echo "$out") iops)" iops "$read"
  record "$r" "random-$kind-loaded" "${fetched:-0}" bytes "$read"
  record "$r" "random-$kind-rss" "$rss" KiB
  printf '   %-26s %7.0f IOPS, loaded %s for %s read, peak RSS %s MiB\n' "random-$kind" \
    "$(json_fields <(echo "$out") iops)" "$(numfmt --to=iec-i "${fetched:-0}")" "$(numfmt --to=iec-i "$read")" $((rss / 1024)) >&2
}

one_file=$(cd "$tree" && find . -type f -size -64k | sort | sed -n '1p')

for ((r = 1; r <= rounds; r++)); do
  say "round $r of $rounds"
  first_byte "$r" nbd-first-byte nbd "$sock" "$cairn" nbd -r "$store" vm/100/latest disk0.img --listen "unix:$sock"
  first_byte "$r" mount-first-byte file "$mnt/vm/100/latest/disk0.img" "$cairn" mount -r "$store" "$mnt"
  first_byte "$r" remote-nbd-first-byte nbd "$sock" "$cairn" nbd -r "$url" vm/100/latest disk0.img --listen "unix:$sock"
  first_byte "$r" remote-mount-first-byte file "$mnt/vm/100/latest/disk0.img" "$cairn" mount -r "$url" "$mnt"

  for op in $(in_order "$r" rehearse restore-null nbdcopy cat); do
    case $op in
      rehearse) timed "$r" rehearse "$image_bytes" "$cairn" restore -r "$store" vm/100/latest disk0.img --rehearse ;;
      restore-null) timed "$r" restore-null "$image_bytes" sh -c "'$cairn' restore -r '$store' vm/100/latest disk0.img - >/dev/null" ;;
      nbdcopy)
        "$cairn" nbd -r "$store" vm/100/latest disk0.img --listen "unix:$sock" >/dev/null 2>"$dir/logs/r$r-nbd.err" &
        pid=$!; wait_socket
        timed "$r" nbdcopy "$image_bytes" nbdcopy "nbd+unix:///?socket=$sock" null:
        stop "$pid" ;;
      cat)
        "$cairn" mount -r "$store" "$mnt" >/dev/null 2>"$dir/logs/r$r-mount.err" &
        pid=$!; wait_mounted
        timed "$r" cat "$image_bytes" sh -c "cat '$mnt/vm/100/latest/disk0.img' >/dev/null"
        stop "$pid" ;;
    esac
  done

  # The image to a file (the same file system as the store), each followed
  # by sync: cp and nbdcopy skip the image's holes as restore does.
  img_out=$dir/image.out
  for op in $(in_order "$r" restore-file cp-file nbdcopy-file cp-local-file); do
    rm -f "$img_out"
    case $op in
      cp-local-file) timed "$r" cp-local-file "$image_bytes" sh -c "cp '$image' '$img_out' && sync" ;;
      restore-file) timed "$r" restore-file "$image_bytes" sh -c "'$cairn' restore -r '$store' vm/100/latest disk0.img '$img_out' && sync" ;;
      cp-file)
        "$cairn" mount -r "$store" "$mnt" >/dev/null 2>"$dir/logs/r$r-cp-file.err" &
        pid=$!; wait_mounted
        timed "$r" cp-file "$image_bytes" sh -c "cp '$mnt/vm/100/latest/disk0.img' '$img_out' && sync"
        stop "$pid"
        if ((r == 1)); then cmp "$image" "$img_out" || die "cp out of the mount differs from the image"; fi ;;
      nbdcopy-file)
        "$cairn" nbd -r "$store" vm/100/latest disk0.img --listen "unix:$sock" >/dev/null 2>"$dir/logs/r$r-nbd-file.err" &
        pid=$!; wait_socket
        timed "$r" nbdcopy-file "$image_bytes" sh -c "nbdcopy 'nbd+unix:///?socket=$sock' '$img_out' && sync"
        stop "$pid" ;;
    esac
  done
  rm -f "$img_out"

  random_reads "$r" nbd
  random_reads "$r" file

  # Tree: a fresh mount for each measurement (the tree's metadata not loaded).
  for op in find cat; do
    "$cairn" mount -r "$store" "$mnt" >/dev/null 2>"$dir/logs/r$r-tree-$op.err" &
    pid=$!; wait_mounted
    if [[ $op == find ]]; then
      timed "$r" tree-find 0 sh -c "find '$mnt/host/web/latest/root.tree' | wc -l"
    else
      timed "$r" tree-cat 0 sh -c "cat '$mnt/host/web/latest/root.tree/$one_file' >/dev/null"
    fi
    stop "$pid"
  done
  out=$dir/out
  for op in $(in_order "$r" restore cp cp-local); do
    rm -rf "$out"
    case $op in
      cp-local) timed "$r" tree-cp-a-local "$tree_bytes" sh -c "cp -a '$tree' '$out' && sync" ;;
      restore) timed "$r" tree-restore "$tree_bytes" sh -c "'$cairn' restore -r '$store' host/web/latest root.tree '$out' && sync" ;;
      cp)
        "$cairn" mount -r "$store" "$mnt" >/dev/null 2>"$dir/logs/r$r-cp.err" &
        pid=$!; wait_mounted
        timed "$r" tree-cp-a "$tree_bytes" sh -c "cp -a '$mnt/host/web/latest/root.tree' '$out' && sync"
        stop "$pid"
        if ((r == 1)); then
          diff -r --no-dereference "$tree" "$out" >"$dir/logs/diff.log" || die "cp -a out of the mount differs from the tree (DIR/logs/diff.log)"
        fi ;;
    esac
  done
  rm -rf "$out"
done

md=$dir/access_bench.md
python3 - "$results" "$image_bytes" "$tree_bytes" "$size" "$files" "$tree_size" "$rounds" \
  "$command_line" "$(commit_of "$PWD" || echo unknown)" >"$md" <<'PY'
import csv, statistics, sys
path, image_bytes, tree_bytes, size, files, tree_size, rounds, cmd, commit = sys.argv[1:]
image_bytes, tree_bytes = int(image_bytes), int(tree_bytes)
rows = list(csv.DictReader(open(path), delimiter="\t"))
def med(case):
    v = [float(r["value"]) for r in rows if r["case"] == case]
    return statistics.median(v) if v else float("nan")
def ratio(num, den):
    """The median over rounds of num/den within each round: the two ran
    side by side in the same round, so the machine's drift cancels."""
    by = {}
    for r in rows:
        by.setdefault(r["round"], {})[r["case"]] = float(r["value"])
    v = [d[num] / d[den] for d in by.values() if num in d and den in d and d[den] > 0]
    return statistics.median(v) if v else float("nan")
def extra(case):
    v = [float(r["extra"]) for r in rows if r["case"] == case and r["extra"] != "-"]
    return statistics.median(v) if v else float("nan")
mib = lambda b, s: b / 1048576 / s
print("<!-- access-bench:begin (written by bench/access_bench.sh --update-docs) -->")
print("## Instant access: `cairn mount`, `cairn nbd` (issue 25)\n")
print(f"`{cmd}` on commit {commit}: image `cairn-gendata image --size {size} --seed 1`, "
      f"tree `cairn-gendata tree --files {files} --size {tree_size} --seed 2`, "
      f"medians of {rounds} round(s); a ratio is the median of each round's ratio (the two ran side by side); warm page cache, local store unless marked remote "
      "(`cairn serve` on loopback TLS).\n")
print("| measurement | median | target | status |")
print("|---|---:|---|---|")
def row(name, value, target, ok):
    print(f"| {name} | {value} | {target} | {'**met**' if ok else '**not met**' if ok is not None else 'n/a'} |")
fb = {c: med(c) for c in ["nbd-first-byte", "mount-first-byte", "remote-nbd-first-byte", "remote-mount-first-byte"]}
row("first 4 KiB readable through NBD after `cairn nbd` starts", f"{fb['nbd-first-byte']:.3f} s", "< 1 s", fb["nbd-first-byte"] < 1)
row("first 4 KiB readable through the mount after `cairn mount` starts", f"{fb['mount-first-byte']:.3f} s", "< 1 s", fb["mount-first-byte"] < 1)
row("… remote (NBD)", f"{fb['remote-nbd-first-byte']:.3f} s", "report", None)
row("… remote (mount)", f"{fb['remote-mount-first-byte']:.3f} s", "report", None)
reh, rnull, nbdc, cat = med("rehearse"), med("restore-null"), med("nbdcopy"), med("cat")
row("`cairn restore` of the image to /dev/null (`-` > /dev/null)", f"{mib(image_bytes, rnull):.0f} MiB/s ({rnull:.2f} s)", "reference", None)
row("`cairn restore --rehearse` (nothing written: the stricter reference)", f"{mib(image_bytes, reh):.0f} MiB/s ({reh:.2f} s)", "reference", None)
row("`nbdcopy` of the export to `null:`", f"{mib(image_bytes, nbdc):.0f} MiB/s ({nbdc:.2f} s), {ratio('restore-null', 'nbdcopy'):.2f}x restore, {ratio('rehearse', 'nbdcopy'):.2f}x rehearse", ">= 0.7x restore", ratio('restore-null', 'nbdcopy') >= 0.7)
row("`cat` of the image in the mount > /dev/null", f"{mib(image_bytes, cat):.0f} MiB/s ({cat:.2f} s), {ratio('restore-null', 'cat'):.2f}x restore, {ratio('rehearse', 'cat'):.2f}x rehearse", ">= 0.7x restore", ratio('restore-null', 'cat') >= 0.7)
rfile, cpf, nbdf, cpl = med("restore-file"), med("cp-file"), med("nbdcopy-file"), med("cp-local-file")
row("`cairn restore` of the image to a file (+ sync)", f"{mib(image_bytes, rfile):.0f} MiB/s ({rfile:.2f} s)", "reference", None)
row("`cp` of the image out of the mount to a file (+ sync)", f"{mib(image_bytes, cpf):.0f} MiB/s ({cpf:.2f} s), {ratio('restore-file', 'cp-file'):.2f}x restore, {ratio('cp-local-file', 'cp-file'):.2f}x cp of a local copy", "report (the issue's target is nbdcopy's and cat's)", None)
row("`nbdcopy` of the export to a file (+ sync)", f"{mib(image_bytes, nbdf):.0f} MiB/s ({nbdf:.2f} s), {ratio('restore-file', 'nbdcopy-file'):.2f}x", ">= 0.7x restore", ratio('restore-file', 'nbdcopy-file') >= 0.7)
row("`cp` of the image from a local file to a file (+ sync): cp's own cost", f"{mib(image_bytes, cpl):.0f} MiB/s ({cpl:.2f} s), {ratio('restore-file', 'cp-local-file'):.2f}x restore", "reference", None)
for kind, label in [("nbd", "NBD"), ("file", "mount")]:
    iops = med(f"random-{kind}-iops")
    loaded = med(f"random-{kind}-loaded")
    read = extra(f"random-{kind}-loaded")
    rss = med(f"random-{kind}-rss") / 1024
    row(f"4 KiB random reads via {label}, 4 threads", f"{iops:.0f} IOPS; {loaded / read:.0f} bytes loaded per byte read; peak RSS {rss:.0f} MiB",
        "report IOPS and bytes fetched per byte read; RSS within --cache 256M + fixed overhead", rss < 256 + 128)
fnd, ct = med("tree-find"), med("tree-cat")
row(f"`find` over the tree ({files} files), fresh mount", f"{fnd:.2f} s", "< 1 s", fnd < 1)
row("`cat` of one small file, fresh mount", f"{ct:.2f} s", "< 1 s", ct < 1)
rst, cpa, cpl = med("tree-restore"), med("tree-cp-a"), med("tree-cp-a-local")
row("`cairn restore` of the tree (+ sync)", f"{mib(tree_bytes, rst):.0f} MiB/s ({rst:.2f} s)", "reference", None)
row("`cp -a` of the tree out of the mount (+ sync)", f"{mib(tree_bytes, cpa):.0f} MiB/s ({cpa:.2f} s), {ratio('tree-restore', 'tree-cp-a'):.2f}x restore, {ratio('tree-cp-a-local', 'tree-cp-a'):.2f}x cp -a of the local tree", ">= 0.5x restore", ratio('tree-restore', 'tree-cp-a') >= 0.5)
row("`cp -a` of the source tree (local file system) to the same target (+ sync): cp -a's own cost", f"{mib(tree_bytes, cpl):.0f} MiB/s ({cpl:.2f} s), {ratio('tree-restore', 'tree-cp-a-local'):.2f}x restore", "reference", None)
print()
print("<!-- access-bench:end -->")
PY
cat "$md"
if ((update_docs)); then
  replace_doc_section docs/BENCHMARKS.md access-bench "$md"
  say "updated docs/BENCHMARKS.md"
fi
