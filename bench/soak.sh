#!/usr/bin/env bash
# Soak (issue 29): everything at once, for a long time, loses nothing.
#
#   bash bench/soak.sh [--minutes N] [--dir DIR] [--seed S] [--image-mib M]
#
#   --minutes N    how long the chaos runs (default 10); then the final checks
#   --dir DIR      work directory (default /var/tmp/cairn-soak; removed first)
#   --seed S       seeds bash's RANDOM: which client does what, when the chaos
#                  strikes and what it hits (default 29)
#   --image-mib M  size of each client's image (default 32)
#
# What runs (all on loopback): one `cairn serve` with two datastores (a, b);
# two clients, each with its own backup token on its own store, looping:
# change its image (a few MiB of new random data) and its tree (a file
# rewritten, a file added), back both up through the server, and now and
# then restore the newest snapshot and compare, or verify through the
# server; a maintenance loop runs prune (--keep-last 4, through the server
# with an admin token, logged) and gc (on the store's path, --grace 0) on
# either store; a chaos loop, every few seconds, SIGKILLs the server (and
# restarts it on the same port), SIGKILLs whatever cairn command a client
# or the maintenance loop is running, or flips a byte of a random chunk
# file (logged). The server's RSS is sampled every 2 s.
#
# At the end (server restarted clean): each store is verified (every
# corrupted chunk must be among the problems found, or gone: gc'd, or
# rewritten by a backup), one more backup per client heals what its current
# source still holds, a second verify; then every snapshot that a backup
# reported as finished is restored and compared byte for byte (image by
# SHA-256, tree by the SHA-256 of every file) unless prune removed it (it
# has 4 newer snapshots listed: the rule). A finished snapshot missing
# otherwise, one that restores different bytes, or a healing backup's
# snapshot that the second verify finds referencing a damaged or missing
# chunk, fails the soak (exit 1); one that fails with exit 3 (corruption)
# because it holds a corrupted chunk that verify found and no source has
# any more is counted as "lost to injected corruption", not a failure.
# Prints the counts (one line per figure, and DIR/summary.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
bench_name=soak
source bench/lib.sh

minutes=10
dir=/var/tmp/cairn-soak
seed=29
image_mib=32
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --image-mib) image_mib=$2; shift 2 ;;
    *) die "unknown option $1 (see the top of bench/soak.sh)" ;;
  esac
done
RANDOM=$seed
CAIRN=${CAIRN:-$PWD/build/release/src/cairn}
[[ -x $CAIRN ]] || die "no cairn at $CAIRN (build it: cmake --build build/release --target cairn)"

rm -rf "$dir"
trap 'touch "$dir/stop" 2>/dev/null' EXIT
mkdir -p "$dir"/{log,expected,pids,sources}
dir=$(cd "$dir" && pwd)
log() { printf '%s %s\n' "$(date -u +%T)" "$*" >>"$dir/log/events.log"; }
count() { echo 1 >>"$dir/log/count.$1"; }
total() { [[ -f $dir/log/count.$1 ]] && wc -l <"$dir/log/count.$1" || echo 0; }

# --- set-up -----------------------------------------------------------------
say "set-up in $dir"
for s in a b; do "$CAIRN" init "$dir/store-$s" >/dev/null || die "init store-$s"; done
state=$dir/state
token() { "$CAIRN" token create "$1" --state-dir "$state" --store "$2" --role "$3" | head -1; }
tok_a=$(token client-a a backup) && tok_b=$(token client-b b backup) &&
  adm_a=$(token admin-a a admin) && adm_b=$(token admin-b b admin) &&
  rd_a=$(token reader-a a verify) && rd_b=$(token reader-b b verify) || die "tokens"

