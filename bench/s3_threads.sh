#!/usr/bin/env bash
# Threads of the cairn process during a restore (or a sync to a local path)
# from the RGW (issue 28, "Object-store reads without a thread each"): the
# fetch pipeline's asynchronous I/O stage against blocking reads on one
# thread each.
#
#   bash bench/s3_threads.sh [--op restore|sync] [--size 256M] [--runs 3] [--dir DIR] BIN [BIN...]
#
# Each BIN (a cairn binary; the first one also inits and backs up) restores
# `cairn-gendata image --size SIZE --seed 1` from 's3://cairn-s3-threads/t'
# on scripts/s3-server.sh's RGW RUNS times, the binaries taking turns (with
# --op sync: syncs that snapshot into a new local datastore instead). For
# each run: wall seconds and the most threads of the process, sampled from
# /proc/PID/status every 10 ms. Prints one line per run and the medians.
# Needs the RGW running (`bash scripts/s3-server.sh start`); the bucket is
# emptied first and removed at the end. Warm page cache, nothing dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
size=256M runs=3 dir=/var/tmp/cairn-s3-threads op=restore
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --op) op=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
(($# > 0)) || { echo "usage: $0 [--op restore|sync] [--size S] [--runs N] [--dir DIR] BIN [BIN...]" >&2; exit 2; }
[[ $op == restore || $op == sync ]] || { echo "--op is restore or sync" >&2; exit 2; }
bins=("$@")
s3dir=${CAIRN_S3_DIR:-/tmp/cairn-s3}
set -a
# shellcheck disable=SC1091
. "$s3dir/s3.env"
set +a
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${S3_REGION:-us-east-1}}
export CEPH_CONF=$s3dir/ceph.conf
bucket=cairn-s3-threads
url="s3://$bucket/t?endpoint=$S3_ENDPOINT"
mkdir -p "$dir"
export CAIRN_CACHE_DIR=$dir/cache
gendata=${CAIRN_GENDATA:-build/release/bench/cairn-gendata}
image=$dir/image-$size.img
[[ -f $image ]] || "$gendata" image --size "$size" --seed 1 "$image"

radosgw-admin -n client.admin bucket rm --bucket="$bucket" --purge-objects >/dev/null 2>&1 || true
rm -rf "$CAIRN_CACHE_DIR"
code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
  --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
  -X PUT "$S3_ENDPOINT/$bucket")
[[ $code == 200 ]] || { echo "cannot create bucket $bucket (HTTP $code)" >&2; exit 1; }
"${bins[0]}" init "$url" >/dev/null
"${bins[0]}" backup -r "$url" --id vm/1 "disk0.img=$image" >/dev/null
cat "$image" >/dev/null

# restore BIN: prints "SECONDS MAX_THREADS"
restore() {
  local out=$dir/restored.img t0 t1 pid max=0 n copy=$dir/synced
  rm -rf "$out" "$copy"
  [[ $op == sync ]] && "$1" init "$copy" >/dev/null
  t0=$(date +%s%N)
  if [[ $op == sync ]]; then
    "$1" sync --from "$url" --to "$copy" vm/1 >/dev/null &
  else
    "$1" restore -r "$url" vm/1/latest disk0.img "$out" >/dev/null &
  fi
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    ((${n:-0} > max)) && max=$n
    sleep 0.01
  done
  wait "$pid"
  t1=$(date +%s%N)
  if [[ $op == sync ]]; then
    "$1" restore -r "$copy" vm/1/latest disk0.img "$out" >/dev/null
  fi
  cmp -s "$out" "$image" || { echo "restored image differs ($1)" >&2; exit 1; }
  rm -rf "$out" "$copy"
  awk -v a="$t0" -v b="$t1" -v m="$max" 'BEGIN { printf "%.2f %d\n", (b - a) / 1e9, m }'
}

declare -A secs threads
for ((r = 1; r <= runs; r++)); do
  for b in "${bins[@]}"; do
    read -r s t < <(restore "$b")
    echo "run $r $b: $s s, at most $t threads"
    secs[$b]+="$s " threads[$b]+="$t "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for b in "${bins[@]}"; do
  echo "median $b: $(median <<<"${secs[$b]}") s, at most $(median <<<"${threads[$b]}") threads"
done
radosgw-admin -n client.admin bucket rm --bucket="$bucket" --purge-objects >/dev/null 2>&1 || true
