#!/bin/sh
# Configures a private copy of an nginx source tree with this module added as
# a dynamic module.  Debian's nginx-dev tree carries the exact configure flags
# of the packaged nginx in conf_flags; any other tree gets --with-compat plus
# $NGINX_CONFIGURE_FLAGS.
set -eu
src=$1 tree=$2 addon=$3 cc_opt=$4 ld_opt=$5

if [ ! -x "$src/configure" ] && [ ! -x "$src/auto/configure" ]; then
    echo "no nginx source tree at $src: install nginx-dev (make deps) or set NGINX_SRC" >&2
    exit 1
fi

rm -rf "$tree"
mkdir -p "$(dirname "$tree")"
cp -a "$src" "$tree"
cd "$tree"
[ -x configure ] || ln -s auto/configure configure

if [ -f conf_flags ]; then
    # conf_flags is a bash array assignment: NGX_CONF_FLAGS=( ... )
    flags=$(bash -c '. ./conf_flags; printf "%s\n" "${NGX_CONF_FLAGS[@]}"')
else
    flags="--with-compat ${NGINX_CONFIGURE_FLAGS:-}"
fi

# shellcheck disable=SC2086
echo "$flags" | tr '\n' ' ' | xargs ./configure \
    --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" \
    --add-dynamic-module="$addon" > configure.log 2>&1 || {
    cat configure.log >&2
    exit 1
}
echo "configured nginx in $tree (log: $tree/configure.log)"
