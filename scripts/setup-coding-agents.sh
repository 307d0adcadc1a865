#!/usr/bin/env bash
# Install the real coding-agent clients for tests/clients: Claude Code and the Codex CLI, from
# npm, into .cache/coding-agents (or $METACLAW_CODING_AGENTS_CACHE). Both run on the machine's
# Node (20 is enough); each brings its native binary as an optional npm dependency. Pinned:
# both ship often. Idempotent: with the same versions already there it does nothing. Prints
# CLAUDE= and CODEX= lines for the caller.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
CACHE="${METACLAW_CODING_AGENTS_CACHE:-.cache/coding-agents}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"  # absolute from here on
claude="$CACHE/app/node_modules/.bin/claude"
codex="$CACHE/app/node_modules/.bin/codex"
want="@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION"
stamp="$CACHE/.installed"

exec 9>"$CACHE/.lock"
command -v flock >/dev/null && flock 9  # one installer at a time

if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  command -v npm >/dev/null || { echo "metaclaw: npm is needed to install Claude Code and Codex" >&2; exit 1; }
  echo "metaclaw: installing $want into $CACHE (about a minute)..." >&2
  rm -rf "$CACHE/app" "$stamp"
  npm install --prefix "$CACHE/app" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
  "$claude" --version < /dev/null >&2
  "$codex" --version < /dev/null >&2
  echo "$want" > "$stamp"
fi
echo "CLAUDE=$claude"
echo "CODEX=$codex"
