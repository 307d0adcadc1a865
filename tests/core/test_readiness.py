"""Calls made while the skill library is still loading: served without skills, and stamped
with the store's real generation (or, captured before it is known, a marker the RL buffer
keeps out of every query buffer), never with a generation the store has left behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.engine import DEGRADED_LIBRARY, GENERATION_UNKNOWN
from metaclaw_core.skills.library import LibraryState, SkillLibrary
from metaclaw_core.train.buffer import QueryBuffer
from tests.support.engines import SharedEmbedder, make_settings

# Without the snapshot cache (tests/core/test_snapshot_cache.py): a start with nothing to serve.
NO_CACHE: dict[str, Any] = {
    "retrieval__min_similarity": 0.0,
    "store__snapshot_cache_max_skills": 0,
}
ISO = Skill(
    name="iso-timestamps",
    description="Use when writing, logging or scheduling a date or time.",
    body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
)


def ctx(text: str) -> CallContext:
    return CallContext(session_id="s", messages=[Message(role="user", content=text)])


@pytest.fixture
def home_at_generation_1(make_engine: Any, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    engine = make_engine(make_settings(home, **NO_CACHE))
    engine.add_skills(ISO)
    engine.close()
    return home


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds every engine's first read of the skill library (the real one, on LanceDB) until
    the test sets it: the seconds a cold start spends importing and opening the store."""
    opened = threading.Event()
    real = SkillLibrary.state  # the one read every agent's snapshot is built from

    def held(self: SkillLibrary) -> LibraryState:
        opened.wait(30)
        return real(self)

    monkeypatch.setattr(SkillLibrary, "state", held)
    yield opened
    opened.set()


def test_a_call_captured_after_the_library_loaded_carries_the_stores_generation(
    home_at_generation_1: Path, gate: threading.Event, minilm: Any
) -> None:
    settings = make_settings(home_at_generation_1, **NO_CACHE)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        call = ctx("Log the design review at 9:30 tomorrow")
        early = engine.before_call(call)
        assert not engine.ready and not engine.library_loaded
        assert early.skills == [] and early.degraded == DEGRADED_LIBRARY
        assert early.generation == GENERATION_UNKNOWN
        assert early.query == "Log the design review at 9:30 tomorrow"  # still captured

        gate.set()  # the library loads while the LLM answers
        assert engine.wait_ready(30) and engine.ready
        tid = engine.after_call(call, "Logged 09:30.")
        # a call after the load gets the skills of generation 1
        later = engine.before_call(ctx("Log the design review at 9:30 tomorrow"))
        assert later.generation == 1 and later.skill_names == ["iso-timestamps"]
        assert later.degraded is None
        assert engine.flush(30)
        stored = engine.trajectories.get(tid or "")
    assert stored is not None
    assert stored.generation == 1  # the store's generation, not 0
    assert stored.injected_skills == []
    assert stored.metadata["degraded"] == DEGRADED_LIBRARY  # the trajectory says so
    assert stored.query == "Log the design review at 9:30 tomorrow"


def test_a_call_captured_before_the_library_loaded_is_marked_and_left_out_of_the_query_buffer(
    home_at_generation_1: Path, gate: threading.Event, minilm: Any
) -> None:
    settings = make_settings(home_at_generation_1, **NO_CACHE)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        c = ctx("Schedule the standup at 10:00")
        engine.before_call(c)
        unknown = engine.after_call(c, "Scheduled for 10:00.")  # both before the load
        gate.set()
        assert engine.wait_ready(30)
        c2 = ctx("Log when the review starts")
        engine.before_call(c2)
        served = engine.after_call(c2, "Logged 2026-12-01T09:30:00+00:00.")
        assert engine.flush(30)
        first = engine.trajectories.get(unknown or "")
        second = engine.trajectories.get(served or "")
        buffer = QueryBuffer(engine.store, lambda: engine.generation)
        sizes = buffer.sizes()
        query_ids = {t.id for t in buffer.take(10)}
    assert first is not None and second is not None
    assert first.generation == GENERATION_UNKNOWN
    assert first.metadata["degraded"] == DEGRADED_LIBRARY
    assert second.generation == 1 and second.injected_skills == ["iso-timestamps"]
    assert "degraded" not in second.metadata
    # generation 1's query buffer holds the call served with generation 1's skills only; the
    # unmarked-generation call stays in the store as support data for the evolver
    assert sizes.generation == 1 and sizes.query == 1 and sizes.support == 1
    assert query_ids == {second.id}


def test_a_library_that_cannot_be_read_keeps_the_engine_not_ready_and_says_why(
    minilm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SkillLibrary) -> LibraryState:
        raise OSError("the store's disk is gone")

    monkeypatch.setattr(SkillLibrary, "state", broken)
    settings = make_settings(tmp_path / "h", **NO_CACHE)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.wait_ready(30) is True  # the first attempt is over: it failed
        assert not engine.ready and not engine.library_loaded
        assert "disk is gone" in (engine.library_error or "")
        inj = engine.before_call(ctx("Log the review at 9:30"))
        assert inj.degraded == DEGRADED_LIBRARY and inj.generation == GENERATION_UNKNOWN
        assert engine.status()["ready"] is False
