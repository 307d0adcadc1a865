"""One direction of dependency: a module of metaclaw_core imports only its own floor and below.

The floors, bottom to top (the picture is in docs/architecture.md; this table is the rule):

0. foundation: errors, settings, the lazy-export helper, the fault log;
1. the domain models;
2. contracts: the hook specifications and the value types the hooks carry;
3. core services: redaction, the store, the skill library, capture, embeddings, the LLM
   client, the OpenAI wire format, the plugin manager;
4. the engine;
5. the built-in plugins and the loops: evolve, reward, train, schedule;
6. surfaces: the service, the CLIs, the bench, the demo, the package's public face.

Every import counts: module level, inside functions, and under ``TYPE_CHECKING`` (a type-only
import is still a dependency a reader must follow). Built-in plugins are found by module name
(``plugin_manager.BUILTIN_MODULES``), so the engine never names the floor above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import metaclaw_core

FOUNDATION, MODELS, CONTRACTS, SERVICES, ENGINE, LOOPS, SURFACES = range(7)

# module (or package: applies to everything under it unless a longer entry says otherwise)
LAYERS: dict[str, int] = {
    "metaclaw_core": SURFACES,  # the public face re-exports the engine
    "metaclaw_core.errors": FOUNDATION,
    "metaclaw_core.config": FOUNDATION,
    "metaclaw_core.lazy": FOUNDATION,
    "metaclaw_core.faults": FOUNDATION,
    "metaclaw_core.agents": FOUNDATION,
    "metaclaw_core.scoring": FOUNDATION,
    "metaclaw_core.hosts": FOUNDATION,
    "metaclaw_core.models": MODELS,
    "metaclaw_core.messages": MODELS,
    "metaclaw_core.hookspecs": CONTRACTS,
    "metaclaw_core.vectors": CONTRACTS,
    "metaclaw_core.skills.verdict": CONTRACTS,
    "metaclaw_core.skills.index": CONTRACTS,
    "metaclaw_core.skills.vetting": CONTRACTS,
    "metaclaw_core.evolve.report": CONTRACTS,
    "metaclaw_core.schedule.signals": CONTRACTS,
    "metaclaw_core.train.backend": CONTRACTS,
    "metaclaw_core.train.tokenize": CONTRACTS,
    "metaclaw_core.redaction": SERVICES,
    "metaclaw_core.store": SERVICES,
    "metaclaw_core.skills": SERVICES,
    "metaclaw_core.capture": SERVICES,
    "metaclaw_core.embeddings": SERVICES,
    "metaclaw_core.bert_numpy": SERVICES,
    "metaclaw_core.bert_onnx": SERVICES,
    "metaclaw_core.llm": SERVICES,
    "metaclaw_core.wire": SERVICES,
    "metaclaw_core.plugin_manager": SERVICES,
    "metaclaw_core.engine": ENGINE,
    "metaclaw_core.call": ENGINE,
    "metaclaw_core.holdout": ENGINE,
    "metaclaw_core.plugins": LOOPS,
    "metaclaw_core.evolve": LOOPS,
    "metaclaw_core.reward": LOOPS,
    "metaclaw_core.train": LOOPS,
    "metaclaw_core.schedule": LOOPS,
    "metaclaw_core.service": SURFACES,
    "metaclaw_core.cli": SURFACES,
    "metaclaw_core.cli_support": SURFACES,
    "metaclaw_core.status": SURFACES,
    "metaclaw_core.demo": SURFACES,
    "metaclaw_core.bench": SURFACES,
    "metaclaw_core.evolve.cli": SURFACES,
    "metaclaw_core.train.cli": SURFACES,
}

# Upward imports not removed yet, each with the reason; the list may only shrink.
KNOWN_UPWARD: set[tuple[str, str]] = set()

ROOT = Path(metaclaw_core.__file__).parent


def layer_of(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        floor = LAYERS.get(".".join(parts[:n]))
        if floor is not None:
            return floor
    raise KeyError(module)


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    base = ROOT.parent / name.replace(".", "/")
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports_of(path: Path) -> set[str]:
    """Every metaclaw_core module ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "metaclaw_core"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import (write the absolute module)")
            if not node.module or node.module.split(".")[0] != "metaclaw_core":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                # `from pkg import submodule` depends on the submodule, not on pkg's __init__
                found.add(sub if is_module(sub) else node.module)
    return found


def upward_imports() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for path in sorted(ROOT.rglob("*.py")):
        mod = module_name(path)
        for dep in imports_of(path):
            if dep != mod and layer_of(dep) > layer_of(mod):
                out.add((mod, dep))
    return out


def test_every_module_has_a_floor() -> None:
    for path in ROOT.rglob("*.py"):
        layer_of(module_name(path))  # KeyError names a module the table forgot


def test_no_upward_import() -> None:
    found = upward_imports()
    new = sorted(found - KNOWN_UPWARD)
    assert not new, "upward imports (a lower floor imports a higher one):\n" + "\n".join(
        f"  {a} (floor {layer_of(a)}) imports {b} (floor {layer_of(b)})" for a, b in new
    )
    gone = sorted(KNOWN_UPWARD - found)
    assert not gone, f"fixed, so remove from KNOWN_UPWARD: {gone}"


@pytest.mark.parametrize(
    "source",
    [
        "from metaclaw_core.engine import MetaClaw",
        "import metaclaw_core.engine",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from metaclaw_core import engine",
        "def f():\n    from metaclaw_core.engine import MetaClaw\n    return MetaClaw",
    ],
)
def test_the_check_sees_every_kind_of_import(tmp_path: Path, source: str) -> None:
    src = tmp_path / "m.py"
    src.write_text(source)
    deps = imports_of(src)
    assert "metaclaw_core.engine" in deps
    assert layer_of("metaclaw_core.engine") > layer_of("metaclaw_core.models")


ADAPTERS = ("metaclaw_langchain", "metaclaw_langgraph", "metaclaw_llamaindex")
# The core distribution importing its own adapters (which depend on it): none. The bench's
# LangChain agent lives with the adapter and is found through an entry point.
KNOWN_ADAPTER_IMPORTS: set[tuple[str, str]] = set()


def test_the_core_imports_no_adapter() -> None:
    found: set[tuple[str, str]] = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found |= {(module_name(path), n.split(".")[0]) for n in names if n.startswith(ADAPTERS)}
    assert found == KNOWN_ADAPTER_IMPORTS


def test_the_bench_finds_its_langchain_agent_through_the_adapters_entry_point() -> None:
    from metaclaw_core.bench.agent import agent_factory

    assert agent_factory("langchain").__module__ == "metaclaw_langchain.bench_agent"
    with pytest.raises(RuntimeError, match="no benchmark agent 'nope' is installed"):
        agent_factory("nope")
