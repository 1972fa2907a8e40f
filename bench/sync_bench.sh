#!/usr/bin/env bash
# cairn sync (issue 24) beside a restore of the same snapshot: the speed of
# a first sync path → path ("sync-local") and server → path ("sync-pull",
# from a `cairn serve` on loopback with a reader token) against a restore
# from the same path and from the same server. Issue 24's targets: each sync
# ≥ 0.8× the matching restore.
#
#   bash bench/sync_bench.sh [--quick] [--runs N] [--size 1G] [--dir DIR] [--restic] [--s3]
#
#   --quick    256 MiB image, 3 runs (default: 1 GiB, 3 runs)
#   --restic   also restic-copy: `restic copy` of the same image between two
#              local restic repositories (restic decrypts and re-encrypts
#              every blob; installs restic with apt when missing)
#   --s3       also restore-s3, sync-to-s3 and sync-from-s3 against a Ceph
#              RGW (scripts/s3-server.sh; started, and stopped at the end,
#              when none answers; its directory: $CAIRN_S3_DIR)
#   --runs N   rounds; in each, the four operations run one after the other,
#              their order reversed every other round
#   --size S   image size (cairn-gendata image, seed 1: the VM image mix of
#              zeros, random, text and duplicates)
#   --dir DIR  work directory (default /var/tmp/cairn-sync-bench; needs ~4×
#              the image size free); also $CAIRN_BENCH_DIR
#
# Set-up (untimed): the image backed up into DIR/store as vm/1, a reader
# token, `cairn serve` in the background; one untimed remote rehearsal fills
# the client's metadata mirror. Operations (bytes = the image size):
#   restore-local   cairn restore -r STORE vm/1/latest disk0.img NEW
#   restore-remote  the same from https://127.0.0.1:PORT/main
#   sync-local      cairn sync --from STORE --to FRESH (FRESH: a new `cairn
#                   init` datastore, made before the clock starts)
#   sync-pull       cairn sync --from https://127.0.0.1:PORT/main --to FRESH
#   restic-copy     restic copy --from-repo DIR/restic-src --repo DIR/restic-dst
#                   (the destination made by `restic init` before the clock)
#   restore-s3      cairn restore -r s3://cairn-sync-bench/src?… (filled by an
#                   untimed sync in the set-up) vm/1/latest disk0.img NEW
#   sync-to-s3      cairn sync --from STORE --to s3://cairn-sync-bench/fresh?…
#                   (emptied and `cairn init` before the clock)
#   sync-from-s3    cairn sync --from s3://cairn-sync-bench/src?… --to FRESH
# Outputs and targets are deleted after each operation (untimed). Warm page
# cache throughout. Results: DIR/results.tsv, table DIR/sync_bench.md.
# After the rounds, untimed: an incremental pull after a 1 % change, its
# bytes on the wire (bench/tcp_count_proxy.py) against the stored bytes of
# the new chunks (issue 24: ≤ 1.1×), in DIR/incremental.md and the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=sync_bench
source bench/lib.sh

command_line="bash bench/sync_bench.sh${*:+ $*}"
runs=3 size=1G dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-sync-bench}
usage() { sed -n '8,22p' "$0" >&2; exit 2; }
with_restic=0 with_s3=0
while (($#)); do
  case "$1" in
    --quick) size=256M; shift ;;
    --runs) runs=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --restic) with_restic=1; shift ;;
    --s3) with_s3=1; shift ;;
    -h|--help) usage ;;
    *) echo "sync_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive number"
bench_bins --no-synth
"$cairn" sync --help >/dev/null 2>&1 || die "this cairn has no \`sync\` command (issue 24)"

mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
image=$dir/disk-$size.img
ensure_image "$image" "$size"
image_bytes=$(stat -c %s "$image")
store=$dir/store state=$dir/state cache=$dir/cache fresh=$dir/fresh out=$dir/restored.img
results=$dir/results.tsv

