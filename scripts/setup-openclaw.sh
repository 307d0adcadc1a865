#!/usr/bin/env bash
# Install Node 24 and openclaw for the OpenClaw end-to-end test, into .cache/openclaw (or
# $METACLAW_OPENCLAW_CACHE). Node comes from the npm registry as the official binary
# (package node-linux-<arch>), so only npm (any version) must already be on the machine.
# Idempotent: with the same versions already there it does nothing. Prints NODE_BIN= and
# OPENCLAW= lines for the caller.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_VERSION=24.22.3
OPENCLAW_VERSION=2026.9.6
CACHE="${METACLAW_OPENCLAW_CACHE:-.cache/openclaw}"
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "metaclaw: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
esac
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"  # absolute from here on
node_bin="$CACHE/node/node_modules/node-linux-$arch/bin"
openclaw="$CACHE/app/node_modules/.bin/openclaw"
want="node-linux-$arch@$NODE_VERSION openclaw@$OPENCLAW_VERSION"
stamp="$CACHE/.installed"

exec 9>"$CACHE/.lock"
command -v flock >/dev/null && flock 9  # one installer at a time

if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  command -v npm >/dev/null || { echo "metaclaw: npm is needed to install Node 24 and openclaw" >&2; exit 1; }
  echo "metaclaw: installing $want into $CACHE (about a minute)..." >&2
  rm -rf "$CACHE/node" "$CACHE/app" "$stamp"
  npm install --prefix "$CACHE/node" --no-audit --no-fund --loglevel=error \
    "node-linux-$arch@$NODE_VERSION" >&2
  # openclaw's own install steps run under Node 24 (it refuses older ones).
  PATH="$node_bin:$PATH" npm install --prefix "$CACHE/app" --no-audit --no-fund \
    --loglevel=error "openclaw@$OPENCLAW_VERSION" >&2
  PATH="$node_bin:$PATH" "$openclaw" --version >&2
  echo "$want" > "$stamp"
fi
echo "NODE_BIN=$node_bin"
echo "OPENCLAW=$openclaw"
