#!/usr/bin/env bash
# How close a limited transfer lands to its limit: a backup of a random image
# to a cairn server on loopback with --limit-upload RATE, and its restore
# with --limit-download RATE (and the same against S3 when S3_ENDPOINT,
# S3_ACCESS_KEY and S3_SECRET_KEY are set: scripts/s3-server.sh). Rate =
# image bytes / wall-clock seconds of the whole command (process start,
# metadata and index included); the target is within 10 % of the limit and
# never above it. docs/BENCHMARKS.md, "Bandwidth limits", has the figures.
#
#   bash bench/ratelimit_bench.sh [--size 200M] [--rate 20M] [--rounds 3]
#   CAIRN=path/to/cairn (default build/release/src/cairn)
set -euo pipefail
cd "$(dirname "$0")/.."
size=200M rate=20M rounds=3
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--size 200M] [--rate 20M] [--rounds N]" >&2; exit 2 ;;
  esac
done
cairn=${CAIRN:-$PWD/build/release/src/cairn}
to_bytes() { numfmt --from=iec "${1%B}"; }
bytes=$(to_bytes "$size")
limit=$(to_bytes "$rate")
dir=$(mktemp -d /var/tmp/cairn-ratelimit.XXXXXX)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

head -c "$bytes" /dev/urandom >"$dir/disk.img"
"$cairn" init -q "$dir/store"
"$cairn" serve --listen 127.0.0.1:0 --store main="$dir/store" --state-dir "$dir/state" \
  >"$dir/serve.out" 2>"$dir/serve.err" &
server_pid=$!
for _ in $(seq 300); do grep -q listening "$dir/serve.out" && break; sleep 0.1; done
port=$(sed -nE 's/.*127\.0\.0\.1:([0-9]+).*/\1/p' "$dir/serve.out")
export CAIRN_FINGERPRINT=$(sed -nE 's/.*fingerprint ([0-9a-f:]+).*/\1/p' "$dir/serve.out")
export CAIRN_TOKEN=$("$cairn" token create bench --state-dir "$dir/state" --store main --role admin)
export CAIRN_CACHE_DIR=$dir/cache CAIRN_TRUSTED_SERVERS=$dir/servers

# measure NAME REPO: one backup and one restore per round; prints rows.
measure() {
  local name=$1 repo=$2 r t0 secs
  for ((r = 1; r <= rounds; r++)); do
    rm -rf "$dir/out.img"
    t0=$(date +%s.%N)
    "$cairn" backup -q -r "$repo" --id vm/$r --limit-upload "$rate" disk.img="$dir/disk.img"
    secs=$(echo "$(date +%s.%N) - $t0" | bc -l)
    row "$name" upload "$r" "$secs"
    t0=$(date +%s.%N)
    "$cairn" restore -q -r "$repo" vm/$r/latest disk.img "$dir/out.img" --limit-download "$rate"
    secs=$(echo "$(date +%s.%N) - $t0" | bc -l)
    row "$name" download "$r" "$secs"
    cmp -s "$dir/disk.img" "$dir/out.img" || { echo "restore differs" >&2; exit 1; }
  done
}
row() {
  local mibs ratio
  mibs=$(echo "$bytes / 1048576 / $4" | bc -l)
  ratio=$(echo "$bytes / $4 / $limit" | bc -l)
  printf '| %-6s | %-8s | %d | %6.2f | %6.2f | %5.3f |\n' "$1" "$2" "$3" "$4" "$mibs" "$ratio"
}

echo "image $size random, limit $rate/s ($limit B/s), $rounds rounds, $(nproc) cores, cairn $("$cairn" --version)"
echo "| target | transfer | round | seconds | MiB/s | share of limit |"
echo "|---|---|---|---|---|---|"
measure server "https://127.0.0.1:$port/main"
if [[ -n ${S3_ENDPOINT:-} && -n ${S3_ACCESS_KEY:-} && -n ${S3_SECRET_KEY:-} ]]; then
  export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
  bucket=cairn-ratelimit-$$
  url="s3://$bucket/bench?endpoint=$S3_ENDPOINT"
  "$cairn" init -q "$url"
  measure s3 "$url"
  echo "(bucket $bucket left for inspection; remove it with the S3 tool of your choice)"
fi