server_pid=
port=0
start_server() {
  local listen=127.0.0.1:$port out=$dir/log/server.out
  "$CAIRN" serve --listen "$listen" --store "a=$dir/store-a" --store "b=$dir/store-b" \
    --state-dir "$state" >"$out" 2>>"$dir/log/server.err" &
  server_pid=$!
  echo "$server_pid" >"$dir/pids/server"
  local i line=
  for ((i = 0; i < 300; i++)); do
    line=$(grep -m1 'listening on' "$out" 2>/dev/null) && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      # The port is not free yet after a kill: try again, then any port.
      ((i > 100)) && listen=127.0.0.1:0
      sleep 0.2
      "$CAIRN" serve --listen "$listen" --store "a=$dir/store-a" --store "b=$dir/store-b" \
        --state-dir "$state" >"$out" 2>>"$dir/log/server.err" &
      server_pid=$!
      echo "$server_pid" >"$dir/pids/server"
    fi
    sleep 0.1
  done
  [[ $line =~ https://127\.0\.0\.1:([0-9]+).*fingerprint\ ([0-9a-f:]+) ]] ||
    die "the server did not start: $(tail -3 "$dir/log/server.err")"
  port=${BASH_REMATCH[1]}
  fingerprint=${BASH_REMATCH[2]}
  echo "$port $fingerprint" >"$dir/server.addr"
}
start_server
say "server on port $port"

# Sources: an image and a tree per client.
make_sources() {
  local c=$1 src=$dir/sources/$1
  mkdir -p "$src/tree/etc" "$src/tree/data"
  head -c $((image_mib << 20)) /dev/urandom >"$src/disk.img"
  echo "client $c" >"$src/tree/etc/config"
  head -c 3000000 /dev/urandom >"$src/tree/data/big.bin"
  seq 1 200000 >"$src/tree/data/numbers.txt"
  ln -s etc/config "$src/tree/link"
}
change_sources() {
  local src=$dir/sources/$1 n=$2
  local mib=$((RANDOM % image_mib)) len=$((1 + RANDOM % 3))
  dd if=/dev/urandom of="$src/disk.img" bs=1M seek=$mib count=$len conv=notrunc status=none
  echo "round $n" >>"$src/tree/etc/config"
  head -c $((RANDOM * 10)) /dev/urandom >"$src/tree/data/new-$((n % 5)).bin"
}
tree_sum() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64); }
image_sum() { sha256sum <"$1" | cut -c1-64; }
for c in a b; do make_sources $c; done

# run_client CLIENT backup|verify PIDFILE-NAME CAIRN-ARGS…: cairn as client
# CLIENT with its backup token, or its verify token (restores, verifies).
run_client() {
  local c=$1 role=$2 name=$3
  shift 3
  local tok=$tok_a
  [[ $c == b ]] && tok=$tok_b
  [[ $role == verify && $c == a ]] && tok=$rd_a
  [[ $role == verify && $c == b ]] && tok=$rd_b
  read -r port fingerprint <"$dir/server.addr"
  CAIRN_TOKEN=$tok CAIRN_FINGERPRINT=$fingerprint CAIRN_CACHE_DIR=$dir/cache-$c \
    CAIRN_TRUSTED_SERVERS=$dir/servers "$CAIRN" "$@" &
  local pid=$!
  echo "$pid" >"$dir/pids/$name"
  wait "$pid"
  local rc=$?
  rm -f "$dir/pids/$name"
  return $rc
}
url() { read -r port fingerprint <"$dir/server.addr"; echo "https://127.0.0.1:$port/$1"; }
snap_time() { date -u -d "@$((1798761600 + $1))" +%Y-%m-%dT%H:%M:%SZ; }

