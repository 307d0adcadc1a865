#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy metaclaw_core
.venv/bin/python -m pytest -q "$@"
