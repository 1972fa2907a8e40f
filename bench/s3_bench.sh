#!/usr/bin/env bash
# Object storage benchmark (issue 9): `cairn restore` and `cairn verify` of one
# generated image from a datastore on Ceph RGW (S3) on loopback, with
# `--jobs auto` against fixed reads in flight, beside `restic restore` and
# `restic check --read-data` of the same image from the same RGW, and
# `cat IMAGE > /dev/null` as the local read baseline.
#
#   bash bench/s3_bench.sh [--quick] [--runs N] [--size 1G] [--image PATH]
#                          [--jobs-list 1,8,32] [--dir DIR] [--timeout S]
#                          [--no-restic] [--keep] [--keep-server]
#                          [--update-docs | --no-doc]
#
#   --quick         256 MiB image (default: 1 GiB); runs stay 3 unless --runs
#   --runs N        runs (default 3); in each, every command runs once, in an
#                   order that reverses run by run (restore group, then verify
#                   group)
#   --size S        image size (cairn-gendata image, seed 1: the VM image mix
#                   of zeros, random, text and duplicates); --image PATH uses
#                   that file instead (read only)
#   --jobs-list L   the fixed --jobs values set against --jobs auto (default
#                   1,8,32)
#   --dir DIR       work directory (default /var/tmp/cairn-s3-bench; needs ~2x
#                   the image size free, the RGW's own file ~1x more under
#                   $CAIRN_S3_DIR); also $CAIRN_BENCH_DIR
#   --timeout S     limit per timed command, seconds (default 1800); a command
#                   that fails or runs past it is recorded as failed, the run
#                   goes on, and the exit status is 1 at the end
#   --no-restic     leave restic out (no ratios then)
#   --keep          leave the two buckets and their objects in the RGW at the
#                   end (default: removed; they are always emptied at the start)
#   --keep-server   leave an RGW this script started running at the end (one
#                   that was already running is never stopped)
#   --update-docs   also write the section between the s3-bench markers of
#                   docs/BENCHMARKS.md (appended at the end the first time)
#   --no-doc        do not touch docs/BENCHMARKS.md (the default; wins over
#                   --update-docs)
#
# The S3 server: scripts/s3-server.sh's Ceph RGW on 127.0.0.1:7480, started
# when `s3-server.sh status` fails (waiting first for one that is starting);
# credentials and endpoint come from $CAIRN_S3_DIR/s3.env (default
# /tmp/cairn-s3). Two buckets, emptied and removed with radosgw-admin (the
# cluster is local): cairn-s3-bench (cairn's datastore under the prefix
# `bench`) and restic-s3-bench (restic's repository).
#
# Set-up (timed once, reported, not in the table): `cairn init
# 's3://cairn-s3-bench/bench?endpoint=…'`, `cairn backup --id vm/1
# disk0.img=IMAGE`; `restic init` and `restic backup` of the image to
# s3:ENDPOINT/restic-s3-bench. Warm-up (untimed): the image read once, one
# `cairn restore --rehearse` (fills the client's metadata cache,
# CAIRN_CACHE_DIR=DIR/cache) and `restic snapshots` (restic's cache is
# DIR/restic-cache, filled by its backup).
#
# Commands per run (bytes = the image size, zeros included, for every row):
#   cat       cat IMAGE > /dev/null (the image is in the page cache)
#   restore   cairn restore -r URL vm/1/latest disk0.img NEW --json
#             [--jobs N]; restic restore latest --target T, then sync of the
#             file (cairn fsyncs its target); NEW and T are compared with the
#             image by cmp in the first run (untimed) and deleted after each
#   verify    cairn verify -r URL vm/1 --no-ledger --json [--jobs N] (must
#             answer ok); restic check --read-data
# Every command: wall seconds, user + sys CPU seconds and peak RSS of the
# client (/usr/bin/time), CPU seconds of the radosgw and ceph-osd daemons
# over the command (/proc/PID/stat), and from cairn's --json the reads in
# flight. Client and server share this machine's CPUs; warm page cache, no
# caches dropped (as every script that sources bench/lib.sh).
#
# Binaries: $CAIRN_BIN, $CAIRN_GENDATA (else build/release's; built when
# missing); copied into DIR/bin first, so a rebuild during the run does not
# mix two builds. Raw timings: DIR/results.tsv; each command's output:
# DIR/logs/; table: DIR/s3_bench.md (also printed).
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=s3_bench
source bench/lib.sh

