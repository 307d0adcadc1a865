"""The conventions every `metaclaw` sub-command shares: JSON output, one-line errors, engines.

Its own module so the sub-apps (evolve/, train/) can use them without importing
:mod:`metaclaw_core.cli`, which imports them.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from metaclaw_core.errors import MetaClawError
from metaclaw_core.models import Generation, Skill

if TYPE_CHECKING:  # `metaclaw --help` must not pay for the engine's imports
    from metaclaw_core.engine import MetaClaw

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (stable).")]
AgentOpt = Annotated[
    str | None,
    typer.Option("--agent", help="The agent whose records to use (default: agents.default)."),
]


def read_only_engine(*, embedder: bool = False) -> MetaClaw:
    """An engine for a command: no capture; the embedder loads only if the command needs it."""
    from metaclaw_core.config import Settings
    from metaclaw_core.engine import MetaClaw

    settings = Settings()
    settings.embedding.preload = embedder
    return MetaClaw(settings, capture=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def fail(message: str, code: int = 1) -> None:
    # Plain write: rich would wrap a long path across lines.
    sys.stderr.write(f"error: {message.removeprefix('metaclaw: ')}\n")
    raise typer.Exit(code)


def skill_json(s: Skill) -> dict[str, Any]:
    return s.model_dump(mode="json")


def generation_json(g: Generation) -> dict[str, Any]:
    return g.model_dump(mode="json")


class Guard:
    """Turn metaclaw errors into a one-line message and exit status 1."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> Literal[False]:
        if isinstance(exc, MetaClawError):
            fail(str(exc))
        return False
