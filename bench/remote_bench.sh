#!/usr/bin/env bash
# The remote path against the local one (issues 6 and 23): every operation
# of `cairn` run through a `cairn serve` on this machine (loopback HTTPS)
# beside the same operation on the datastore's path, on one generated image,
# side by side in one run: restore, rehearse, verify, backup (first, into an
# emptied store) and backup2 (the same image again: deduplicated against the
# first); then a latency sweep of the remote restore, one read in flight
# against the self-tuning default. Issue 23's targets: remote ÷ local
# throughput ≥ 0.85 (restore), 0.6 (rehearse, verify), 0.8 (both backups);
# client CPU of a remote restore ≤ 1.5× the local one.
#
#   bash bench/remote_bench.sh [--quick] [--runs N] [--size 1G] [--image PATH]
#                              [--ops LIST] [--latencies 5,20] [--dir DIR]
#                              [--update-docs | --no-doc]
#
#   --quick         256 MiB image, 3 runs (default: 1 GiB, 5 runs)
#   --runs N        runs; in each, every operation runs local and remote one
#                   after the other, which goes first alternating run by run
#   --size S        image size (cairn-gendata image, seed 1: the VM image mix
#                   of zeros, random, text and duplicates); --image PATH uses
#                   that file instead (read only)
#   --ops LIST      operations, comma-separated (default
#                   restore,rehearse,rehearse2,verify,backup,backup2)
#   --latencies L   injected per-read latencies of the sweep, ms,
#                   comma-separated (default 5,20; empty: no sweep)
#   --dir DIR       work directory (default /var/tmp/cairn-remote-bench; needs
#                   ~4x the image size free); also $CAIRN_BENCH_DIR. For
#                   bench/targets.py, a suite's DIR/remote (run_all.sh's step
#                   "remote" puts it there)
#   --update-docs   also write the section between the remote markers of
#                   docs/BENCHMARKS.md (after the encryption section)
#   --no-doc        do not touch docs/BENCHMARKS.md (the default; wins over
#                   --update-docs)
#
# Set-up (untimed): the image backed up into DIR/store (`cairn backup --id
# vm/1 disk0.img=IMAGE`), two empty datastores for the backups (DIR/bk-local
# for the local side, DIR/bk-remote behind the server), a reader token for
# `main` and a backup token for `bk` (`cairn token create`) and `cairn serve
# --listen 127.0.0.1:0 --store main=DIR/store --store bk=DIR/bk-remote
# --state-dir DIR/state` in the background for the whole run (stopped with
# SIGTERM on exit); its certificate fingerprint and port come from its first
# line. The client gets CAIRN_TOKEN, CAIRN_FINGERPRINT and
# CAIRN_CACHE_DIR=DIR/cache (its metadata mirror; one untimed remote
# rehearsal fills it, so timed runs fetch chunks, not indexes).
#
# Operations per run (bytes = the image size, zeros included):
#   restore     cairn restore -r STORE|https://127.0.0.1:PORT/main vm/1/latest
#               disk0.img NEW --json (NEW deleted after each; compared with
#               the image by cmp, untimed, in the first run)
#   rehearse    the same with --rehearse (fetch, decode, check, write nothing)
#   rehearse2   two clients at once, each a rehearsal of the snapshot (one
#               server serving both; throughput = both images' bytes over
#               the wall time of the pair, CPU = both clients)
#   verify      cairn verify -r STORE|https://…/main vm/1/latest --json: every
#               chunk of the snapshot read and checked (on the client for the
#               remote side; the ledger records, nothing is skipped)
#   backup      cairn backup -r BK|https://…/bk --id vm/2 disk0.img=IMAGE
#               --json into an emptied datastore (its snapshots, chunks and
#               ledger deleted first, untimed): every chunk hashed,
#               compressed, sent and stored
#   backup2     the same again right after: the first one is its dedup base,
#               so the image is read and hashed and nothing is sent
#   latency     remote restore --rehearse --inject-latency MS (a sleep before
#               every chunk read, on the client: the hidden benchmark option
#               wraps the chunk source) with --jobs 1 (one read in flight)
#               and --jobs auto, per latency of --latencies
# Every command: wall seconds, user + sys CPU seconds and peak RSS of the
# client (/usr/bin/time), the server's CPU seconds over the command
# (/proc/PID/stat), and from --json the reads in flight ("jobs": mode,
# final, max, mean), the connections ("connections": final, max, mean, cap)
# and peak bytes in flight. Client and server share this machine's CPUs;
# warm page cache throughout (this script drops no caches). CPU seconds per
# GiB are less sensitive to other load on the machine than wall time: the
# table gives both.
#
# Binaries: $CAIRN_BIN, $CAIRN_GENDATA (else build/release's; built when
# missing). Raw timings: DIR/results.tsv; each command's output: DIR/logs/;
# table: DIR/remote_bench.md (also printed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bench_name=remote_bench
source bench/lib.sh