command_line="bash bench/s3_bench.sh${*:+ $*}"
[[ -n ${CAIRN_BIN:-} ]] && command_line="CAIRN_BIN=$CAIRN_BIN $command_line"
runs=3
size=1G
image=
jobs_list=1,8,32
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-s3-bench}
cmd_timeout=1800
with_restic=1
keep=0
keep_server=0
update_docs=0
no_doc=0
size_given=0
usage() { sed -n '8,37p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) ((size_given)) || size=256M; shift ;;
    --runs) runs=$2; shift 2 ;;
    --size) size=$2; size_given=1; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --jobs-list) jobs_list=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --timeout) cmd_timeout=$2; shift 2 ;;
    --no-restic) with_restic=0; shift ;;
    --keep) keep=1; shift ;;
    --keep-server) keep_server=1; shift ;;
    --update-docs) update_docs=1; shift ;;
    --no-doc) no_doc=1; shift ;;
    -h|--help) usage ;;
    *) echo "s3_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "s3_bench: --runs must be a positive number" >&2; exit 2; }
[[ $cmd_timeout =~ ^[1-9][0-9]*$ ]] || { echo "s3_bench: --timeout must be a positive number of seconds" >&2; exit 2; }
[[ $jobs_list =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "s3_bench: --jobs-list must be positive numbers, comma-separated" >&2; exit 2; }
((no_doc)) && update_docs=0
IFS=, read -ra fixed_jobs <<<"$jobs_list"
jobs_all=(auto "${fixed_jobs[@]}")

apt_install time python3 coreutils curl
((with_restic)) && apt_install restic
if ((with_restic)) && ! command -v restic >/dev/null; then
  say "restic is not installed: leaving it out (no ratios)"
  with_restic=0
fi
bench_bins --no-synth  # only cairn and cairn-gendata are needed

mkdir -p "$dir/logs" "$dir/bin"
dir=$(cd "$dir" && pwd)
# A private copy of the binary: the checkout's build may be rebuilt meanwhile.
cairn_src=$cairn
cp "$cairn_src" "$dir/bin/cairn"
cairn=$dir/bin/cairn
cairn_built=$(date -u -r "$cairn_src" +%Y-%m-%dT%H:%M:%SZ)
# The checkout's commit now, beside the copy (the report comes minutes later).
export CAIRN_BENCH_COMMIT
CAIRN_BENCH_COMMIT=$(commit_of "$PWD" || echo unknown)
cairn_version=$("$cairn" --version 2>/dev/null | awk 'NR == 1' || echo '?')
restore_help=$("$cairn" restore --help 2>&1 || true)
has_rehearse=0
[[ $restore_help == *--rehearse* ]] && has_rehearse=1

image_note="\`cairn-gendata image --size $size --seed 1\`"
[[ -n $image ]] && image_note="$image (given with --image)"
[[ -n $image ]] || { image=$dir/disk-$size.img; ensure_image "$image" "$size"; }
image=$(realpath "$image")
image_bytes=$(stat -c %s "$image")
free_bytes=$(df -B1 --output=avail "$dir" | tail -n1)
((free_bytes > image_bytes * 2)) ||
  say "warning: $dir has $((free_bytes >> 20)) MiB free; the run needs about 2x the image size"

# --- the S3 server -------------------------------------------------------------
s3dir=${CAIRN_S3_DIR:-/tmp/cairn-s3}
started_server=0
if ! bash scripts/s3-server.sh status; then
  # One that is starting (its directory is there, its credentials not yet):
  # wait for it rather than fail on "holds a running cluster".
  if [[ -f $s3dir/ceph.conf && ! -f $s3dir/s3.env ]]; then
    say "an RGW is starting under $s3dir: waiting for it (up to 120 s)"
    for _ in $(seq 120); do
      [[ -f $s3dir/s3.env ]] && bash scripts/s3-server.sh status && break
      sleep 1
    done
  fi
  if ! bash scripts/s3-server.sh status; then
    say "starting the S3 server (scripts/s3-server.sh start)"
    bash scripts/s3-server.sh start >"$dir/logs/s3-server-start.log" 2>&1 ||
      { tail -n 20 "$dir/logs/s3-server-start.log" >&2; die "scripts/s3-server.sh start failed"; }
    started_server=1
  fi
fi
[[ -f $s3dir/s3.env ]] || die "no $s3dir/s3.env (set CAIRN_S3_DIR to the server's directory)"
set -a
# shellcheck disable=SC1091
. "$s3dir/s3.env"
set +a
[[ -n ${S3_ENDPOINT:-} && -n ${AWS_ACCESS_KEY_ID:-} && -n ${AWS_SECRET_ACCESS_KEY:-} ]] ||
  die "$s3dir/s3.env lacks S3_ENDPOINT or the AWS_* keys"
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${S3_REGION:-us-east-1}}
export CEPH_CONF=$s3dir/ceph.conf