# --- the client loops -------------------------------------------------------
client_loop() {
  local c=$1 n=0 src=$dir/sources/$1
  RANDOM=$((seed * 7 + ${#c} + $(printf '%d' "'$c")))
  while [[ ! -f $dir/stop ]]; do
    n=$((n + 1))
    change_sources "$c" "$n"
    local t time img tre
    t=$((n << 1))
    [[ $c == b ]] && t=$((t + 1))
    time=$(snap_time "$t")
    img=$(image_sum "$src/disk.img")
    tre=$(tree_sum "$src/tree")
    if run_client "$c" backup "client-$c" backup -q -r "$(url "$c")" --id "vm/$c" --time "$time" \
      "disk0.img=$src/disk.img" "root.tree=$src/tree" >>"$dir/log/client-$c.log" 2>&1; then
      count backup_ok
      echo "vm/$c/$time $img $tre" >>"$dir/expected/$c"
      echo $((image_mib << 20)) >>"$dir/log/bytes"
      log "client $c: backup vm/$c/$time finished"
    else
      count backup_failed
      log "client $c: backup vm/$c/$time failed (rc $?)"
    fi
    case $((RANDOM % 4)) in
      0)  # restore the newest finished snapshot and compare
        local line
        line=$(tail -1 "$dir/expected/$c" 2>/dev/null) || continue
        [[ -n $line ]] || continue
        read -r snap img tre <<<"$line"
        rm -rf "$dir/restore-$c"
        if run_client "$c" verify "client-$c" restore -q -r "$(url "$c")" "$snap" disk0.img \
          "$dir/restore-$c.img" >>"$dir/log/client-$c.log" 2>&1; then
          if [[ $(image_sum "$dir/restore-$c.img") == "$img" ]]; then
            count restore_ok
          else
            count restore_mismatch
            log "client $c: restore of $snap gave different bytes"
          fi
        else
          count restore_failed
        fi
        rm -f "$dir/restore-$c.img"
        ;;
      1)  # verify through the server (a verify on the client)
        local rc=0
        run_client "$c" verify "client-$c" verify -r "$(url "$c")" "vm/$c" --json >>"$dir/log/verify-$c.log" 2>&1 || rc=$?
        count "verify_rc$rc"
        ;;
    esac
  done
}

maintenance_loop() {
  RANDOM=$((seed * 13))
  while [[ ! -f $dir/stop ]]; do
    sleep $((2 + RANDOM % 5))
    local s=a
    ((RANDOM % 2)) && s=b
    if ((RANDOM % 2)); then
      local adm=$adm_a
      [[ $s == b ]] && adm=$adm_b
      read -r port fingerprint <"$dir/server.addr"
      CAIRN_TOKEN=$adm CAIRN_FINGERPRINT=$fingerprint CAIRN_CACHE_DIR=$dir/cache-adm \
        CAIRN_TRUSTED_SERVERS=$dir/servers "$CAIRN" prune -r "$(url "$s")" "vm/$s" \
        --keep-last 4 --json >"$dir/log/prune.out" 2>>"$dir/log/maintenance.log" &
      echo $! >"$dir/pids/maintenance"
      if wait $!; then
        count prune_ok
      else
        count prune_failed
      fi
    else
      "$CAIRN" gc -q -r "$dir/store-$s" --grace 0 >>"$dir/log/maintenance.log" 2>&1 &
      echo $! >"$dir/pids/maintenance"
      if wait $!; then count gc_ok; else count gc_failed; fi
    fi
    rm -f "$dir/pids/maintenance"
  done
}

chaos_loop() {
  RANDOM=$((seed * 17))
  while [[ ! -f $dir/stop ]]; do
    sleep $((3 + RANDOM % 8))
    [[ -f $dir/stop ]] && break
    case $((RANDOM % 4)) in
      0)
        kill -9 "$server_pid" 2>/dev/null && count kill_server
        wait "$server_pid" 2>/dev/null
        log "chaos: killed the server"
        sleep 1
        start_server
        ;;
      1 | 2)
        local victim
        victim=$(ls "$dir/pids" | grep -v server | shuf -n1 --random-source=<(yes $RANDOM))
        [[ -n $victim ]] || continue
        local pid
        pid=$(cat "$dir/pids/$victim" 2>/dev/null) || continue
        kill -9 "$pid" 2>/dev/null && count "kill_$victim" && log "chaos: killed $victim ($pid)"
        ;;
      3)
        local s=a f
        ((RANDOM % 2)) && s=b
        # A chunk at least 5 s old (not one being written now).
        f=$(find "$dir/store-$s/.chunks" -type f -not -name '*.tmp-*' -mmin +0.08 2>/dev/null |
          shuf -n1 --random-source=<(yes $RANDOM))
        [[ -n $f ]] || continue
        local size off
        size=$(stat -c %s "$f")
        ((size > 80)) || continue
        off=$((64 + RANDOM % (size - 64)))
        printf '\xff' | dd of="$f" bs=1 seek=$off conv=notrunc status=none
        count corruption
        echo "$s $(basename "$f")" >>"$dir/log/corrupted"
        log "chaos: flipped byte $off of chunk $(basename "$f") in store $s"
        ;;
    esac
  done
}

