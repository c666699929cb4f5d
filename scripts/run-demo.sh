#!/bin/sh
# Starts the demo nginx in the foreground: conf/demo.conf on 127.0.0.1:PORT
# with its prefix under demo/ (ignored by git).
set -eu
nginx_bin=$1 port=$2
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$root/demo

mkdir -p "$prefix/logs" "$prefix/tmp" "$prefix/conf" "$prefix/archive"

# the archive's directory: the workers' user (nobody, when started as
# root) makes the file's journal beside it
if [ "$(id -u)" = 0 ]; then
    chown nobody "$prefix/archive"
fi
chmod 0700 "$prefix/archive"

# the page imports the client library and xterm.js from src/web (make web)
if [ ! -f "$root/src/web/node_modules/@xterm/xterm/lib/xterm.mjs" ]; then
    echo "xterm.js is not installed: run make web (npm ci in src/web)" >&2
    exit 1
fi
# a uid per session needs root; otherwise programs run as whoever runs this
# (with that user's HOME).  A uid of the range has no home: each session
# gets a private, writable one, a tmpfs of its own in a sandbox, where
# node, python3 and shells keep their history
if [ "$(id -u)" = 0 ]; then
    users="pty_user_range 3100000 3165535;"
    if [ -x /usr/bin/bwrap ]; then
        users="$users
    pty_env HOME=/tmp;
    pty_sandbox /usr/bin/env --ignore-signal=INT,QUIT,TSTP
                /usr/bin/bwrap --unshare-pid --unshare-ipc --unshare-uts
                --die-with-parent --ro-bind / / --proc /proc
                --dev /dev --tmpfs /tmp --chdir /tmp --
                /usr/bin/env --default-signal=INT,QUIT,TSTP;"
    fi
else
    users="# pty_user_range: only when nginx starts as root"
fi

# the demo's one token: nginx itself checks it (conf/demo.conf)
token=$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')

USERS=$users perl -pe "s|%%MODULE%%|$root/build/ngx_pty_module.so|;
    s|%%TOKEN%%|$token|; s|%%USERS%%|\$ENV{USERS}|; s|%%PREFIX%%|$prefix|g;
    s|%%PORT%%|$port|g; s|%%ROOT%%|$root|g" \
    "$root/conf/demo.conf" > "$prefix/conf/nginx.conf"

"$nginx_bin" -t -q -p "$prefix" -c "$prefix/conf/nginx.conf" -e "$prefix/logs/error.log"

cat <<MSG
ngx_pty_module demo (Ctrl-C stops it; logs in demo/logs, audit.log too)

Open the browser terminal (the token is in the fragment, never sent in a URL):
  http://127.0.0.1:$port/#token=$token

Every call needs the token:
  T='Authorization: Bearer $token'
Start a session through the agent API (the answer names it, "id": "pty-N"):
  curl -s -H "\$T" -X POST http://127.0.0.1:$port/pty/start -d '{"command":"bash"}'
List sessions:
  curl -s -H "\$T" -X POST http://127.0.0.1:$port/pty/list
Attach with any WebSocket client, subprotocol pty-ws.v1 and the same
Authorization header, at the "attach_path" the start call returned, e.g.
  ws://127.0.0.1:$port/agents/demo/sessions/<session_id>/attach
then send {"op":"pty.join_session","id":"...","extensions":["https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"],"payload":{"role":"controller"}}
Type into it and wait for the prompt (pty-N as start answered):
  curl -s -H "\$T" -X POST http://127.0.0.1:$port/pty/write -d '{"id":"pty-N","input":"echo hi","submit":true,"wait_for":"$ "}'
The AgentCard:
  curl -s http://127.0.0.1:$port/.well-known/agent-card.json
Stop a session:
  curl -s -H "\$T" -X POST http://127.0.0.1:$port/pty/kill -d '{"id":"pty-N"}'
The same tools for MCP clients (Streamable HTTP, docs/MCP.md), with the
same token (Authorization: Bearer):
  http://127.0.0.1:$port/mcp
MSG

exec "$nginx_bin" -p "$prefix" -c "$prefix/conf/nginx.conf" -e "$prefix/logs/error.log"