server_pid=
started_s3=0
s3dir=${CAIRN_S3_DIR:-/tmp/cairn-s3}
proxy_pid=
cleanup() {
  if [[ -n $proxy_pid ]] && kill -0 "$proxy_pid" 2>/dev/null; then kill -TERM "$proxy_pid" 2>/dev/null || true; fi
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$fresh" "$out" "$dir/restic-dst" "$dir/inc-dst" "$dir/changed.img"
  if ((with_s3)); then
    radosgw-admin -n client.admin bucket rm --bucket=cairn-sync-bench --purge-objects >/dev/null 2>&1 || true
  fi
  if ((started_s3)); then bash scripts/s3-server.sh stop >>"$dir/logs/s3-server.log" 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "backing up the image ($image_bytes bytes) into $store"
rm -rf "$store" "$state" "$cache" "$fresh" "$out"
"$cairn" init "$store" >/dev/null
"$cairn" backup -r "$store" --id vm/1 "disk0.img=$image" >"$dir/logs/backup.log" 2>&1 ||
  { cat "$dir/logs/backup.log" >&2; die "cairn backup failed"; }
token=$("$cairn" token create bench --state-dir "$state" --store main --role reader 2>/dev/null)
start_cairn_serve "$dir/logs" --store "main=$store" --state-dir "$state"
url=https://127.0.0.1:$port/main
export CAIRN_TOKEN=$token CAIRN_FINGERPRINT=$fingerprint CAIRN_CACHE_DIR=$cache
unset CAIRN_REPO CAIRN_KEYFILE CAIRN_PASSPHRASE CAIRN_PASSPHRASE_FILE
"$cairn" restore -r "$url" vm/1/latest disk0.img --rehearse >/dev/null 2>&1 || die "remote rehearsal failed"
ops=(restore-local sync-local restore-remote sync-pull)

if ((with_restic)); then
  apt_install restic
  command -v restic >/dev/null || die "--restic: restic is not installed"
  bench_repo_env  # RESTIC_PASSWORD, RESTIC_CACHE_DIR
  export RESTIC_FROM_PASSWORD=$RESTIC_PASSWORD
  say "restic: init and backup of the image into $dir/restic-src (untimed)"
  rm -rf "$dir/restic-src" "$dir/restic-dst" "$RESTIC_CACHE_DIR"
  restic init --repo "$dir/restic-src" >"$dir/logs/restic-init.log" 2>&1 || die "restic init failed"
  restic backup -q --repo "$dir/restic-src" --host bench "$image" >"$dir/logs/restic-backup.log" 2>&1 ||
    die "restic backup failed"
  ops+=(restic-copy)
fi

if ((with_s3)); then
  if ! bash scripts/s3-server.sh status; then
    say "starting the S3 server (scripts/s3-server.sh start)"
    bash scripts/s3-server.sh start >"$dir/logs/s3-server.log" 2>&1 ||
      { tail -n 20 "$dir/logs/s3-server.log" >&2; die "scripts/s3-server.sh start failed"; }
    started_s3=1
  fi
  set -a
  # shellcheck disable=SC1091
  . "$s3dir/s3.env"
  set +a
  export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${S3_REGION:-us-east-1}} CEPH_CONF=$s3dir/ceph.conf
  radosgw-admin -n client.admin bucket rm --bucket=cairn-sync-bench --purge-objects >/dev/null 2>&1 || true
  code=$(curl -s -o "$dir/logs/make-bucket.log" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    -X PUT "$S3_ENDPOINT/cairn-sync-bench") || true
  [[ $code == 200 ]] || die "cannot create bucket cairn-sync-bench (HTTP $code)"
  s3_src="s3://cairn-sync-bench/src?endpoint=$S3_ENDPOINT"
  s3_fresh_n=0
  say "S3: filling $s3_src with a sync (untimed)"
  "$cairn" init "$s3_src" >/dev/null && "$cairn" sync --from "$store" --to "$s3_src" >"$dir/logs/s3-fill.log" 2>&1 ||
    { tail "$dir/logs/s3-fill.log" >&2; die "filling the S3 source failed"; }
  ops+=(restore-s3 sync-to-s3 sync-from-s3)