rss_loop() {
  while [[ ! -f $dir/stop ]]; do
    local p
    p=$(cat "$dir/pids/server" 2>/dev/null)
    [[ -n $p ]] && awk -v t="$SECONDS" '/^VmRSS/ {print t, $2}' "/proc/$p/status" 2>/dev/null >>"$dir/log/rss"
    sleep 2
  done
}

say "soak for $minutes minutes (seed $seed)"
client_loop a &
pa=$!
client_loop b &
pb=$!
maintenance_loop &
pm=$!
rss_loop &
pr=$!
# The chaos loop restarts the server: it runs here, in this shell, so it
# owns server_pid; the end of the soak is its stop file.
( sleep $((minutes * 60)); touch "$dir/stop" ) &
pt=$!
chaos_loop
wait $pa $pb $pm $pr $pt 2>/dev/null

# --- final checks -----------------------------------------------------------
say "final checks"
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid" 2>/dev/null
start_server
failures=()
for s in a b; do
  "$CAIRN" verify -r "$dir/store-$s" --json >"$dir/log/verify1-$s.json" 2>>"$dir/log/final.log"
  echo "$?" >"$dir/log/verify1-$s.rc"
done
found=0
gone=0
missed=0
while read -r s id; do
  if grep -q "$id" "$dir/log/verify1-$s.json" "$dir"/log/verify-*.log 2>/dev/null; then
    found=$((found + 1))
  elif [[ -z $(find "$dir/store-$s/.chunks" -name "$id" -type f 2>/dev/null) ]]; then
    gone=$((gone + 1))  # collected by gc (no snapshot used it), or quarantined earlier
  elif "$CAIRN" verify -r "$dir/store-$s" --json 2>/dev/null | grep -q "$id"; then
    found=$((found + 1))
  else
    # Rewritten whole by a later upload (a proved plain chunk replaces a
    # damaged copy) before any verify saw it: nothing to find.
    missed=$((missed + 1))
  fi
done < <(cat "$dir/log/corrupted" 2>/dev/null)
# One more backup per client: heals what the current sources still hold.
for c in a b; do
  t=$((1000000 + $(printf '%d' "'$c")))
  if run_client "$c" backup final backup -q -r "$(url "$c")" --id "vm/$c" --time "$(snap_time $t)" \
    "disk0.img=$dir/sources/$c/disk.img" "root.tree=$dir/sources/$c/tree" >>"$dir/log/final.log" 2>&1; then
    echo "vm/$c/$(snap_time $t) $(image_sum "$dir/sources/$c/disk.img") $(tree_sum "$dir/sources/$c/tree")" >>"$dir/expected/$c"
  else
    failures+=("the final backup of client $c failed")
  fi
