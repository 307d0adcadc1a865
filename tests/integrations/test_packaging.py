"""Each adapter installs and imports on its own: it pulls in only its own framework."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {
    # package: (folder, distribution, its framework packages, modules it must never import)
    "metaclaw_langchain": (
        "langchain",
        "metaclaw-langchain",
        {"langchain", "langchain-core"},
        {"llama_index", "metaclaw_langgraph", "metaclaw_llamaindex"},
    ),
    "metaclaw_langgraph": (
        "langgraph",
        "metaclaw-langgraph",
        {"langgraph"},
        {"llama_index", "langchain", "metaclaw_langchain", "metaclaw_llamaindex"},
    ),
    "metaclaw_llamaindex": (
        "llamaindex",
        "metaclaw-llamaindex",
        {"llama-index-core"},
        {"langchain", "langchain_core", "langgraph", "metaclaw_langchain", "metaclaw_langgraph"},
    ),
}


@pytest.mark.parametrize("package", sorted(ADAPTERS))
def test_importing_an_adapter_imports_no_other_framework(package: str) -> None:
    forbidden = ADAPTERS[package][3]
    code = (
        f"import sys, {package}\n"
        "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(done.stdout.split())
    assert package in loaded
    assert not loaded & forbidden, f"{package} imported {sorted(loaded & forbidden)}"


@pytest.mark.parametrize("package", sorted(ADAPTERS))
def test_an_adapter_depends_only_on_metaclaw_core_and_its_framework(package: str) -> None:
    folder, distribution, framework, _ = ADAPTERS[package]
    project = tomllib.loads((ROOT / "integrations" / folder / "pyproject.toml").read_text())
    assert project["project"]["name"] == distribution
    names = {
        dep.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip()
        for dep in project["project"]["dependencies"]
    }
    assert names == {"metaclaw-core", *framework}
    assert (ROOT / "integrations" / folder / package / "py.typed").exists()


def test_requirements_dev_installs_every_adapter() -> None:
    lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    for folder, *_ in ADAPTERS.values():
        assert f"-e integrations/{folder}" in lines