cairn_bucket=cairn-s3-bench
restic_bucket=restic-s3-bench
url="s3://$cairn_bucket/bench?endpoint=$S3_ENDPOINT"
restic_repo=s3:$S3_ENDPOINT/$restic_bucket
cache=$dir/cache out=$dir/restored.img restic_target=$dir/restic-restored
results=$dir/results.tsv

rgw_admin() { radosgw-admin -n client.admin "$@"; }
drop_bucket() { rgw_admin bucket rm --bucket="$1" --purge-objects >>"$dir/logs/buckets.log" 2>&1 || true; }
make_bucket() {  # a PUT Bucket signed by curl (SigV4); 200 also when it is ours already
  local code
  code=$(curl -s -o "$dir/logs/make-bucket-$1.log" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    -X PUT "$S3_ENDPOINT/$1") || true
  [[ $code == 200 ]] || { cat "$dir/logs/make-bucket-$1.log" >&2; die "cannot create bucket $1 (HTTP $code)"; }
}
bucket_usage() {  # bucket_usage BUCKET: "OBJECTS BYTES" (rgw.main), "? ?" if unknown
  rgw_admin bucket stats --bucket="$1" 2>/dev/null | python3 -c '
import json, sys
try:
    u = json.load(sys.stdin).get("usage", {}).get("rgw.main", {})
    print(u.get("num_objects", "?"), u.get("size_actual", u.get("size", "?")))
except Exception:
    print("? ?")' || echo "? ?"
}

daemon_pids() {  # radosgw and ceph-osd of the server, when alive
  local n p
  for n in client.rgw.s3 osd.0; do
    [[ -f $s3dir/run/$n.pid ]] || continue
    p=$(<"$s3dir/run/$n.pid")
    [[ -r /proc/$p/stat ]] && echo "$p"
  done
  return 0
}
mapfile -t server_pids < <(daemon_pids)
clk_tck=$(getconf CLK_TCK)
server_cpu() {  # CPU seconds (user + sys) of radosgw + ceph-osd so far
  local p s total=0
  for p in "${server_pids[@]}"; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    total=$(awk -v t="$total" -v c="$clk_tck" '{ printf "%.2f", t + ($12 + $13) / c }' <<<"$s")
  done
  echo "$total"
}

