#!/usr/bin/env bash
# Install what the dashboard's browser tests need: Debian's chromium (/usr/bin/chromium, via
# apt-get when missing; needs root) and playwright-core, pinned, into .cache/browser (or
# $METACLAW_BROWSER_CACHE). playwright-core never downloads a browser of its own: the tests
# launch /usr/bin/chromium. Idempotent: with both already there it does nothing. Prints
# CHROMIUM= and PLAYWRIGHT_CORE= lines for the caller.
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYWRIGHT_VERSION=1.64.1
CHROMIUM=/usr/bin/chromium
CACHE="${METACLAW_BROWSER_CACHE:-.cache/browser}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"  # absolute from here on
want="playwright-core@$PLAYWRIGHT_VERSION"
stamp="$CACHE/.installed"

exec 9>"$CACHE/.lock"
command -v flock >/dev/null && flock 9  # one installer at a time

if [ ! -x "$CHROMIUM" ]; then
  command -v apt-get >/dev/null || { echo "metaclaw: $CHROMIUM is missing and there is no apt-get to install it" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "metaclaw: installing chromium needs root (apt-get install chromium)" >&2; exit 1; }
  echo "metaclaw: installing Debian chromium (about a minute)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  "$CHROMIUM" --version >&2
fi

if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  command -v npm >/dev/null || { echo "metaclaw: npm is needed to install playwright-core" >&2; exit 1; }
  echo "metaclaw: installing $want into $CACHE..." >&2
  rm -rf "$CACHE/node_modules" "$CACHE/package.json" "$CACHE/package-lock.json" "$stamp"
  npm install --prefix "$CACHE" --no-audit --no-fund --loglevel=error "$want" >&2
  echo "$want" > "$stamp"
fi
echo "CHROMIUM=$CHROMIUM"
echo "PLAYWRIGHT_CORE=$CACHE/node_modules/playwright-core"
