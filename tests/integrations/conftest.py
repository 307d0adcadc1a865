"""Fixtures for the adapter tests: one real engine per module, seeded skills, broken engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import MetaClaw, Skill, hookimpl
from metaclaw_core.embeddings import LoadedEmbedder
from tests.support.engines import SharedEmbedder, make_settings

SEED_SKILLS = [
    Skill(
        name="arithmetic-with-tools",
        description="When asked to add or sum numbers, use the calculator tool",
        body="Always call the add tool for a sum instead of doing arithmetic in your head.",
    ),
    Skill(
        name="weather-both-units",
        description="When reporting the weather or temperatures",
        body="Give temperatures in Celsius and Fahrenheit.",
    ),
    Skill(
        name="cite-documents",
        description="When answering a question from documents, cite the source document",
        body="Name the document each fact came from.",
    ),
]
ARITHMETIC_TASK = "What is 2 plus 3? Add the numbers for me."
BLOCK_START = "<metaclaw-skills>"


def new_engine(minilm: LoadedEmbedder, home: Path, plugins: list[Any]) -> MetaClaw:
    engine = MetaClaw(make_settings(home), plugins=[SharedEmbedder(minilm), *plugins])
    assert engine.wait_ready(60)
    return engine


@pytest.fixture(scope="module")
def engine(minilm: LoadedEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetaClaw]:
    """One real engine (embedded LanceDB, real MiniLM) per test module, with skills seeded."""
    engine = new_engine(minilm, tmp_path_factory.mktemp("home"), [])
    engine.add_skills(SEED_SKILLS)
    yield engine
    engine.close()


class ExplodingPlugin:
    """A plugin whose hot-path hooks raise (query extraction and trajectory preparation)."""

    @hookimpl(tryfirst=True)
    def metaclaw_extract_query(self, ctx: Any, settings: Any) -> str | None:
        raise RuntimeError("query plugin exploded")

    @hookimpl
    def metaclaw_prepare_trajectory(self, trajectory: Any, settings: Any) -> None:
        raise RuntimeError("redaction plugin exploded")


@pytest.fixture(scope="module")
def exploding_engine(
    minilm: LoadedEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetaClaw]:
    engine = new_engine(minilm, tmp_path_factory.mktemp("boom"), [ExplodingPlugin()])
    engine.add_skills(SEED_SKILLS)
    yield engine
    engine.close()


class BrokenEngine:
    """Stands in for an engine whose every attribute access fails."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"broken engine: {name}")


@pytest.fixture(params=["plugin raises", "broken engine"])
def failing_engine(request: pytest.FixtureRequest, exploding_engine: MetaClaw) -> Any:
    """Each way an engine can fail: a plugin whose hooks raise, or a broken engine object."""
    return exploding_engine if request.param == "plugin raises" else BrokenEngine()


def trajectories_of(engine: MetaClaw, session_id: str) -> list[Any]:
    """The session's trajectories in full, oldest first."""
    assert engine.flush(30)
    listed = engine.trajectories.recent(100, session_id=session_id)
    return [engine.trajectories.get(t.id) for t in sorted(listed, key=lambda t: t.created_at)]
