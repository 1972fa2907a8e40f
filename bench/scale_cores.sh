#!/usr/bin/env bash
# How backup, rehearse, restore and verify scale with cores: one generated
# image (default 4 GiB), store and restore target on tmpfs (/dev/shm, so the
# disk is not the limit), each operation pinned with taskset to 1, 2, 4, 8
# and 16 cores (those the machine has), a fresh datastore per core count.
# Prints one line per run (operation, cores, MiB/s, seconds, the bottleneck
# line); the JSON of every run goes to $OUT/scale.log (default /tmp).
#
#   bash bench/scale_cores.sh [SIZE]        e.g. 4G (default), 1G
#   CAIRN=… GENDATA=… override build/release/src/cairn and bench/cairn-gendata;
#   RUN='ld.so --library-path DIR' runs them through a bundled loader (how the
#   16-core figures in docs/BENCHMARKS.md were taken on a machine without the
#   Debian libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-4G}
cairn=${CAIRN:-$PWD/build/release/src/cairn}
gendata=${GENDATA:-$PWD/build/release/bench/cairn-gendata}
run=${RUN:-}
log=${OUT:-/tmp}/scale.log
: >"$log"
d=$(mktemp -d /dev/shm/cairn-scale.XXXXXX)
trap 'rm -rf "$d"' EXIT
export CAIRN_CACHE_DIR=$d/cache
echo "$(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'); kernel $(uname -r)"
$run "$gendata" -q image --size "$size" --seed 1 "$d/img"
TIMEFORMAT="cat of the image to /dev/null: %R s"
time cat "$d/img" >/dev/null
report() {  # OP CORES JSON
  echo "$1 $2 $3" >>"$log"
  python3 -c '
import json, sys
op, n, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
a = j if "mib_per_s" in j else j["archives"][0]
line = j.get("bottleneck", {}).get("line", "-")
print("%-9s %2s cores %8.0f MiB/s %6.2f s  bottleneck: %s" % (op, n, a["mib_per_s"], a["seconds"], line))' "$1" "$2" "$3"
}
for n in 1 2 4 8 16; do
  ((n <= $(nproc))) || break
  pin=(taskset -c "0-$((n - 1))")
  rm -rf "$d/s" && $run "$cairn" init "$d/s" >/dev/null
  report backup "$n" "$("${pin[@]}" $run "$cairn" backup -r "$d/s" --id vm/1 disk0.img="$d/img" --json --no-progress)"
  report rehearse "$n" "$("${pin[@]}" $run "$cairn" restore -r "$d/s" vm/1/latest disk0.img --rehearse --json --no-progress)"
  report restore "$n" "$("${pin[@]}" $run "$cairn" restore -r "$d/s" vm/1/latest disk0.img "$d/out" --json --no-progress)"
  cmp -s "$d/img" "$d/out" || { echo "restore on $n cores: the image differs" >&2; exit 1; }
  rm -f "$d/out"
  report verify "$n" "$("${pin[@]}" $run "$cairn" verify -r "$d/s" --json --no-progress)"
done
