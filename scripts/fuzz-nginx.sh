#!/bin/sh
# Builds the nginx core the fuzz harnesses link: Debian's nginx source
# package (the upstream tarball of the installed nginx-dev's version),
# configured with this module added statically and compiled by clang with
# the sanitizers and libFuzzer's coverage instrumentation.  The result is
# $dir/nginx-src/objs; see docs/FUZZING.md.
#
#   fuzz-nginx.sh DIR ADDON_DIR CC_OPT
set -eu
dir=$1 addon=$2 cc_opt=$3

ver=$(dpkg-query -W -f='${source:Upstream-Version}' nginx-dev 2>/dev/null) || {
    echo "nginx-dev is not installed (make deps)" >&2
    exit 1
}
tarball="$dir/nginx_$ver.orig.tar.gz"

mkdir -p "$dir"

if [ ! -f "$tarball" ]; then
    if [ -z "$(apt-cache showsrc nginx 2>/dev/null)" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "no deb-src entry for Debian's nginx source package: add one" >&2
            echo "(Types: deb-src) and run apt-get update, or run as root" >&2
            exit 1
        fi
        # the binary entries' mirrors, for sources too
        sed -n 's/^Types: deb$/Types: deb-src/p; /^URIs:/p; /^Suites:/p;
                /^Components:/p; /^Signed-By:/p; /^$/p' \
            /etc/apt/sources.list.d/debian.sources \
            > /etc/apt/sources.list.d/ngx-pty-fuzz-src.sources
        apt-get update -qq
    fi
    # every Debian revision of this version has the same upstream tarball;
    # a revision whose .dsc a mirror lacks still brings it
    (cd "$dir" && apt-get source --download-only -qq "nginx" >/dev/null 2>&1) \
        || true
    if [ ! -f "$tarball" ]; then
        for v in $(apt-cache showsrc nginx | sed -n 's/^Version: //p'); do
            (cd "$dir" && apt-get source --download-only -qq "nginx=$v" \
                >/dev/null 2>&1) || true
            [ -f "$tarball" ] && break
        done
    fi
    [ -f "$tarball" ] || { echo "could not fetch $tarball" >&2; exit 1; }
fi

tree="$dir/nginx-src"

# configured already with these flags and the module's file list (its
# config): the changed sources only
key="$cc_opt $(cksum < "$addon/config")"

if [ -f "$tree/objs/Makefile" ] && [ "$(cat "$tree/.cc_opt" 2>/dev/null)" = "$key" ]
then
    make -C "$tree" -f objs/Makefile > "$tree/make.log" 2>&1 || {
        tail -50 "$tree/make.log" >&2
        exit 1
    }
    exit 0
fi

rm -rf "$tree"
mkdir -p "$tree"
tar -xzf "$tarball" -C "$tree" --strip-components=1

cd "$tree"
echo "$key" > .cc_opt
./configure --with-cc=clang --with-cc-opt="$cc_opt" \
    --with-ld-opt="-fsanitize=address,undefined" \
    --with-pcre --without-http_gzip_module \
    --add-module="$addon" > configure.log 2>&1 || {
    cat configure.log >&2
    exit 1
}
make -f objs/Makefile > make.log 2>&1 || {
    tail -50 make.log >&2
    exit 1
}
echo "built the fuzzing nginx core in $tree"
