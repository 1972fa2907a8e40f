#!/usr/bin/env bash
# The package checks CI runs (scripts/test.sh, stage "package"; seconds, on
# the release tree it has just built and tested):
#   - the .deb built by scripts/package.sh from that tree (nothing compiled);
#   - its contents: /usr/bin/cairn, a man page for cairn and for every
#     subcommand `cairn --help` lists, bash and zsh completion, the units,
#     sysusers.d and tmpfiles.d entries, docs and sample configs;
#   - its Depends: the shared libraries the binary links, per dpkg-shlibdeps;
#   - the man pages render without a warning (man --warnings);
#   - bash completion completes `cairn res` to `restore` and `cairn key c` to
#     `change-passphrase create`; zsh parses its script;
#   - systemd-analyze verify on the units, against the unpacked package.
# The full test (install into a fresh Debian chroot, round trip, removal) is
# scripts/package-test.sh.
#
#   bash scripts/package-check.sh [--no-build]   (--no-build: check build/deb as it is)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} != --no-build ]]; then
  bash scripts/package.sh --no-deps --no-lintian >build/package.log 2>&1 || {
    tail -n 40 build/package.log
    echo "package-check: scripts/package.sh failed (build/package.log)" >&2
    exit 1
  }
fi
deb=$(ls -t build/deb/cairn_*.deb | head -1)
failures=0
fail() {
  echo "package-check: FAIL: $*" >&2
  failures=$((failures + 1))
}

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
contents=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')

# Contents.
for f in /usr/bin/cairn /usr/share/man/man1/cairn.1.gz /usr/share/man/man1/cairn-restore.1.gz \
  /usr/share/man/man1/cairn-key-create.1.gz /usr/share/man/man1/cairn-job-run.1.gz \
  /usr/share/bash-completion/completions/cairn /usr/share/zsh/vendor-completions/_cairn \
  /lib/systemd/system/cairn.service /lib/systemd/system/cairn-backup@.service \
  /lib/systemd/system/cairn-backup@.timer /usr/lib/sysusers.d/cairn.conf \
  /usr/lib/tmpfiles.d/cairn.conf /etc/cairn/server.json /etc/logrotate.d/cairn \
  /usr/share/doc/cairn/README.md.gz /usr/share/doc/cairn/SERVER.md.gz /usr/share/doc/cairn/copyright \
  /usr/share/doc/cairn/examples/config.toml /usr/share/doc/cairn/examples/backup-job.conf; do
  grep -qxF "$f" <<<"$contents" || fail "$f is not in $deb"
done
# A page for every subcommand the binary has.
cairn=$root/usr/bin/cairn
for cmd in $("$cairn" --help | awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1}'); do
  [[ -f $root/usr/share/man/man1/cairn-$cmd.1.gz ]] || fail "no man page for 'cairn $cmd'"
done
pages=$(ls "$root"/usr/share/man/man1/ | wc -l)

# Depends: what the binary links.
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libssl3 libzstd1 libisal2 libcurl4 libsystemd0 libtomlplusplus3 libqrencode4 libargon2-1 libstdc++6; do
  grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib: $depends"
done

# Man pages render cleanly.
for page in "$root"/usr/share/man/man1/*.1.gz; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
  [[ -z $warnings ]] || fail "$(basename "$page"): $warnings"
done

# Completion.
got=$(bash -c '. "$1"; complete -p cairn >/dev/null || exit 1
  COMP_LINE="cairn res"; COMP_POINT=${#COMP_LINE}; _cairn; echo "${COMPREPLY[*]}"' _ \
  "$root/usr/share/bash-completion/completions/cairn") || true
[[ $got == restore ]] || fail "bash: 'cairn res<TAB>' gave '$got', not 'restore'"
got=$(bash -c '. "$1"; COMP_LINE="cairn key c"; COMP_POINT=${#COMP_LINE}; _cairn; echo "${COMPREPLY[*]}"' _ \
  "$root/usr/share/bash-completion/completions/cairn") || true
[[ $got == "create change-passphrase" || $got == "change-passphrase create" ]] ||
  fail "bash: 'cairn key c<TAB>' gave '$got'"
got=$(bash -c '. "$1"; COMP_LINE="cairn restore --jo"; COMP_POINT=${#COMP_LINE}; _cairn; echo "${COMPREPLY[*]}"' _ \
  "$root/usr/share/bash-completion/completions/cairn") || true
[[ $got == --jobs ]] || fail "bash: 'cairn restore --jo<TAB>' gave '$got', not '--jobs'"
if command -v zsh >/dev/null; then
  zsh -n "$root/usr/share/zsh/vendor-completions/_cairn" || fail "zsh cannot parse _cairn"
fi

# Units: verified as installed, except that ExecStart names the unpacked
# binary (systemd-analyze checks that it exists) and man finds the unpacked
# pages (it checks Documentation=man:...); --root would need a whole system
# there. scripts/package-test.sh verifies the installed units unchanged.
if command -v systemd-analyze >/dev/null; then
  units=$root/units
  mkdir -p "$units"
  for f in cairn.service cairn-backup@.service cairn-backup@.timer; do
    sed "s|/usr/bin/cairn|$root/usr/bin/cairn|g" "$root/lib/systemd/system/$f" >"$units/$f"
  done
  out=$(cd "$units" && MANPATH=$root/usr/share/man systemd-analyze verify \
    cairn.service cairn-backup@check.service cairn-backup@check.timer 2>&1) ||
    fail "systemd-analyze verify: $out"
  [[ -z $out ]] || fail "systemd-analyze verify: $out"
else
  fail "systemd-analyze is not installed (scripts/setup-deps.sh installs systemd)"
fi

if ((failures)); then
  echo "package-check: $failures failed ($deb)" >&2
  exit 1
fi
echo "package-check: $deb ok: $pages man pages, completion, units; Depends: $depends"
