#!/bin/sh
# Installs the Debian 12 packages that the build, the demo and the tests need.
# Only what is missing is installed, and only when run as root; otherwise the
# apt-get command to run is printed and the script fails.
#
#   install-deps.sh          what the build and the tests need
#   install-deps.sh demo     also npm, which fetches xterm.js for the demo page
#   install-deps.sh fuzz     also clang (libFuzzer) and dpkg-dev (apt-get
#                            source brings nginx's own sources), for make fuzz
set -eu

PKGS="make gcc perl nginx nginx-dev libvterm-dev libjansson-dev libpcre2-dev
      libsqlite3-dev libssl-dev zlib1g-dev
      libprotocol-websocket-perl libjson-validator-perl libjson-perl
      libjson-xs-perl python3 procps vim-tiny bsdutils bubblewrap sqlite3"

missing=""

if [ "${1:-}" = demo ] && ! command -v npm >/dev/null 2>&1; then
    missing="npm"
fi

if [ "${1:-}" = fuzz ]; then
    PKGS="$PKGS clang dpkg-dev"
fi

for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "missing packages:$missing" >&2
    echo "install them with:  sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