cleanup() {
  rm -rf "$out" "$restic_target"
  if ((!keep)); then
    drop_bucket "$cairn_bucket"
    ((with_restic)) && drop_bucket "$restic_bucket"
  fi
  if ((started_server && !keep_server)); then
    say "stopping the S3 server this script started"
    bash scripts/s3-server.sh stop >>"$dir/logs/s3-server-start.log" 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

unset CAIRN_REPO CAIRN_KEYFILE CAIRN_PASSPHRASE CAIRN_PASSPHRASE_FILE CAIRN_TOKEN CAIRN_FINGERPRINT
export CAIRN_CACHE_DIR=$cache
bench_repo_env  # RESTIC_PASSWORD, RESTIC_CACHE_DIR=DIR/restic-cache

# --- set-up ---------------------------------------------------------------------
say "S3: $S3_ENDPOINT; emptying the buckets $cairn_bucket$( ((with_restic)) && echo " and $restic_bucket")"
drop_bucket "$cairn_bucket"
((with_restic)) && drop_bucket "$restic_bucket"
rm -rf "$cache" "$RESTIC_CACHE_DIR" "$out" "$restic_target"
make_bucket "$cairn_bucket"

once() {  # once NAME CMD...: a set-up command, its seconds into $setup_NAME
  local name=$1 t0 t1
  shift
  t0=$(date +%s%N)
  "$@" </dev/null >"$dir/logs/setup-$name.log" 2>"$dir/logs/setup-$name.err" ||
    { tail -n 30 "$dir/logs/setup-$name.log" "$dir/logs/setup-$name.err" >&2; die "set-up: $name failed: $*"; }
  t1=$(date +%s%N)
  printf -v "setup_${name//-/_}" '%s' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
}
say "set-up: cairn init and backup of the image ($image_bytes bytes) to $url"
once cairn-init "$cairn" init "$url"
once cairn-backup "$cairn" backup -r "$url" --id vm/1 --json "disk0.img=$image"
read -r cairn_objects cairn_stored < <(bucket_usage "$cairn_bucket")
if ((with_restic)); then
  say "set-up: restic init and backup of the image to $restic_repo"
  once restic-init restic init --repo "$restic_repo"
  once restic-backup restic backup -q --repo "$restic_repo" --host bench "$image"
  read -r restic_objects restic_stored < <(bucket_usage "$restic_bucket")
fi

say "warming up (untimed): the image, cairn's metadata cache$( ((with_restic)) && echo ", restic's index")"
cat "$image" >/dev/null
if ((has_rehearse)); then
  "$cairn" restore -r "$url" vm/1/latest disk0.img --rehearse --json >"$dir/logs/warm-cairn.log" 2>&1 ||
    { tail -n 30 "$dir/logs/warm-cairn.log" >&2; die "warm-up: cairn restore --rehearse failed"; }
fi
if ((with_restic)); then
  restic snapshots --repo "$restic_repo" >"$dir/logs/warm-restic.log" 2>&1 ||
    { tail -n 30 "$dir/logs/warm-restic.log" >&2; die "warm-up: restic snapshots failed"; }
fi

# --- measuring ------------------------------------------------------------------
printf 'round\ttool\top\tjobs\tstatus\tseconds\tuser_s\tsys_s\tserver_cpu_s\trss_kib\tbytes\tjson_s\tjobs_mode\tjobs_final\tjobs_max\tjobs_mean\n' >"$results"
stamp_results "$dir"
failures=0

# timed ROUND TOOL OP JOBS CMD...: CMD under timeout and /usr/bin/time, its
# output to DIR/logs/; a line in results.tsv, status "ok", "timeout" or
# "rc=N" (a failure is reported and counted, the run goes on). Returns CMD's
# status.
timed() {
  local r=$1 tool=$2 op=$3 jobs=$4
  shift 4
  local tag="r$r-$tool-$op-j$jobs" log t0 t1 secs c0 c1 u s rss rc=0 status=ok
  log=$dir/logs/$tag.log
  c0=$(server_cpu)
  t0=$(date +%s%N)
  /usr/bin/time -f '%e %U %S %M' -o "$dir/logs/time" timeout -k 10 "$cmd_timeout" "$@" </dev/null >"$log" 2>"$log.err" || rc=$?
  t1=$(date +%s%N)
  c1=$(server_cpu)
  read -r _ u s rss < <(tail -n1 "$dir/logs/time")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc)); then status=rc=$rc; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$tool" "$op" "$jobs" "$status" "$secs" "$u" "$s" \
    "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" "$rss" "$image_bytes" \
    "$(json_fields "$log" seconds jobs.mode jobs.final jobs.max jobs.mean)" >>"$results"
  printf '   %-6s %-8s jobs %-4s %8.2f s %8.1f MiB/s  cpu %6.2f s  server %6.2f s %7.1f MiB RSS%s\n' \
    "$tool" "$op" "$jobs" "$secs" "$(awk -v b="$image_bytes" -v s="$secs" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v a="$u" -v b="$s" 'BEGIN { print a + b }')" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" "$([[ $status == ok ]] || echo "  FAILED ($status)")" >&2
  if [[ $status != ok ]]; then
    failures=$((failures + 1))
    tail -n 15 "$log" "$log.err" >&2 || true
    say "run $r: $tool $op (jobs $jobs) failed: $status (log: $log)"
  fi
  return "$rc"
}
mark_failed() {  # mark_failed WHY: the last row of results.tsv did not check out
  failures=$((failures + 1))
  python3 - "$results" "$1" <<'PY'
import sys
path, why = sys.argv[1:]
lines = open(path).read().splitlines()
f = lines[-1].split("\t")
f[4] = why
lines[-1] = "\t".join(f)
open(path, "w").write("\n".join(lines) + "\n")
PY
  say "$1"
}

