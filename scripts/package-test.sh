#!/usr/bin/env bash
# Installs the Debian package into a fresh Debian 12 chroot (debootstrap,
# minbase: no compiler, no build tools) and checks it as an administrator
# would use it: `cairn --version`, `man -w cairn-restore`, completion of
# `cairn res<TAB>` through bash-completion's loader and `complete -p`, the cairn
# user and /var/lib/cairn, `systemd-analyze verify` on the installed units,
# a backup/restore round trip with the installed binary (local, and through
# `cairn serve` running as the cairn user), then `apt-get remove` and
# `purge`, after which the datastore must be untouched.
#
# Takes minutes and downloads packages (the first run makes a debootstrap
# tarball under $CAIRN_PKGTEST_CACHE, default /var/cache/cairn-package-test;
# later runs unpack it and download only cairn's dependencies). With --base
# DIR, a copy of DIR (a minbase bookworm chroot made once, never changed by
# this script) stands in for the debootstrap. Not part of scripts/test.sh:
# CI runs the cheap checks of scripts/package-check.sh.
#
#   bash scripts/package-test.sh [--base DIR] [path/to/cairn_VERSION_ARCH.deb]
#   (without a path: bash scripts/package.sh first)
# Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
base=
if [[ ${1:-} == --base ]]; then
  base=$(readlink -f "$2")
  shift 2
  [[ -x $base/bin/sh && -f $base/etc/debian_version ]] || {
    echo "package-test: $base is not a Debian chroot" >&2
    exit 2
  }
fi
deb=${1:-}
if [[ -z $deb ]]; then
  bash scripts/package.sh --no-lintian
  deb=$(ls -t build/deb/cairn_*.deb | head -1)
