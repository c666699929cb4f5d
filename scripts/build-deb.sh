#!/bin/sh
# make deb: builds libnginx-mod-http-pty_<version>_<arch>.deb into
# build/deb/ with the Debian tools (dpkg-buildpackage, dh with
# dh-sequence-nginx from nginx-dev), from a copy of the repository's
# tracked files.  Nothing is done when the package is newer than every
# one of them.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/deb
cd "$root"

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg --print-architecture)
deb=$out/libnginx-mod-http-pty_${version}_${arch}.deb

if [ -d .git ] || [ -f .git ]; then
    files=$(git ls-files | grep -v -e '^src/web/' -e '^t/' -e '^docs/img/')
else
    files=$(find config ngx_pty_module.c src debian README.md docs \
        -path src/web -prune -o -type f -print)
fi

if [ -f "$deb" ]; then
    newer=$(echo "$files" | while read -r f; do
        [ "$f" -nt "$deb" ] && echo "$f"; done | head -1)
    if [ -z "$newer" ]; then
        echo "$deb is up to date"
        exit 0
    fi
fi

rm -rf "$out/src"
mkdir -p "$out/src"
echo "$files" | tar -cf - -T - | tar -xf - -C "$out/src"
cd "$out/src"
dpkg-buildpackage -us -uc -b > "$out/build.log" 2>&1 || {
    tail -40 "$out/build.log" >&2
    echo "dpkg-buildpackage failed (log: $out/build.log)" >&2
    exit 1
}
cd "$out"
rm -rf src
ls "$deb"
dpkg-deb -c "$deb" | awk '{print $NF}' | grep -e '\.so$' -e '\.conf$'
