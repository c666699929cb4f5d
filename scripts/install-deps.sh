#!/bin/sh
# Installs the Debian 12 packages that the build, the demo and the tests need.
# Only what is missing is installed, and only when run as root; otherwise the
# apt-get command to run is printed and the script fails.
#
#   install-deps.sh          what the build and the tests need, and the npm
#                            packages of t/mcp (the MCP SDK, npm ci); make
#                            xterm brings @xterm/headless for the
#                            differential test
#   install-deps.sh web      the same; make web then installs the client
#                            library's dependencies (xterm.js for the demo)
#   install-deps.sh test     also chromium (the browser tests drive Debian's
#                            chromium with playwright-core) and what make
#                            deb needs (t/77-deb.t)
#   install-deps.sh deb      also what make deb builds the package with
#   install-deps.sh fuzz     also clang (libFuzzer) and dpkg-dev (apt-get
#                            source brings nginx's own sources), for make fuzz
set -eu

PKGS="make gcc perl nginx nginx-dev libvterm-dev libjansson-dev libpcre2-dev
      libsqlite3-dev libssl-dev zlib1g-dev
      libprotocol-websocket-perl libjson-validator-perl libjson-perl
      libjson-xs-perl python3 procps vim-tiny bsdutils bubblewrap"

missing=""

# node and npm, by command: the MCP tests' client (the official SDK,
# t/mcp), the differential test's xterm.js, the client library and the
# demo's; any node >= 18 with its npm will do (Debian's, or one already
# there: installing Debian's npm over another node would clash)
if ! command -v node >/dev/null 2>&1; then
    missing="nodejs"
fi

if ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi

case "${1:-}" in
test) PKGS="$PKGS chromium dpkg-dev debhelper fakeroot" ;;
deb)  PKGS="$PKGS dpkg-dev debhelper fakeroot" ;;
esac

if [ "${1:-}" = fuzz ]; then
    PKGS="$PKGS clang dpkg-dev"
fi

for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done

# the npm packages the tests use, as locked in t/mcp/package-lock.json
npm_deps() {
    dir=$(cd "$(dirname "$0")/.." && pwd)/t/mcp
    [ -d "$dir/node_modules/@modelcontextprotocol/sdk" ] && return 0
    echo "installing the npm packages of t/mcp"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

if [ -z "$missing" ]; then
    npm_deps
    exit 0
fi

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

npm_deps