done
for s in a b; do
  "$CAIRN" verify -r "$dir/store-$s" --json >"$dir/log/verify2-$s.json" 2>>"$dir/log/final.log"
  echo "$?" >"$dir/log/verify2-$s.rc"
  # The healing backup read its whole source again: its snapshot must not
  # reference a damaged or missing chunk (older ones may: their data left
  # the source).
  t=$((1000000 + $(printf '%d' "'$s")))
  bad=$(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
for p in d.get("problems", []):
    if any(a.startswith(sys.argv[2] + " ") for a in p.get("affected", [])):
        print(p.get("what", "?"))
' "$dir/log/verify2-$s.json" "vm/$s/$(snap_time $t)")
  [[ -z $bad ]] || failures+=("the healing backup vm/$s/$(snap_time $t) references $bad")
done

restored=0
pruned=0
lost=0
for c in a b; do
  listed=$("$CAIRN" snapshots -r "$dir/store-$c" --json | python3 -c '
import json, sys
for s in json.load(sys.stdin): print(s["snapshot"])')
  while read -r snap img tre; do
    [[ -n $snap ]] || continue
    if ! grep -qx "$snap" <<<"$listed"; then
      # Only prune --keep-last 4 removes snapshots: the 4 newest of the
      # group are always there, so a missing one must be older than 4
      # listed ones (a prune killed before it printed what it removed
      # still obeyed the rule).
      newer=$(awk -v s="$snap" '$0 > s' <<<"$listed" | wc -l)
      if ((newer >= 4)); then
        pruned=$((pruned + 1))
      else
        failures+=("$snap finished but is not listed, with only $newer newer snapshots (keep-last 4)")
      fi
      continue
    fi
    rm -rf "$dir/final-restore"
    mkdir -p "$dir/final-restore"
    rc=0
    "$CAIRN" restore -q -r "$dir/store-$c" "$snap" disk0.img "$dir/final-restore/disk.img" 2>>"$dir/log/final.log" || rc=$?
    if ((rc == 0)); then
      "$CAIRN" restore -q -r "$dir/store-$c" "$snap" root.tree "$dir/final-restore/tree" 2>>"$dir/log/final.log" || rc=$?
    fi
    if ((rc == 3)); then
      lost=$((lost + 1))
      log "final: $snap lost to injected corruption (restore exit 3)"
    elif ((rc != 0)); then
      failures+=("$snap: restore exit $rc")
    elif [[ $(image_sum "$dir/final-restore/disk.img") != "$img" || $(tree_sum "$dir/final-restore/tree") != "$tre" ]]; then
      failures+=("$snap: restored bytes differ")
    else
      restored=$((restored + 1))
    fi
  done <"$dir/expected/$c"
done
kill "$server_pid" 2>/dev/null
wait "$server_pid" 2>/dev/null

rss_first=$(awk 'NR<=10 && $2>m {m=$2} END {print m+0}' "$dir/log/rss" 2>/dev/null)
rss_max=$(awk '$2>m {m=$2} END {print m+0}' "$dir/log/rss" 2>/dev/null)
rss_last=$(tail -1 "$dir/log/rss" 2>/dev/null | awk '{print $2+0}')
bytes=$(awk '{s+=$1} END {printf "%.0f", s}' "$dir/log/bytes" 2>/dev/null)
{
  echo "minutes $minutes"
  echo "seed $seed"
  echo "backups_finished $(total backup_ok)"
  echo "backups_failed $(total backup_failed)"
  echo "bytes_backed_up $bytes"
  echo "restores_ok $(total restore_ok)"
  echo "restores_failed $(total restore_failed)"
  echo "restore_mismatches $(total restore_mismatch)"
  echo "verifies $(( $(total verify_rc0) + $(total verify_rc3) + $(total verify_rc1) + $(total verify_rc137) ))" \
    "(clean $(total verify_rc0), found corruption $(total verify_rc3))"
  echo "prunes $(total prune_ok) (failed $(total prune_failed)); gcs $(total gc_ok) (failed $(total gc_failed))"
  echo "kills_server $(total kill_server)"
  echo "kills_client $(( $(total kill_client-a) + $(total kill_client-b) ))"
  echo "kills_maintenance $(total kill_maintenance)"
  echo "corruptions $(total corruption) (found by verify $found, gone $gone, rewritten before a verify $missed)"
  echo "final_verify_rc a=$(cat "$dir/log/verify1-a.rc") b=$(cat "$dir/log/verify1-b.rc")," \
    "after the healing backup a=$(cat "$dir/log/verify2-a.rc") b=$(cat "$dir/log/verify2-b.rc")"
  echo "snapshots_restored_byte_for_byte $restored"
  echo "snapshots_pruned $pruned"
  echo "snapshots_lost_to_injected_corruption $lost"
  echo "server_rss_kib first_20s=$rss_first max=$rss_max last=$rss_last"
  echo "failures ${#failures[@]}"
  for f in "${failures[@]}"; do echo "  FAIL: $f"; done
} | tee "$dir/summary.txt"
((${#failures[@]} == 0 && $(total restore_mismatch) == 0)) || exit 1
