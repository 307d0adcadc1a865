"""The third-party plugin in docs/plugins.md uses only exported names, and works."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from metaclaw_core import MetaClaw, Skill

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return next(b for b in blocks if "class CloseCallReview" in b)


def test_the_example_imports_only_the_package_root() -> None:
    tree = ast.parse(_example())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module == "metaclaw_core", node.module
        assert not isinstance(node, ast.Import)


def test_the_example_plugin_registers_and_holds_a_close_call(
    make_engine: Any, settings: Any
) -> None:
    code = _example().split("engine = MetaClaw(")[0]  # the host builds its own engine
    scope: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), scope)
    plugin = scope["CloseCallReview"](threshold=0.8)
    engine: MetaClaw = make_engine(settings, plugins=[plugin])
    live = Skill(
        name="iso-timestamps",
        description="Writing dates and times",
        body="Write timestamps as ISO 8601 with a time zone.",
    )
    twin = Skill(
        name="iso-dates",
        description="Writing dates and times",
        body="Write timestamps as ISO 8601 with a time zone offset.",
    )
    findings = engine.vet(twin, [live])
    ours = [f for f in findings if f.check == "close-call"]
    assert ours and ours[0].outcome == "quarantine" and "iso-timestamps" in ours[0].reason
    assert not [f for f in engine.vet(twin, []) if f.check == "close-call"]