fi

printf 'round\top\tseconds\tmib_s\n' >"$results"
run_op() {  # run_op ROUND OP
  local r=$1 op=$2 t0 t1 secs
  local -a cmd
  rm -rf "$fresh" "$out"
  case $op in
    restore-local) cmd=("$cairn" restore -r "$store" vm/1/latest disk0.img "$out") ;;
    restore-remote) cmd=("$cairn" restore -r "$url" vm/1/latest disk0.img "$out") ;;
    sync-local) "$cairn" init "$fresh" >/dev/null; cmd=("$cairn" sync --from "$store" --to "$fresh" --json) ;;
    sync-pull) "$cairn" init "$fresh" >/dev/null; cmd=("$cairn" sync --from "$url" --to "$fresh" --json) ;;
    restic-copy)
      rm -rf "$dir/restic-dst"
      restic init --repo "$dir/restic-dst" >/dev/null 2>&1 || die "restic init (destination) failed"
      cmd=(restic copy -q --from-repo "$dir/restic-src" --repo "$dir/restic-dst") ;;
    restore-s3) cmd=("$cairn" restore -r "$s3_src" vm/1/latest disk0.img "$out") ;;
    sync-to-s3)
      s3_fresh_n=$((s3_fresh_n + 1))
      local s3_fresh="s3://cairn-sync-bench/fresh$s3_fresh_n?endpoint=$S3_ENDPOINT"
      "$cairn" init "$s3_fresh" >/dev/null || die "cairn init $s3_fresh failed"
      cmd=("$cairn" sync --from "$store" --to "$s3_fresh" --json) ;;
    sync-from-s3) "$cairn" init "$fresh" >/dev/null; cmd=("$cairn" sync --from "$s3_src" --to "$fresh" --json) ;;
  esac
  t0=$(date +%s%N)
  "${cmd[@]}" </dev/null >"$dir/logs/r$r-$op.log" 2>&1 || { tail "$dir/logs/r$r-$op.log" >&2; die "$op failed"; }
  t1=$(date +%s%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  printf '%s\t%s\t%s\t%s\n' "$r" "$op" "$secs" "$(awk -v b="$image_bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / 1048576 / s }')" >>"$results"
  printf '   round %s %-15s %7.2f s\n' "$r" "$op" "$secs" >&2
}
for r in $(seq "$runs"); do
  say "round $r of $runs"
  while read -r op; do run_op "$r" "$op"; done < <(in_order "$r" "${ops[@]}")
done

# Incremental pull, bytes on the wire (issue 24: ≤ 1.1× the stored bytes of
# the new chunks). Untimed: DIR/inc-dst gets vm/1 by a first pull; 1 % of
# the image is overwritten with random bytes at its middle and backed up
# into the served store as vm/1's second snapshot; the second pull copies
# it. Both pulls go through bench/tcp_count_proxy.py (one relay, so the
# client's metadata mirror of that URL is as warm as in daily use); the
# incremental pull's wire bytes are the relay's count during it: TLS
# records and handshakes, HTTP headers and bodies, both directions.
say "incremental pull: 1 % of the image changed, bytes on the wire"
inc_dst=$dir/inc-dst changed=$dir/changed.img wire=$dir/wire.json
rm -rf "$inc_dst" "$changed" "$wire"
"$cairn" init "$inc_dst" >/dev/null
python3 bench/tcp_count_proxy.py --to "127.0.0.1:$port" --port-file "$dir/proxy.port" --out "$wire" \
  2>"$dir/logs/proxy.err" &
proxy_pid=$!
for _ in $(seq 100); do [[ -s $dir/proxy.port ]] && break; sleep 0.1; done
[[ -s $dir/proxy.port ]] || die "the counting relay did not start (see $dir/logs/proxy.err)"
proxy_url=https://127.0.0.1:$(cat "$dir/proxy.port")/main
rm -f "$dir/proxy.port"
"$cairn" sync --from "$proxy_url" --to "$inc_dst" vm/1 >"$dir/logs/inc-first.log" 2>&1 ||
  { tail "$dir/logs/inc-first.log" >&2; die "the first pull failed"; }