fi
deb=$(readlink -f "$deb")
mirror=${CAIRN_PKGTEST_MIRROR:-http://deb.debian.org/debian}
if [[ -z $base ]]; then
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  cache=${CAIRN_PKGTEST_CACHE:-/var/cache/cairn-package-test}
  tarball=$cache/bookworm-minbase.tgz
  mkdir -p "$cache"
  if [[ ! -f $tarball ]]; then
    echo "== debootstrap: making $tarball (once)"
    debootstrap --variant=minbase --make-tarball="$tarball" bookworm "$cache/work" "$mirror"
    rm -rf "$cache/work"
  fi
fi

root=$(mktemp -d /var/tmp/cairn-chroot.XXXXXX)
chmod 755 "$root"  # mktemp makes it 0700: the cairn user must reach its files
cleanup() {
  for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
if [[ -n $base ]]; then
  echo "== copying the chroot $base to $root"
  cp -a "$base/." "$root/"
else
  echo "== debootstrap: unpacking a fresh bookworm chroot in $root"
  debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" >/dev/null
fi
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
# No services start inside the chroot (policy-rc.d), as in any image build.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/"

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
check() {  # check DESCRIPTION COMMAND...: run, print, fail the script on failure
  local what=$1
  shift
  echo "== $what"
  "$@"
}

echo "== apt-get install ./$(basename "$deb") (with man-db, systemd, bash-completion: what an admin has)"
in_root apt-get update -qq
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  man-db systemd bash-completion >/dev/null
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "/tmp/$(basename "$deb")" >"$root/tmp/apt-install.log" 2>&1 || {
  tail -n 40 "$root/tmp/apt-install.log"
  exit 1
}
grep -E "^(Setting up cairn|Creating (user|group))" "$root/tmp/apt-install.log"
for tool in g++ gcc cc cmake make; do
  if in_root sh -c "command -v $tool" >/dev/null; then
    echo "package-test: $tool is in the chroot; it should have no build tools" >&2
    exit 1
  fi
done

check "cairn --version" in_root cairn --version
check "man -w cairn-restore" in_root man -w cairn-restore
in_root man -w cairn | grep -q '/usr/share/man/man1/cairn.1.gz'
check "man cairn (the first lines, as the pager would show them)" \
  in_root sh -c 'MANPAGER=cat MANWIDTH=80 man cairn 2>&1 | head -n 12'
check "every subcommand has a page" in_root sh -c 'ls /usr/share/man/man1/cairn*.1.gz | wc -l'
check "completion of 'cairn res<TAB>' (bash-completion's loader, then the function complete -p names)" \
  in_root bash -c '
    . /usr/share/bash-completion/bash_completion
    _completion_loader cairn
    spec=$(complete -p cairn) && echo "$spec"
    fn=$(sed -E "s/.* -F ([^ ]+) .*/\1/" <<<"$spec")
    COMP_LINE="cairn res"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(cairn res); COMP_CWORD=1
    "$fn" cairn res cairn
    printf "cairn res<TAB> completes to: %s\n" "${COMPREPLY[@]}"
    [[ "${COMPREPLY[*]}" == restore ]]'
check "the cairn user (sysusers.d) and /var/lib/cairn (tmpfiles.d)" \
  in_root sh -c 'id cairn && stat -c "%U %a %n" /var/lib/cairn /etc/cairn/backup.d'
check "systemd-analyze verify on the installed units" \
  in_root sh -c 'cd /lib/systemd/system && systemd-analyze verify cairn.service cairn-backup@web.service cairn-backup@web.timer && echo verified'

echo "== backup and restore with the installed binary"
in_root sh -c '
  set -e
  cairn init /srv/cairn/main
  cairn backup -r /srv/cairn/main --id host/chroot etc.tree=/etc
  cairn snapshots -r /srv/cairn/main
  cairn restore -r /srv/cairn/main host/chroot/latest etc.tree /tmp/etc.restored
  diff -r --no-dereference /etc /tmp/etc.restored && echo "restored /etc is identical"
  cairn verify -r /srv/cairn/main'
check "completion of snapshot names: 'cairn restore -r /srv/cairn/main host/ch<TAB>'" \
  in_root bash -c '
    . /usr/share/bash-completion/bash_completion
    _completion_loader cairn
    COMP_WORDS=(cairn restore -r /srv/cairn/main host/ch); COMP_CWORD=4
    COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
    _cairn cairn host/ch /srv/cairn/main
    printf "completes to: %s\n" "${COMPREPLY[@]}"
    [[ "${COMPREPLY[*]}" == *host/chroot/* ]]'

echo "== a backup job as the timer runs it: the ExecStart of cairn-backup@etc.service"
in_root sh -c '
  set -e
  cat >/etc/cairn/backup.d/etc.conf <<JOB
repository = "/srv/cairn/main"
id = "host/job"
sources = ["etc.tree=/etc"]
[keep]
last = 1
JOB
  chmod 600 /etc/cairn/backup.d/etc.conf
  cmd=$(sed -n "s/^ExecStart=//p" /lib/systemd/system/cairn-backup@.service | sed "s/%i/etc/g")
  echo "+ $cmd"
  $cmd
  cairn snapshots -r /srv/cairn/main host/job'

# The server as cairn.service runs it: its User= and ExecStart= as written
# in the installed unit, with the shipped /etc/cairn/server.json edited as an
# administrator would (a loopback port; the store is the shipped
# /srv/cairn/main). No systemd runs in a chroot, so no sd_notify here:
# tests/cli_serve_systemd_test.cc checks READY/STOPPING on a socket.
echo "== cairn serve as cairn.service starts it; a backup and a restore through it"
in_root sh -c '
  set -e
  unit=/lib/systemd/system/cairn.service
  user=$(sed -n "s/^User=//p" $unit)
  cmd=$(sed -n "s/^ExecStart=//p" $unit)
  sed -i "s/0.0.0.0:8007/127.0.0.1:18007/" /etc/cairn/server.json
  chown -R cairn:cairn /srv/cairn
  echo "+ runuser -u $user -- $cmd"
  runuser -u "$user" -- sh -c "echo \$\$ >/tmp/serve.pid; exec $cmd" >/tmp/serve.out 2>/tmp/serve.err &
  pid=$!
  for i in $(seq 100); do grep -q listening /tmp/serve.out && break; sleep 0.1; done
  cat /tmp/serve.out /tmp/serve.err
  fp=$(runuser -u cairn -- cairn cert show --config /etc/cairn/server.json --json |
       sed -nE "s/.*\"fingerprint\": *\"([0-9a-f:]+)\".*/\1/p")
  tok=$(runuser -u cairn -- cairn token create pkgtest --config /etc/cairn/server.json \
        --store main --role admin)
  export CAIRN_TOKEN=$tok CAIRN_FINGERPRINT=$fp
  cairn backup -r https://127.0.0.1:18007/main --id host/remote etc.tree=/etc
  cairn restore -r https://127.0.0.1:18007/main host/remote/latest etc.tree /tmp/etc.remote
  diff -r --no-dereference /etc /tmp/etc.remote && echo "restored through the server: identical"
  kill -TERM "$(cat /tmp/serve.pid)"  # what systemctl stop sends
  wait $pid && echo "cairn serve stopped on SIGTERM, exit 0"'

store_sum() {  # every file of the datastore and of the state directory, with its digest
  in_root sh -c 'cd / && find srv/cairn/main var/lib/cairn -type f -exec sha256sum {} + | sort | sha256sum'
}
count=$(in_root sh -c 'find /srv/cairn/main -type f | wc -l')
sum_before=$(store_sum)
quiet_apt() { in_root env DEBIAN_FRONTEND=noninteractive apt-get -y -qq "$@" 2>&1 | tr '\r' '\n' | awk 'NF && !/^\(Reading database/'; }
check "apt-get remove cairn" quiet_apt remove cairn
check "apt-get purge cairn" quiet_apt purge cairn
sum_after=$(store_sum)
echo "== after removal: /srv/cairn/main ($count files) and /var/lib/cairn: digest ${sum_before%% *} before, ${sum_after%% *} after"
[[ $sum_before == "$sum_after" ]]
in_root sh -c 'test ! -e /usr/bin/cairn && test -d /var/lib/cairn && echo "binary gone; /srv/cairn/main and /var/lib/cairn kept"'
echo "package-test: all checks passed in $((SECONDS - started)) s"
