#!/usr/bin/env bash
# A real S3 server on loopback for cairn's object-storage tests and benchmarks:
# Ceph's RADOS Gateway from Debian 12's packages (Ceph 16 "pacific"), on a
# throw-away single-node cluster: one monitor, one bluestore OSD on a sparse
# file, radosgw; no manager (S3 does not need one). About 60 s from a bare
# machine (the packages), 8-11 s once installed, ~120 MiB of memory idle.
#
#   bash scripts/s3-server.sh start   # installs what is missing, starts, prints S3_* lines
#   bash scripts/s3-server.sh stop    # stops the daemons and removes the directory
#   bash scripts/s3-server.sh status  # exit 0 when its radosgw answers
#
# After start, `set -a; . DIR/s3.env; set +a` gives S3_ENDPOINT, S3_ACCESS_KEY,
# S3_SECRET_KEY, S3_REGION (and the same as AWS_ACCESS_KEY_ID/…).
#
# Environment: CAIRN_S3_DIR (default /tmp/cairn-s3; wiped at start), S3_PORT
# (7480), CAIRN_S3_MON_PORT (13300; the OSD binds in 16800-17300),
# CAIRN_S3_BYTES (size of the sparse bluestore file, default 20 GiB).
#
# No systemd here (nor needed): the daemons daemonize themselves and record
# their PIDs under DIR/run; stop signals only those PIDs, and only when their
# command line is a Ceph daemon's. Everything listens on 127.0.0.1 only.
# How the recipe was found, and Ceph's quirks: docs/S3.md.
set -euo pipefail

dir=${CAIRN_S3_DIR:-/tmp/cairn-s3}
ip=127.0.0.1
s3_port=${S3_PORT:-7480}
mon_port=${CAIRN_S3_MON_PORT:-13300}
store_bytes=${CAIRN_S3_BYTES:-21474836480}
t0=$(date +%s%N)
say() { printf '[s3-server %5.1fs] %s\n' "$(( ($(date +%s%N) - t0) / 1000000 ))e-3" "$*" >&2; }
die() { echo "s3-server: $*" >&2; exit 1; }

# The PIDs of this cluster's live Ceph daemons, radosgw first (stop order).
daemon_pids() {
  local name pid
  for name in client.rgw.s3 osd.0 mon.a; do
    [[ -f $dir/run/$name.pid ]] || continue
    pid=$(<"$dir/run/$name.pid")
    [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qE 'ceph-(mon|osd)|radosgw' &&
      echo "$pid"
  done
  return 0
}

stop() {
  [[ -d $dir ]] || return 0
  local pids p alive
  mapfile -t pids < <(daemon_pids)
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  # radosgw takes ~6 s to exit on TERM; the data is thrown away, so 3 s and KILL.
  for _ in $(seq 15); do
    alive=0
    for p in "${pids[@]}"; do [[ -d /proc/$p ]] && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$dir"
  say "stopped ${#pids[@]} daemon(s), removed $dir"
}

answering() {
  command -v curl >/dev/null 2>&1 || return 1  # a fresh machine: nothing answers yet
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$s3_port/" || true) == 200 ]]
}

install() {
  local missing=() pair
  for pair in ceph-mon:ceph-mon ceph-osd:ceph-osd radosgw:radosgw ceph:ceph-common curl:curl; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) -eq 0 ]] || die "needs ${missing[*]} (Debian packages); run as root to install them"
  say "installing ${missing[*]} (about a minute the first time)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_conf() {
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $(cat /proc/sys/kernel/random/uuid)
mon_host = v2:$ip:$mon_port
public_addr = $ip
public_network = 127.0.0.0/8
ms_bind_msgr1 = false
ms_bind_msgr2 = true
ms_bind_port_min = 16800
ms_bind_port_max = 17300
auth_allow_insecure_global_id_reclaim = false
keyring = $dir/keyring
run_dir = $dir/run
admin_socket = $dir/run/\$cluster-\$name.asok
pid_file = $dir/run/\$name.pid
log_file = $dir/log/\$name.log
mon_cluster_log_file = $dir/log/cluster.log
crash_dir = $dir/crash
log_to_stderr = false
# One node: one replica, few placement groups (radosgw makes 7 pools; the
# default 32 PGs each nearly hits the per-OSD limit).
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000
mon_data_avail_crit = 1
mon_data_avail_warn = 2
# Each pool radosgw creates is one monitor round: 0.1 s instead of 1 s each.
paxos_propose_interval = 0.1