cp "$image" "$changed"
python3 - "$changed" "$image_bytes" <<'PY'
import os, random, sys
path, size = sys.argv[1], int(sys.argv[2])
n = size // 100
with open(path, "r+b") as f:
    f.seek(size // 2)
    f.write(random.Random(24).randbytes(n))
PY
"$cairn" backup -r "$store" --id vm/1 --json "disk0.img=$changed" >"$dir/logs/inc-backup.json" 2>"$dir/logs/inc-backup.err" ||
  { tail "$dir/logs/inc-backup.err" >&2; die "the backup of the changed image failed"; }
wire_total() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["to_server"] + j["to_client"], j["connections"])' "$wire"; }
kill -USR1 "$proxy_pid"
for _ in $(seq 100); do [[ -s $wire ]] && break; sleep 0.1; done
read -r wire_before conns_before < <(wire_total)
rm -f "$wire"
"$cairn" sync --from "$proxy_url" --to "$inc_dst" vm/1 --json >"$dir/logs/inc-sync.json" 2>"$dir/logs/inc-sync.err" ||
  { tail "$dir/logs/inc-sync.err" >&2; die "the incremental pull failed"; }
kill -TERM "$proxy_pid"
wait "$proxy_pid" 2>/dev/null || true
read -r wire_after conns_after < <(wire_total)
python3 - "$dir/logs/inc-backup.json" "$dir/logs/inc-sync.json" "$((wire_after - wire_before))" \
  "$((conns_after - conns_before))" "$image_bytes" >"$dir/incremental.md" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["archives"][0]
s = json.load(open(sys.argv[2]))
wire, conns, size = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"\nIncremental pull after a 1 % change ({size // 100} bytes of random data at the middle "
      f"of the {size / 1048576:.0f} MiB image):\n")
print("| figure | value |")
print("|---|---|")
print(f"| new chunks (backup) | {b['new_chunks']} ({b['stored_bytes']} bytes stored) |")
print(f"| chunks the pull copied | {s['chunks_copied']} ({s['stored_bytes']} bytes stored) |")
print(f"| bytes on the wire (TLS, both directions, {conns} connection(s)) | {wire} |")
print(f"| wire ÷ stored bytes of the new chunks | **{wire / b['stored_bytes']:.3f}** (target ≤ 1.1) |")
PY
rm -f "$changed"

python3 - "$results" "$image_bytes" "$command_line" "$(psi)" "$(nproc)" "$runs" >"$dir/sync_bench.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
size, cmd, psi, cores, runs = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
med = {}
for r in rows:
    med.setdefault(r["op"], []).append(float(r["seconds"]))
med = {op: statistics.median(v) for op, v in med.items()}
def mibs(op): return size / 1048576 / med[op]
print(f"`{cmd}`: image {size / 1048576:.0f} MiB, {runs} rounds, medians; "
      f"{cores} cores, CPU pressure (avg300) {psi}.\n")
print("| operation | median s | MiB/s | vs |")
print("|---|---|---|---|")
for op, base in (("restore-local", None), ("sync-local", "restore-local"),
                 ("restore-remote", None), ("sync-pull", "restore-remote"),
                 ("restic-copy", "sync-local"), ("restore-s3", None),
                 ("sync-to-s3", "restore-s3"), ("sync-from-s3", "restore-s3")):
    if op not in med: continue
    ratio = f"{med[base] / med[op]:.2f}× {base}" if base else "–"
    if op == "restic-copy": ratio = f"cairn sync-local is {med[op] / med['sync-local']:.2f}× as fast"
    print(f"| {op} | {med[op]:.2f} | {mibs(op):.0f} | {ratio} |")
PY
cat "$dir/incremental.md" >>"$dir/sync_bench.md"
cat "$dir/sync_bench.md"