command_line="bash bench/remote_bench.sh${*:+ $*}"
runs=5
size=1G
image=
latencies=5,20
ops=restore,rehearse,rehearse2,verify,backup,backup2
dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-remote-bench}
update_docs=0
no_doc=0
runs_given=0 size_given=0
usage() { sed -n '12,33p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --quick) ((runs_given)) || runs=3; ((size_given)) || size=256M; shift ;;
    --runs) runs=$2; runs_given=1; shift 2 ;;
    --size) size=$2; size_given=1; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --latencies) latencies=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --update-docs) update_docs=1; shift ;;
    --no-doc) no_doc=1; shift ;;
    -h|--help) usage ;;
    *) echo "remote_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "remote_bench: --runs must be a positive number" >&2; exit 2; }
[[ -z $latencies || $latencies =~ ^[0-9]+(\.[0-9]+)?(,[0-9]+(\.[0-9]+)?)*$ ]] ||
  { echo "remote_bench: --latencies must be numbers (ms), comma-separated" >&2; exit 2; }
((no_doc)) && update_docs=0
IFS=, read -ra lats <<<"$latencies"
IFS=, read -ra op_list <<<"$ops"
for op in "${op_list[@]}"; do
  [[ $op =~ ^(restore|rehearse|rehearse2|verify|backup|backup2)$ ]] ||
    { echo "remote_bench: --ops: no operation '$op' (restore, rehearse, rehearse2, verify, backup, backup2)" >&2; exit 2; }
done
[[ ",$ops," != *,backup2,* || ",$ops," == *,backup,* ]] ||
  { echo "remote_bench: --ops: backup2 needs backup (its dedup base)" >&2; exit 2; }

apt_install time python3 coreutils
bench_bins --no-synth  # only cairn and cairn-gendata are needed
"$cairn" serve --help >/dev/null 2>&1 || die "this cairn has no \`serve\` command (issue 6)"
"$cairn" restore --help 2>&1 | grep -q -- --rehearse || die "this cairn's restore has no --rehearse"

mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
image_note="\`cairn-gendata image --size $size --seed 1\`"
[[ -n $image ]] && image_note="$image (given with --image)"
[[ -n $image ]] || { image=$dir/disk-$size.img; ensure_image "$image" "$size"; }
image=$(realpath "$image")
image_bytes=$(stat -c %s "$image")
store=$dir/store state=$dir/state cache=$dir/cache out=$dir/restored.img
bk_local=$dir/bk-local bk_remote=$dir/bk-remote
results=$dir/results.tsv

# --- set-up -----------------------------------------------------------------
server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server_pid" 2>/dev/null && { say "cairn serve did not stop on SIGTERM; killing it"; kill -KILL "$server_pid" 2>/dev/null || true; }
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
  rm -f "$out"
}
trap stop_server EXIT
trap 'exit 130' INT TERM

