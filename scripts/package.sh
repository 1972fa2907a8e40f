#!/usr/bin/env bash
# Builds the Debian package: build/deb/cairn_VERSION_ARCH.deb.
#
# On a fresh Debian 12 machine, as root, from a clone: installs the build
# dependencies (scripts/setup-deps.sh), then runs dpkg-buildpackage with
# debian/ (debhelper 13), whose rules build the `cairn` target of the release
# tree (build/release) -- the tree scripts/test.sh builds and tests, so after
# the tests this only links nothing new, installs and packs -- and install
# it with `cmake --install` (packaging/install.cmake): the binary, man pages
# and bash/zsh completion generated from its command tree, the systemd units,
# sysusers.d and tmpfiles.d entries, docs and sample configs. Depends come
# from the shared libraries actually linked (dpkg-shlibdeps). Then lintian,
# when installed (--lintian installs it first).
#
#   bash scripts/package.sh             build the .deb (and lintian if present)
#   bash scripts/package.sh --lintian   install lintian if missing and run it
#   bash scripts/package.sh --no-deps   skip setup-deps.sh (CI has run it)
#   then: apt install ./build/deb/cairn_*.deb
#
# docs/PACKAGING.md has what the package holds, the lintian result and
# scripts/package-test.sh (the package installed in a fresh Debian chroot).
set -euo pipefail
cd "$(dirname "$0")/.."

deps=1
lintian=auto
for arg in "$@"; do
  case $arg in
    --no-deps) deps=0 ;;
    --lintian) lintian=yes ;;
    --no-lintian) lintian=no ;;
    *) echo "usage: $0 [--no-deps] [--lintian|--no-lintian]" >&2; exit 2 ;;
  esac
done
((deps)) && bash scripts/setup-deps.sh

# One version everywhere: the changelog, CMake's project() and kVersion.
version=$(dpkg-parsechangelog -S Version)
cmake_version=$(sed -nE 's/^project\(cairn VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
cli_version=$(sed -nE 's/.*kVersion\[\] = "([^"]+)".*/\1/p' src/cli/cli_util.h)
if [[ $version != "$cmake_version" || $version != "$cli_version" ]]; then
  echo "package.sh: versions differ: debian/changelog $version, CMakeLists.txt $cmake_version," \
    "src/cli/cli_util.h $cli_version" >&2
  exit 1
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
out=build/deb
mkdir -p "$out"
rm -f "$out"/cairn_*
started=$SECONDS
dpkg-buildpackage -b -us -uc \
  --buildinfo-option="-u$out" --changes-option="-u$out" \
  --buildinfo-file="$out/cairn_${version}_${arch}.buildinfo" \
  --changes-file="$out/cairn_${version}_${arch}.changes"
deb=$out/cairn_${version}_${arch}.deb
echo "package.sh: built $deb in $((SECONDS - started)) s"
dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends Recommends

if [[ $lintian == yes ]] && ! command -v lintian >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null
fi
if [[ $lintian != no ]] && command -v lintian >/dev/null; then
  echo "package.sh: lintian (E errors, W warnings, I info; overrides explained in debian/cairn.lintian-overrides):"
  lintian --info --display-info --fail-on error,warning "$deb"
  echo "package.sh: lintian: no error or warning"
fi
