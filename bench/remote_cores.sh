#!/usr/bin/env bash
# The remote path when cores are not the limit: the same operations on a
# datastore's path and through `cairn serve` on loopback TLS, client pinned to
# CL_CPUS (default 0-7), server to SV_CPUS (default 8-15), a SIZE (default
# 4G) generated image, everything on tmpfs, 3 rounds. Prints NAME WALL USER SYS
# (the client's seconds) per run; the JSON of each goes to $OUT/remote.log.
# For a 2-core machine bench/remote_bench.sh is the fuller tool.
#
#   bash bench/remote_cores.sh
#   CAIRN=… GENDATA=… RUN='ld.so --library-path DIR': as bench/scale_cores.sh
set -u
cd "$(dirname "$0")/.."
L=${OUT:-/tmp}/remote.log; : > $L
C=${CAIRN:-$PWD/build/release/src/cairn}
G=${GENDATA:-$PWD/build/release/bench/cairn-gendata}
R=${RUN:-}
cl="taskset -c ${CL_CPUS:-0-7} $R $C"
D=/dev/shm/cr; rm -rf $D; mkdir -p $D/state
$R $G -q image --size ${SIZE:-4G} --seed 1 $D/img
$R $C init $D/store >/dev/null; $R $C init $D/bkl >/dev/null; $R $C init $D/bkr >/dev/null
$cl backup -r $D/store --id vm/1 disk0.img=$D/img --json --no-progress > /dev/null
tok=$($R $C token create bench --state-dir $D/state --store main --role reader)
bk=$($R $C token create benchbk --state-dir $D/state --store bk --role backup)
taskset -c ${SV_CPUS:-8-15} $R $C serve --listen 127.0.0.1:0 --store main=$D/store --store bk=$D/bkr --state-dir $D/state </dev/null > $D/serve.out 2>$D/serve.err &
sp=$!
for i in $(seq 100); do line=$(grep -m1 '^cairn serve: listening on ' $D/serve.out) && break; sleep 0.1; done
port=$(sed -n 's|.*https://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' <<<"$line")
fp=$(sed -n 's|.*certificate fingerprint \([0-9A-Fa-f:]*\).*|\1|p' <<<"$line")
echo "server on $port"
export CAIRN_FINGERPRINT=$fp CAIRN_CACHE_DIR=$D/cache
url=https://127.0.0.1:$port
TIMEFORMAT='%R %U %S'
one() {  # NAME then the command
  local name=$1; shift
  local t; t=$( { time "$@" > $D/j.json 2>$D/err.txt; } 2>&1 ); [ -s $D/err.txt ] && head -3 $D/err.txt
  echo "$name $t $(tr -d '\n' < $D/j.json)" >> $L
  echo "$name $t"
}
for r in 1 2 3; do
  rm -f $D/out; one "restore-local" $cl restore -r $D/store vm/1/latest disk0.img $D/out --json --no-progress
  rm -f $D/out; CAIRN_TOKEN=$tok one "restore-remote" $cl restore -r $url/main vm/1/latest disk0.img $D/out --json --no-progress
  cmp -s $D/img $D/out || echo "remote restore DIFFERS"
  rm -f $D/out
  one "rehearse-local" $cl restore -r $D/store vm/1/latest disk0.img --rehearse --json --no-progress
  CAIRN_TOKEN=$tok one "rehearse-remote" $cl restore -r $url/main vm/1/latest disk0.img --rehearse --json --no-progress
  one "verify-local" $cl verify -r $D/store --json --no-progress
  CAIRN_TOKEN=$tok one "verify-remote" $cl verify -r $url/main --json --no-progress
  one "backup-local-$r" $cl backup -r $D/bkl --id vm/$r disk0.img=$D/img --json --no-progress
  CAIRN_TOKEN=$bk one "backup-remote-$r" $cl backup -r $url/bk --id vm/$r disk0.img=$D/img --json --no-progress
done
kill $sp; wait $sp 2>/dev/null
cat $D/serve.err | tail -5
rm -rf $D
