#!/usr/bin/env bash
# A/B of what a first backup through `cairn serve` costs the server (issue
# 23): two servers on loopback, one per binary, each with an empty datastore
# `bk` and a backup token; ROUNDS rounds, the order alternating, each
# emptying the datastore and backing IMAGE up through one server with
# BIN_A as the client. Prints wall seconds, the client's CPU seconds
# (/usr/bin/time) and the server's (/proc/PID/stat) per backup. The servers
# share the machine's CPUs with the client; compare medians.
#
#   bash bench/server_cpu_ab.sh BIN_A BIN_B ROUNDS IMAGE DIR
set -euo pipefail
A=$1 B=$2 rounds=$3 image=$4 dir=$5
client=$A
tck=$(getconf CLK_TCK)
mkdir -p "$dir"
cpu() { local s; s=$(cat /proc/$1/stat); s=${s##*) }; awk -v t=$tck '{printf "%.2f", ($12+$13)/t}' <<<"$s"; }
start() {  # start BIN NAME -> sets pid, url, token env
  local bin=$1 name=$2 d=$dir/$2
  rm -rf "$d"; mkdir -p "$d"; "$bin" init "$d/bk" >/dev/null
  tok=$("$bin" token create t --state-dir "$d/st" --store bk --role backup 2>/dev/null)
  "$bin" serve --listen 127.0.0.1:0 --store "bk=$d/bk" --state-dir "$d/st" >"$d/serve.out" 2>"$d/serve.err" &
  eval "pid_$name=$!"
  for _ in $(seq 100); do grep -q listening "$d/serve.out" && break; sleep 0.1; done
  eval "url_$name=https://127.0.0.1:$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$d/serve.out")/bk"
  eval "fp_$name=$(sed -n 's/.*fingerprint \([0-9a-f:]*\).*/\1/p' "$d/serve.out")"
  eval "tok_$name=$tok"
}
start "$A" a; start "$B" b
trap 'kill $pid_a $pid_b 2>/dev/null || true' EXIT
cat "$image" >/dev/null
echo -e "round\tbin\twall_s\tclient_cpu_s\tserver_cpu_s"
for ((r = 1; r <= rounds; r++)); do
  for n in $( ((r % 2)) && echo "a b" || echo "b a"); do
    eval "pid=\$pid_$n url=\$url_$n fp=\$fp_$n tok=\$tok_$n"
    rm -rf "$dir/$n/bk/vm" "$dir/$n/bk/.ledger"; find "$dir/$n/bk/.chunks" -type f -delete; sync
    c0=$(cpu $pid); t0=$(date +%s.%N)
    CAIRN_TOKEN=$tok CAIRN_FINGERPRINT=$fp CAIRN_CACHE_DIR=$dir/$n/cache /usr/bin/time -f "%U %S" -o "$dir/time" \
      "$client" backup -r "$url" --id vm/9 "disk0.img=$image" --json >"$dir/$n/bk.json"
    t1=$(date +%s.%N); c1=$(cpu $pid)
    read -r u s <"$dir/time"
    echo -e "$r\t$n\t$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')\t$(awk -v u=$u -v s=$s 'BEGIN{printf "%.2f", u+s}')\t$(awk -v a=$c0 -v b=$c1 'BEGIN{printf "%.2f", b-a}')"
  done
done