say "datastore: backing up the image ($image_bytes bytes) into $store"
rm -rf "$store" "$state" "$cache" "$out" "$bk_local" "$bk_remote"
for s in "$store" "$bk_local" "$bk_remote"; do
  "$cairn" init "$s" >"$dir/logs/init.log" 2>&1 || { cat "$dir/logs/init.log" >&2; die "cairn init $s failed"; }
done
"$cairn" backup -r "$store" --id vm/1 --json "disk0.img=$image" >"$dir/logs/backup.log" 2>"$dir/logs/backup.log.err" ||
  { cat "$dir/logs/backup.log.err" >&2; die "cairn backup failed"; }
stored_bytes=$(du -s -B1 "$store" | cut -f1)
token=$("$cairn" token create bench --state-dir "$state" --store main --role reader 2>"$dir/logs/token.log") ||
  { cat "$dir/logs/token.log" >&2; die "cairn token create failed"; }
[[ $token == bench:* ]] || die "cairn token create printed '$token', not NAME:SECRET"
bk_token=$("$cairn" token create benchbk --state-dir "$state" --store bk --role backup 2>"$dir/logs/token.log") ||
  { cat "$dir/logs/token.log" >&2; die "cairn token create (backup) failed"; }

say "starting cairn serve on 127.0.0.1 (any free port)"
serve_err=$dir/logs/serve.err
start_cairn_serve "$dir/logs" --store "main=$store" --store "bk=$bk_remote" --state-dir "$state"
url=https://127.0.0.1:$port/main
export CAIRN_TOKEN=$token CAIRN_FINGERPRINT=$fingerprint CAIRN_CACHE_DIR=$cache
unset CAIRN_REPO CAIRN_KEYFILE CAIRN_PASSPHRASE CAIRN_PASSPHRASE_FILE
say "server: $url (fingerprint ${fingerprint:0:23}…), pid $server_pid"

