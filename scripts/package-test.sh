#!/usr/bin/env bash
# Installs the Debian package into a fresh Debian 12 chroot (debootstrap,
# minbase: no compiler, no build tools) and checks it as an administrator
# would use it: `cairn --version`, `man -w cairn-restore`, completion of
# `cairn res<TAB>` through bash-completion's loader and compgen, the cairn
# user and /var/lib/cairn, `systemd-analyze verify` on the installed units,
# a backup/restore round trip with the installed binary (local, and through
# `cairn serve` running as the cairn user), then `apt-get remove` and
# `purge`, after which the datastore must be untouched.
#
# Takes minutes and downloads packages (the first run makes a debootstrap
# tarball under $CAIRN_PKGTEST_CACHE, default /var/cache/cairn-package-test;
# later runs unpack it and download only cairn's dependencies). Not part of
# scripts/test.sh: CI runs the cheap checks of scripts/package-check.sh.
#
#   bash scripts/package-test.sh [path/to/cairn_VERSION_ARCH.deb]
#   (without a path: bash scripts/package.sh first)
# Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
deb=${1:-}
if [[ -z $deb ]]; then
  bash scripts/package.sh --no-lintian
  deb=$(ls -t build/deb/cairn_*.deb | head -1)
fi
deb=$(readlink -f "$deb")
command -v debootstrap >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null

cache=${CAIRN_PKGTEST_CACHE:-/var/cache/cairn-package-test}
mirror=${CAIRN_PKGTEST_MIRROR:-http://deb.debian.org/debian}
tarball=$cache/bookworm-minbase.tgz
mkdir -p "$cache"
if [[ ! -f $tarball ]]; then
  echo "== debootstrap: making $tarball (once)"
  debootstrap --variant=minbase --make-tarball="$tarball" bookworm "$cache/work" "$mirror"
  rm -rf "$cache/work"
fi

root=$(mktemp -d /var/tmp/cairn-chroot.XXXXXX)
chmod 755 "$root"  # mktemp makes it 0700: the cairn user must reach its files
cleanup() {
  for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
echo "== debootstrap: unpacking a fresh bookworm chroot in $root"
debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$root" "$mirror" >/dev/null
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
  "/tmp/$(basename "$deb")"
for tool in g++ gcc cc cmake make; do
  if in_root sh -c "command -v $tool" >/dev/null; then
    echo "package-test: $tool is in the chroot; it should have no build tools" >&2
    exit 1
  fi
done

check "cairn --version" in_root cairn --version
check "man -w cairn-restore" in_root man -w cairn-restore
in_root man -w cairn | grep -q '/usr/share/man/man1/cairn.1.gz'
check "every subcommand has a page" in_root sh -c 'ls /usr/share/man/man1/cairn*.1.gz | wc -l'
check "completion of 'cairn res<TAB>' (bash-completion's loader, then compgen)" \
  in_root bash -c '
    . /usr/share/bash-completion/bash_completion
    _completion_loader cairn
    complete -p cairn
    COMP_LINE="cairn res"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(cairn res); COMP_CWORD=1
    _cairn
    printf "completes to: %s\n" "${COMPREPLY[@]}"
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

echo "== a backup job as the timer runs it (cairn job run), then through cairn serve as user cairn"
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
  cairn job run /etc/cairn/backup.d/etc.conf
  chown -R cairn:cairn /srv/cairn
  runuser -u cairn -- cairn serve --listen 127.0.0.1:18007 --store main=/srv/cairn/main \
    --state-dir /var/lib/cairn >/tmp/serve.out 2>/tmp/serve.err &
  for i in $(seq 100); do grep -q listening /tmp/serve.out && break; sleep 0.1; done
  fp=$(sed -nE "s/.*fingerprint ([0-9a-f:]+).*/\1/p" /tmp/serve.out)
  tok=$(runuser -u cairn -- cairn token create pkgtest --state-dir /var/lib/cairn --store main --role admin)
  CAIRN_TOKEN=$tok CAIRN_FINGERPRINT=$fp cairn restore -r https://127.0.0.1:18007/main \
    host/job/latest etc.tree /tmp/etc.remote
  diff -r --no-dereference /etc /tmp/etc.remote && echo "restored through the server: identical"
  kill %1; wait || true'

count_before=$(in_root sh -c 'find /srv/cairn/main -type f | wc -l')
check "apt-get remove cairn" in_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq cairn
check "apt-get purge cairn" in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq cairn
count_after=$(in_root sh -c 'find /srv/cairn/main -type f | wc -l')
echo "== after removal: datastore files $count_before before, $count_after after"
[[ $count_before == "$count_after" ]]
in_root sh -c 'test ! -e /usr/bin/cairn && test -d /var/lib/cairn && echo "binary gone; /srv/cairn/main and /var/lib/cairn kept"'
echo "package-test: all checks passed in $((SECONDS - started)) s"