[mon]
mon_data = $dir/mon/\$cluster-\$id

[osd]
osd_data = $dir/osd/\$cluster-\$id
osd_objectstore = bluestore
# A sparse file: disk use is what was written; memory stays bounded.
bluestore_block_path = $dir/osd/ceph-0/block.file
bluestore_block_size = $store_bytes
bluestore_block_create = true
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
osd_memory_target = 1073741824
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1

[client.rgw.s3]
rgw_frontends = beast endpoint=$ip:$s3_port
rgw_data = $dir/rgw
rgw_thread_pool_size = 64
rgw_dns_name = localhost
rgw_enable_usage_log = false
rgw_enable_ops_log = false
# Deleted object tails wait 2 h for radosgw's gc by default.
rgw_gc_obj_min_wait = 300
rgw_gc_processor_period = 300
EOF
}

start() {
  install
  [[ -z $(daemon_pids 2>/dev/null) ]] || die "$dir holds a running cluster: run '$0 stop' first"
  local p
  for p in "$s3_port" "$mon_port"; do
    if (exec 3<>"/dev/tcp/$ip/$p") 2>/dev/null; then die "port $ip:$p is in use"; fi
  done
  rm -rf "$dir"
  mkdir -p "$dir"/{log,run,crash,rgw,mon/ceph-a,osd/ceph-0}
  trap 'rc=$?; ((rc == 0)) || { say "failed (exit $rc); logs in $dir/log"; mapfile -t ps < <(daemon_pids); kill -KILL "${ps[@]}" 2>/dev/null || true; }' EXIT
  write_conf
  export CEPH_CONF=$dir/ceph.conf
  local key=$dir/keyring
  ceph-authtool "$key" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$key" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$key" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' >/dev/null
  ceph-authtool "$key" --gen-key -n client.rgw.s3 --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null

  monmaptool --create --fsid "$(sed -n 's/^fsid = //p' "$CEPH_CONF")" --addv a "[v2:$ip:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon --mkfs -i a --monmap "$dir/monmap" --keyring "$key"
  ceph-mon -i a 2>>"$dir/log/stderr.log"
  local ceph=(ceph --connect-timeout 30)
  for _ in $(seq 60); do "${ceph[@]}" mon stat >/dev/null 2>&1 && break; sleep 0.5; done
  "${ceph[@]}" mon stat >/dev/null || die "the monitor does not answer (log: $dir/log/mon.a.log)"
  say "monitor up"

  local uuid id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$("${ceph[@]}" osd new "$uuid")
  [[ $id == 0 ]] || die "the new OSD got id '$id', not 0"
  ceph-osd -i 0 --mkfs --osd-uuid "$uuid" >"$dir/log/osd-mkfs.log" 2>&1
  ceph-osd -i 0 2>>"$dir/log/stderr.log"
  for _ in $(seq 120); do "${ceph[@]}" osd dump 2>/dev/null | grep -q '^osd.0 up' && break; sleep 0.5; done
  "${ceph[@]}" osd dump | grep -q '^osd.0 up' || die "osd.0 did not come up (log: $dir/log/osd.0.log)"
  say "OSD up"

  radosgw -n client.rgw.s3 2>>"$dir/log/stderr.log"
  for _ in $(seq 240); do
    answering && break
    sleep 0.5
  done
  answering || die "radosgw does not answer on $ip:$s3_port (log: $dir/log/client.rgw.s3.log)"
  say "radosgw answering on http://$ip:$s3_port"

  local ak sk
  ak=${S3_ACCESS_KEY:-$(od -An -N10 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)}
  sk=${S3_SECRET_KEY:-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')}
  radosgw-admin -n client.admin user create --uid=cairn --display-name=cairn \
    --access-key="$ak" --secret-key="$sk" >"$dir/log/user.json"
  cat >"$dir/s3.env" <<EOF
S3_ENDPOINT=http://$ip:$s3_port
S3_ACCESS_KEY=$ak
S3_SECRET_KEY=$sk
S3_REGION=us-east-1
AWS_ACCESS_KEY_ID=$ak
AWS_SECRET_ACCESS_KEY=$sk
EOF
  say "ready; credentials in $dir/s3.env"
  cat "$dir/s3.env"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) answering ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