clk_tck=$(getconf CLK_TCK)
server_cpu() {  # CPU seconds (user + sys) of the server so far
  local s
  s=$(cat "/proc/$server_pid/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  awk -v t="$clk_tck" '{ printf "%.2f", ($12 + $13) / t }' <<<"$s"
}

# The --json fields kept: reads in flight ("jobs"), bytes in flight and the
# connections to the server.
kept_fields=(seconds jobs.mode jobs.final jobs.max jobs.mean peak_bytes_in_flight
  connections.final connections.max connections.mean connections.cap)

printf 'round\tside\top\tlat_ms\tjobs\tseconds\tuser_s\tsys_s\tserver_cpu_s\trss_kib\tbytes\tjson_s\tjobs_mode\tjobs_final\tjobs_max\tjobs_mean\tpeak_bytes_in_flight\tconn_final\tconn_max\tconn_mean\tconn_cap\n' >"$results"
stamp_results "$dir"

# timed ROUND SIDE OP LAT JOBS CMD...: runs CMD under /usr/bin/time (output to
# DIR/logs/), appends a line to results.tsv; a failing command fails the run.
timed() {
  local r=$1 side=$2 op=$3 lat=$4 jobs=$5
  shift 5
  local tag="r$r-$side-$op-l$lat-j$jobs" log t0 t1 secs c0 c1 u s rss
  log=$dir/logs/$tag.log
  c0=$(server_cpu)
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%e %U %S %M' -o "$dir/logs/time" "$@" </dev/null >"$log" 2>"$log.err"; then
    tail -n 30 "$log" "$log.err" >&2
    die "run $r: $side $op (latency $lat, jobs $jobs) failed (log: $log)"
  fi
  t1=$(date +%s%N)
  c1=$(server_cpu)
  read -r _ u s rss < <(tail -n1 "$dir/logs/time")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$side" "$op" "$lat" "$jobs" "$secs" "$u" "$s" \
    "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" "$rss" "$image_bytes" "$(json_fields "$log" "${kept_fields[@]}")" >>"$results"
  printf '   %-6s %-8s lat %-4s jobs %-4s %7.2f s %8.1f MiB/s  cpu %5.2f s  server %5.2f s %7.1f MiB RSS\n' \
    "$side" "$op" "$lat" "$jobs" "$secs" "$(awk -v b="$image_bytes" -v s="$secs" 'BEGIN { print b / 1048576 / s }')" \
    "$(awk -v a="$u" -v b="$s" 'BEGIN { print a + b }')" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
    "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" >&2
}

repo_of() { if [[ $1 == remote ]]; then echo "$url"; else echo "$store"; fi; }
bk_repo_of() { if [[ $1 == remote ]]; then echo "${url%/main}/bk"; else echo "$bk_local"; fi; }
# An emptied datastore for a first backup: no snapshots, chunks or ledger
# (the directories stay: the server keeps serving it).
empty_store() {
  rm -rf "$1/vm" "$1/.ledger"
  find "$1/.chunks" -type f -delete
}

# run_op ROUND SIDE OP [LAT JOBS]
run_op() {
  local r=$1 side=$2 op=$3 lat=${4:-0} jobs=${5:-auto} repo
  repo=$(repo_of "$side")
  local -a extra=()
  [[ $jobs != auto ]] && extra+=(--jobs "$jobs")
  [[ $lat != 0 ]] && extra+=(--inject-latency "$lat")
  case $op in
    restore)
      rm -f "$out"
      timed "$r" "$side" restore "$lat" "$jobs" "$cairn" restore -r "$repo" vm/1/latest disk0.img "$out" --json "${extra[@]}"
      if ((r == 1)); then cmp -s "$image" "$out" || die "run $r: the $side restore differs from the image"; fi
      rm -f "$out" ;;
    rehearse)
      timed "$r" "$side" rehearse "$lat" "$jobs" "$cairn" restore -r "$repo" vm/1/latest disk0.img --rehearse --json "${extra[@]}" ;;
    rehearse2)
      # Two clients at once; each one's output in its own log.
      local pair=$dir/logs/r$r-$side-rehearse2
      timed "$r" "$side" rehearse2 "$lat" "$jobs" sh -c '
        "$1" restore -r "$2" vm/1/latest disk0.img --rehearse --json >"$3.a" 2>&1 & a=$!
        "$1" restore -r "$2" vm/1/latest disk0.img --rehearse --json >"$3.b" 2>&1; b=$?
        wait $a && [ $b -eq 0 ]' sh "$cairn" "$repo" "$pair" ;;
    verify)
      timed "$r" "$side" verify "$lat" "$jobs" "$cairn" verify -r "$repo" vm/1/latest --json "${extra[@]}" ;;
    backup|backup2)
      local bk
      bk=$(bk_repo_of "$side")
      if [[ $op == backup ]]; then empty_store "$([[ $side == remote ]] && echo "$bk_remote" || echo "$bk_local")"; sync; fi
      timed "$r" "$side" "$op" "$lat" "$jobs" env CAIRN_TOKEN="$bk_token" "$cairn" backup -r "$bk" --id vm/2 --json "disk0.img=$image" ;;
    *) die "internal: no operation $op" ;;
  esac
}

say "warming up: the page cache (image, datastore) and the client's metadata mirror (untimed)"
cat "$image" >/dev/null
"$cairn" restore -r "$store" vm/1/latest disk0.img --rehearse --json >"$dir/logs/warm-local.log" 2>&1 ||
  { cat "$dir/logs/warm-local.log" >&2; die "local rehearsal (warm-up) failed"; }
"$cairn" restore -r "$url" vm/1/latest disk0.img --rehearse --json >"$dir/logs/warm-remote.log" 2>&1 ||
  { cat "$dir/logs/warm-remote.log" >&2; cat "$serve_err" >&2; die "remote rehearsal (warm-up) failed"; }