restic_restore() { restic restore -q --repo "$1" latest --target "$2" && sync "$2$3"; }
export -f restic_restore

# run_one ROUND ITEM: ITEM is cat, restic-restore, restic-check, or
# cairn-OP-JOBS (OP restore or verify, JOBS auto or N)
run_one() {
  local r=$1 item=$2
  case $item in
    cat)
      timed "$r" cat read - bash -c 'cat "$1" >/dev/null' _ "$image" || true ;;
    cairn-restore-*)
      local j=${item#cairn-restore-} extra=()
      [[ $j != auto ]] && extra=(--jobs "$j")
      rm -f "$out"
      if timed "$r" cairn restore "$j" "$cairn" restore -r "$url" vm/1/latest disk0.img "$out" --json "${extra[@]}" &&
        ((r == 1)) && ! cmp -s "$image" "$out"; then
        mark_failed "run $r: cairn restore --jobs $j wrote a file that differs from the image"
      fi
      rm -f "$out" ;;
    cairn-verify-*)
      local j=${item#cairn-verify-} extra=() log
      [[ $j != auto ]] && extra=(--jobs "$j")
      log=$dir/logs/r$r-cairn-verify-j$j.log
      if timed "$r" cairn verify "$j" "$cairn" verify -r "$url" vm/1 --no-ledger --json "${extra[@]}" &&
        [[ $(json_fields "$log" ok) != True ]]; then
        mark_failed "run $r: cairn verify --jobs $j did not answer ok (log: $log)"
      fi ;;
    restic-restore)
      rm -rf "$restic_target"
      if timed "$r" restic restore - bash -c 'restic_restore "$1" "$2" "$3"' _ "$restic_repo" "$restic_target" "$image" &&
        ((r == 1)) && ! cmp -s "$image" "$restic_target$image"; then
        mark_failed "run $r: restic restore wrote a file that differs from the image"
      fi
      rm -rf "$restic_target" ;;
    restic-check)
      timed "$r" restic check - restic check -q --read-data --repo "$restic_repo" || true ;;
    *) die "internal: no item $item" ;;
  esac
}

restore_items=(cat)
verify_items=()
for j in "${jobs_all[@]}"; do restore_items+=("cairn-restore-$j"); verify_items+=("cairn-verify-$j"); done
((with_restic)) && { restore_items+=(restic-restore); verify_items+=(restic-check); }

nice_client=$(nice)
nice_server=$(for p in "${server_pids[@]}"; do awk '{ print $19 }' "/proc/$p/stat" 2>/dev/null; done | sort -u | paste -sd/)
load_start=$(cut -d' ' -f1-3 /proc/loadavg) psi_start=$(psi)
server_cpu_start=$(server_cpu)
say "benchmark: $runs run(s), $image_bytes-byte image, cairn --jobs ${jobs_all[*]}, work dir $dir"
for ((r = 1; r <= runs; r++)); do
  say "run $r/$runs"
  while read -r item; do run_one "$r" "$item"; done < <(in_order "$r" "${restore_items[@]}")
  while read -r item; do run_one "$r" "$item"; done < <(in_order "$r" "${verify_items[@]}")
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg) psi_end=$(psi)
server_total=$(awk -v a="$server_cpu_start" -v b="$(server_cpu)" 'BEGIN { printf "%.1f", b - a }')

