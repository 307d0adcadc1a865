#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Node 24 + openclaw for the OpenClaw end-to-end test (cached in .cache/openclaw); in CI a
# failed install fails the run instead of skipping that test.
bash scripts/setup-openclaw.sh >/dev/null
if [ "${CI:-}" = "true" ]; then export METACLAW_REQUIRE_OPENCLAW=1; fi
# Claude Code + Codex CLI for tests/clients (cached in .cache/coding-agents); in CI a failed
# install fails the run, elsewhere those tests skip and say why.
bash scripts/setup-coding-agents.sh >/dev/null || [ "${CI:-}" != "true" ]
if [ "${CI:-}" = "true" ]; then export METACLAW_REQUIRE_CODING_AGENTS=1; fi
# Debian chromium + playwright-core (.cache/browser) for the dashboard's browser tests; in CI
# a failed install fails the run, elsewhere those tests skip and say why.
bash scripts/setup-browser.sh >/dev/null || [ "${CI:-}" != "true" ]
if [ "${CI:-}" = "true" ]; then export METACLAW_REQUIRE_BROWSER=1; fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy metaclaw_core
# the integration packages too (each is its own distribution; MYPYPATH finds them)
MYPYPATH=integrations/langchain:integrations/langgraph:integrations/llamaindex \
    .venv/bin/mypy -p metaclaw_langchain -p metaclaw_langgraph -p metaclaw_llamaindex
.venv/bin/python -m pytest -q "$@"