load_start=$(cut -d' ' -f1-3 /proc/loadavg) psi_start=$(psi)
say "benchmark: $runs run(s), $image_bytes-byte image, latencies: ${latencies:-none}, work dir $dir"
for ((r = 1; r <= runs; r++)); do
  say "run $r/$runs"
  for op in "${op_list[@]}"; do
    if [[ $op == backup2 ]]; then continue; fi  # right after its backup
    while read -r side; do
      run_op "$r" "$side" "$op"
      if [[ $op == backup && " ${op_list[*]} " == *" backup2 "* ]]; then run_op "$r" "$side" backup2; fi
    done < <(in_order "$r" local remote)
  done
  for lat in "${lats[@]}"; do
    while read -r j; do run_op "$r" remote rehearse "$lat" "$j"; done < <(in_order "$r" 1 auto)
  done
done
# The server's tls rows (upload and download over TLS, one connection and
# one per core), as `cairn benchmark -r https://…` prints them.
say "cairn benchmark -r $url: the tls rows"
"$cairn" benchmark -r "$url" --seconds 1 --json >"$dir/tls_bench.json" 2>"$dir/logs/tls_bench.err" ||
  { cat "$dir/logs/tls_bench.err" >&2; die "cairn benchmark -r $url failed"; }
load_end=$(cut -d' ' -f1-3 /proc/loadavg) psi_end=$(psi)
server_total=$(server_cpu)
stop_server
grep -v '^cairn: info: serving ' "$serve_err" | grep -q . &&
  say "cairn serve wrote to stderr (see $serve_err): $(grep -v '^cairn: info: serving ' "$serve_err" | tail -n 3 | tr '\n' ' ')"