# --- report -----------------------------------------------------------------------
table=$(python3 - "$results" "$image_bytes" <<'PY'
import collections, statistics, sys
MIB = 1 << 20
path, nbytes = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
header = lines[0].split("\t")
rows = [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
med = statistics.median
by = collections.defaultdict(list)  # (tool, op, jobs) -> rows
for r in rows:
    by[(r["tool"], r["op"], r["jobs"])].append(r)
ok = lambda rs: [r for r in rs if r["status"] == "ok"]
def med_s(key):
    rs = ok(by.get(key, []))
    return med(float(r["seconds"]) for r in rs) if rs else None
def jobs_order(j):
    return (0, 0) if j == "auto" else (1, int(j)) if j.isdigit() else (2, 0)
def inflight(rs):
    vals = [r for r in rs if r["jobs_final"] not in ("-", "")]
    if not vals:
        return "–"
    num = lambda k: [float(r[k]) for r in vals if r[k] not in ("-", "")]
    f, mx, mean = num("jobs_final"), num("jobs_max"), num("jobs_mean")
    return " / ".join([f"{med(f):g}" if f else "–", f"{max(mx):g}" if mx else "–",
                       f"{med(mean):.1f}" if mean else "–"])
restic_restore = med_s(("restic", "restore", "-"))
restic_check = med_s(("restic", "check", "-"))
labels = {
    ("cat", "read"): "`cat IMAGE > /dev/null` (local read baseline)",
    ("restic", "restore"): "`restic restore` (+ sync of the file)",
    ("restic", "check"): "`restic check --read-data`",
}
order = [("cat", "read", "-")]
for op in ("restore", "verify"):
    order += sorted((k for k in by if k[0] == "cairn" and k[1] == op), key=lambda k: jobs_order(k[2]))
    order.append(("restic", "restore" if op == "restore" else "check", "-"))
print("| command | reads in flight (final / max / mean) | median s | **MiB/s** | per-run s min – max | "
      "**× restic restore** | × restic check --read-data | client CPU s | server CPU s | peak RSS MiB |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in order:
    rs = by.get(key)
    if not rs:
        continue
    tool, op, jobs = key
    label = labels.get((tool, op)) or f"`cairn {op} --jobs {jobs}`"
    good = ok(rs)
    bad = len(rs) - len(good)
    if bad:
        label += f" ({bad} of {len(rs)} runs FAILED: {', '.join(sorted({r['status'] for r in rs if r['status'] != 'ok'}))})"
    if not good:
        print(f"| {label} | – | – | – | – | – | – | – | – | – |")
        continue
    secs = [float(r["seconds"]) for r in good]
    m = med(secs)
    vs_restore = f"**{restic_restore / m:.2f}**" if restic_restore else "–"
    vs_check = f"{restic_check / m:.2f}" if restic_check and op in ("verify", "check") else "–"
    cpu = med(float(r["user_s"]) + float(r["sys_s"]) for r in good)
    srv = med(float(r["server_cpu_s"]) for r in good)
    rss = max(int(r["rss_kib"]) for r in good) / 1024
    print(f"| {label} | {inflight(good) if tool == 'cairn' else '–'} | {m:.2f} | **{nbytes / MIB / m:.0f}** | "
          f"{min(secs):.2f} – {max(secs):.2f} | {vs_restore} | {vs_check} | {cpu:.2f} | {srv:.2f} | {rss:.0f} |")
# auto against the best fixed --jobs, per operation
notes = []
for op in ("restore", "verify"):
    auto = med_s(("cairn", op, "auto"))
    fixed = {k[2]: med_s(k) for k in by if k[0] == "cairn" and k[1] == op and k[2] != "auto"}
    fixed = {j: s for j, s in fixed.items() if s}
    if auto and fixed:
        bj = min(fixed, key=fixed.get)
        notes.append(f"{op}: `--jobs auto` at {fixed[bj] / auto:.2f}× the throughput of the best fixed "
                     f"`--jobs {bj}`")
if notes:
    print()
    print("cairn's self-tuning against its best fixed setting (medians): " + "; ".join(notes) + ".")
PY
)
mib_of() { if [[ $1 =~ ^[0-9]+$ ]]; then echo "$(($1 >> 20)) MiB"; else echo "? MiB"; fi; }
stored_note="cairn $cairn_objects objects, $(mib_of "$cairn_stored")"
setup_note="cairn init + backup $setup_cairn_init + $setup_cairn_backup s"
if ((with_restic)); then
  restic_version=$(restic version | cut -d' ' -f1-2)
  stored_note+="; restic $restic_objects objects, $(mib_of "$restic_stored")"
  setup_note+="; restic init + backup $setup_restic_init + $setup_restic_backup s"
else
  restic_version="restic left out"
fi
rgw_version=$(radosgw --version 2>/dev/null | awk '{ print $3 }' || echo '?')
section=$(
  echo "### Restore and verify from Ceph RGW on loopback: cairn \`--jobs\` auto / ${jobs_list//,/ / }$( ((with_restic)) && echo " vs restic")"
  echo
  echo "Latest run: \`$command_line\` ($runs run(s), every command once per run, the order reversing run by run; medians)"
  echo
  machine_details "$dir"
  echo "- versions: cairn $cairn_version (binary \`$cairn_src\`, built $cairn_built); $restic_version; Ceph RGW $rgw_version (\`scripts/s3-server.sh\`$( ((started_server)) && echo ", started by this run"))"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end; CPU pressure (some avg300): $psi_start at the start, $psi_end at the end"
  echo "- data: image $image_note, $((image_bytes >> 20)) MiB; in the RGW (radosgw-admin bucket stats): $stored_note"
  echo "- set-up (once, not in the table): $setup_note"
  echo "- server: radosgw + one bluestore OSD (sparse file) + monitor on this machine, endpoint $S3_ENDPOINT, plain HTTP; client and server share the $(nproc) CPUs; client niceness $nice_client, server daemons' ${nice_server:-?}; server CPU (radosgw + ceph-osd) over all timed commands: ${server_total} s"
  echo "- warm page cache, no caches dropped; cairn's metadata cache (CAIRN_CACHE_DIR) and restic's cache filled before the timed runs"
  echo "- MiB/s = the image's bytes ÷ wall-clock seconds of the whole command, for every row (verify and check included); × restic = restic's median seconds ÷ this row's (above 1: faster than restic); CPU s = user + sys of the client"
  echo
  echo "$table"
)
printf '%s\n' "$section" >"$dir/s3_bench.md"
echo
echo "$section"
say "table written to $dir/s3_bench.md; raw timings in $results"

if ((update_docs)); then
  doc=docs/BENCHMARKS.md
  {
    echo "<!-- s3-bench:begin (written by bench/s3_bench.sh --update-docs; edit outside the markers) -->"
    echo "## Object storage (S3, Ceph RGW)"
    echo
    echo "Restore and verify of one generated image from a datastore on S3-compatible object"
    echo "storage (issue 9): Ceph's RADOS Gateway from \`scripts/s3-server.sh\` on this machine"
    echo "(loopback, plain HTTP; docs/S3.md), so this measures the cost of the S3 path (HTTP"
    echo "requests, the RGW and its OSD, the client's checks), not of a network. cairn's"
    echo "self-tuning reads in flight (\`--jobs auto\`) run beside fixed \`--jobs N\`; restic restores"
    echo "and checks (\`--read-data\`) the same image from the same RGW; \`cat\` of the image is the"
    echo "local read baseline. Every restored file is compared with the image (\`cmp\`, first run)."
    echo
    echo '```sh'
    echo 'bash bench/s3_bench.sh                  # 1 GiB image, 3 runs, --jobs auto / 1 / 8 / 32'
    echo 'bash bench/s3_bench.sh --quick          # 256 MiB image'
    echo 'bash bench/s3_bench.sh --runs 5 --jobs-list 1,4,16,64 --update-docs'
    echo 'CAIRN_BIN=/path/to/build/src/cairn bash bench/s3_bench.sh   # another build'
    echo '#   starts scripts/s3-server.sh when it is not running (and stops only that one);'
    echo '#   --image PATH: reuse an image; --dir DIR (default /var/tmp/cairn-s3-bench);'
    echo '#   results in DIR/s3_bench.md, DIR/results.tsv, DIR/logs/'
    echo '```'
    echo
    echo "$section"
    echo "<!-- s3-bench:end -->"
  } >"$dir/section.md"
  python3 - "$doc" "$dir/section.md" <<'PY'
import re, sys
path, section_file = sys.argv[1:]
section = open(section_file).read().strip("\n")
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# Benchmarks\n"
pat = re.compile(r"<!-- s3-bench:begin.*?<!-- s3-bench:end -->", re.S)
if pat.search(text):
    text = pat.sub(lambda m: section, text, count=1)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
  say "section written to $doc (s3-bench markers)"
fi
((failures == 0)) || { say "$failures command(s) failed or did not check out: see the table and $dir/logs/"; exit 1; }
