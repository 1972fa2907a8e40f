#!/usr/bin/env bash
# Installs everything cairn needs to build and test, from Debian 12's
# packages. Run as root (or with sudo). Safe to run again.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config git
  libssl-dev libboost-dev libargon2-dev libqrencode-dev libzstd-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libcurl4-openssl-dev
  # ISA-L: CRC32C (format/crc32c.cc).
  libisal-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  fuse3 libfuse3-dev
  libnbd-bin qemu-utils
  python3 zstd ccache
  # The parser that checks cairn serve's /metrics in the tests (the Python
  # client's: 200 KB, where promtool's package is 96 MB with a web UI).
  python3-prometheus-client
  # The client config file (toml++) and sd_notify (libsystemd).
  libtomlplusplus-dev libsystemd-dev
  # The Debian package (scripts/package.sh) and its checks in CI
  # (scripts/package-check.sh: man, systemd-analyze, bash, zsh).
  debhelper dpkg-dev man-db systemd zsh
  # The web dashboard's browser test (tests/browser/dashboard_test.py):
  # headless Chromium driven through chromedriver by Selenium.
  chromium chromium-driver python3-selenium
)
# Fuzzing and sanitizer runtimes (clang's libFuzzer), only when asked.
if [[ "${CAIRN_WITH_FUZZ:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev libfuzzer-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cairn: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