# --- report -----------------------------------------------------------------
table=$(python3 - "$results" "$image_bytes" <<'PY'
import collections, statistics, sys
MIB = 1 << 20
path, nbytes = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
header = lines[0].split("\t")
rows = [dict(zip(header, l.split("\t"))) for l in lines[1:] if l]
med = statistics.median
by = collections.defaultdict(dict)  # (side, op, lat, jobs) -> {run: row}
for r in rows:
    by[(r["side"], r["op"], r["lat_ms"], r["jobs"])][int(r["round"])] = r
secs = lambda d: {k: float(v["seconds"]) for k, v in d.items()}
cpu = lambda d: med([float(v["user_s"]) + float(v["sys_s"]) for v in d.values()])
srv = lambda d: med([float(v["server_cpu_s"]) for v in d.values()])
rss = lambda d: max(int(v["rss_kib"]) for v in d.values()) / 1024
spread = lambda s: (max(s.values()) - min(s.values())) / 2
def inflight(d):
    vals = [v for v in d.values() if v["jobs_final"] != "-"]
    if not vals:
        return "–"
    mode = vals[0]["jobs_mode"]
    f = med([float(v["jobs_final"]) for v in vals])
    mx = max(int(v["jobs_max"]) for v in vals)
    mean = med([float(v["jobs_mean"]) for v in vals])
    return f"{mode} {f:g} / {mx} / {mean:.1f}"
def cell(s, n=1):
    m = med(s.values())
    return f"{m:.2f} ({n * nbytes / MIB / m:.0f}) ± {spread(s):.2f}"

def conns(d):
    vals = [v for v in d.values() if v.get("conn_final", "-") != "-"]
    if not vals:
        return "–"
    f = med([float(v["conn_final"]) for v in vals])
    mx = max(int(v["conn_max"]) for v in vals)
    mean = med([float(v["conn_mean"]) for v in vals])
    return f"{f:g} / {mx} / {mean:.1f} (cap {vals[0]['conn_cap']})"
GIB = nbytes / (1 << 30)
TARGETS = {"restore": 0.85, "rehearse": 0.6, "rehearse2": 0.6, "verify": 0.6, "backup": 0.8, "backup2": 0.8}
CLIENTS = {"rehearse2": 2}  # clients at once: MiB/s and CPU per GiB count every client's bytes
print("| operation | local s (MiB/s) | remote s (MiB/s) | **remote ÷ local throughput** (medians) | "
      "per-run min – median – max | client CPU s local → remote | server CPU s (remote) | "
      "CPU s per GiB: local; remote client + server | "
      "peak RSS MiB local / remote | reads in flight local; remote (final / max / mean) | "
      "connections (final / max / mean) | issue 23 target |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
for op in ("restore", "rehearse", "rehearse2", "verify", "backup", "backup2"):
    l, rm = by.get(("local", op, "0", "auto")), by.get(("remote", op, "0", "auto"))
    if not l or not rm:
        continue
    ls, rs = secs(l), secs(rm)
    n = CLIENTS.get(op, 1)
    q = med(ls.values()) / med(rs.values())
    per = sorted(ls[k] / rs[k] for k in ls if k in rs)
    t = TARGETS[op]
    ok = f"≥ {t}: " + ("yes" if q >= t else "**no**")
    if op == "restore":
        c = cpu(rm) / cpu(l) if cpu(l) > 0 else 0
        ok += f"; client CPU ≤ 1.5×: {c:.2f}× " + ("yes" if c <= 1.5 else "**no**")
    name = op if n == 1 else f"{op} ({n} clients at once)"
    print(f"| {name} | {cell(ls, n)} | {cell(rs, n)} | **{q:.2f}** | {per[0]:.2f} – {med(per):.2f} – {per[-1]:.2f} | "
          f"{cpu(l):.2f} → {cpu(rm):.2f} | {srv(rm):.2f} | "
          f"{cpu(l) / GIB / n:.2f}; {cpu(rm) / GIB / n:.2f} + {srv(rm) / GIB / n:.2f} = {(cpu(rm) + srv(rm)) / GIB / n:.2f} | "
          f"{rss(l):.0f} / {rss(rm):.0f} | {inflight(l)}; {inflight(rm)} | {conns(rm)} | {ok} |")
lats = sorted({k[2] for k in by if k[0] == "remote" and k[2] != "0"}, key=float)
if lats:
    print()
    print("Latency sweep: remote `restore --rehearse --inject-latency MS`, `--jobs 1` against `--jobs auto`.")
    print()
    print("| latency ms | --jobs 1 s (MiB/s) | --jobs auto s (MiB/s) | **auto ÷ jobs 1 throughput** (medians) | "
          "per-run min – median – max | auto reads in flight (final / max / mean) | client CPU s 1 → auto | server CPU s 1 → auto |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    for lat in lats:
        one, auto = by.get(("remote", "rehearse", lat, "1")), by.get(("remote", "rehearse", lat, "auto"))
        if not one or not auto:
            continue
        s1, sa = secs(one), secs(auto)
        q = med(s1.values()) / med(sa.values())
        per = sorted(s1[k] / sa[k] for k in s1 if k in sa)
        print(f"| {lat} | {cell(s1)} | {cell(sa)} | **{q:.2f}** | {per[0]:.2f} – {med(per):.2f} – {per[-1]:.2f} | "
              f"{inflight(auto)} | {cpu(one):.2f} → {cpu(auto):.2f} | {srv(one):.2f} → {srv(auto):.2f} |")
PY
)
section=$(
  echo "### Remote restore over loopback TLS: \`cairn serve\` vs the datastore's path (restore, rehearse, verify, backup)"
  echo
  echo "Latest run: \`$command_line\` ($runs run(s), local and remote interleaved, who goes first alternating run by run; medians; ± = half the min–max spread)"
  echo
  machine_details "$dir"
  echo "- cairn: $("$cairn" --version 2>/dev/null | awk 'NR == 1' || echo '?'); binary \`$cairn\`"
  echo "- load average (1/5/15 min): $load_start at the start, $load_end at the end; CPU pressure (some avg300): $psi_start at the start, $psi_end at the end"
  echo "- data: image $image_note, $((image_bytes >> 20)) MiB; datastore $((stored_bytes >> 20)) MiB (du)"
  echo "- server: \`cairn serve --listen 127.0.0.1:0\` on this machine, a reader token (main) and a backup token (bk); client and server share the $(nproc) CPUs; server CPU over the whole run: ${server_total} s"
  echo "- the machine is shared: other sessions build and test on the same CPUs, so wall times (and MiB/s) move with their load; local and remote run back to back, so the ratios hold better, and CPU seconds per GiB (client from /usr/bin/time, server from /proc/PID/stat) hold best"
  echo "- warm page cache throughout (caches are not dropped); the client's metadata mirror is filled before the timed runs"
  echo "- MiB/s = the image's bytes ÷ wall-clock seconds of the whole command (start-up, TLS handshakes, snapshot list sync included); CPU s = user + sys"
  echo
  echo "$table"
)
printf '%s\n' "$section" >"$dir/remote_bench.md"
echo
echo "$section"
say "table written to $dir/remote_bench.md; raw timings in $results"

if ((update_docs)); then
  doc=docs/BENCHMARKS.md
  {
    echo "<!-- remote:begin -->"
    echo "## Remote restore over TLS (issue 6)"
    echo
    echo "Target of issue 6: a restore from \`cairn serve\` over TLS at ≥ 0.6× the throughput of the"
    echo "same restore from the datastore's path; issue 23's: restore ≥ 0.85×, rehearse and verify"
    echo "≥ 0.6×, backup (first and unchanged second) ≥ 0.8×, client CPU of a restore ≤ 1.5× local."
    echo "Every operation runs on both sides in the same run. Both run on this machine: the server listens on"
    echo "loopback, so this measures the cost of the protocol (TLS, HTTP, the chunk requests,"
    echo "the client's checks), not of a network. The latency sweep adds a sleep before"
    echo "every chunk read on the client (\`--inject-latency MS\`, hidden) and compares one read in"
    echo "flight (\`--jobs 1\`) with the self-tuning default (\`--jobs auto\`); it uses \`--rehearse\`"
    echo "so that the disk stays out of it."
    echo
    echo '```sh'
    echo 'bash bench/remote_bench.sh                 # 1 GiB image, 5 runs, latencies 5 and 20 ms'
    echo 'bash bench/remote_bench.sh --ops restore,verify --latencies ""   # some operations, no sweep'
    echo 'bash bench/remote_bench.sh --quick         # 256 MiB image, 3 runs'
    echo 'bash bench/remote_bench.sh --runs 3 --latencies 5,20,50 --update-docs'
    echo 'CAIRN_BIN=/path/to/build/src/cairn bash bench/remote_bench.sh   # another build'
    echo '#   --image PATH: reuse an image; --dir DIR (default /var/tmp/cairn-remote-bench);'
    echo '#   results in DIR/remote_bench.md, DIR/results.tsv, DIR/logs/'
    echo '```'
    echo
    echo "$section"
    echo "<!-- remote:end -->"
  } >"$dir/section.md"
  python3 - "$doc" "$dir/section.md" <<'PY'
import re, sys
path, section_file = sys.argv[1:]
section = open(section_file).read().strip("\n")
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# Benchmarks\n"
pat = re.compile(r"<!-- remote:begin.*?<!-- remote:end -->", re.S)
if pat.search(text):
    text = pat.sub(lambda m: section, text, count=1)
else:
    # After the encryption section: before the next "## " heading that follows it.
    m = re.search(r"^## Encryption cost.*$", text, re.M)
    n = re.search(r"^## ", text[m.end():], re.M) if m else None
    if n:
        at = m.end() + n.start()
        text = text[:at] + section + "\n\n" + text[at:]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
  say "section written to $doc (remote markers)"
fi
