"""A restart serves the cached snapshot at once; the store's first read replaces it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.config import HUB_MINILM
from metaclaw_core.skills.index import SkillSnapshot
from metaclaw_core.skills.library import LibraryState, SkillLibrary
from metaclaw_core.skills.snapshot_cache import cache_path, load_snapshot, save_snapshot
from tests.support.engines import SharedEmbedder, make_settings

ISO = Skill(
    name="iso-timestamps",
    description="Use when writing, logging or scheduling a date or time.",
    body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
)


def ask(engine: MetaClaw) -> Any:
    return engine.before_call(
        CallContext(messages=[Message(role="user", content="Log the design review at 9:30")])
    )


def wait_for(cond: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.fixture
def home(make_engine: Any, tmp_path: Path) -> Path:
    h = tmp_path / "home"
    engine = make_engine(make_settings(h, retrieval__min_similarity=0.0))
    engine.add_skills(ISO)
    engine.close()
    return h


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds the first read of the (real) skill library until the test sets it."""
    opened = threading.Event()
    real = SkillLibrary.state  # the one read every agent's snapshot is built from

    def held(self: SkillLibrary) -> LibraryState:
        opened.wait(30)
        return real(self)

    monkeypatch.setattr(SkillLibrary, "state", held)
    yield opened
    opened.set()


def test_a_restart_serves_the_cached_skills_before_the_store_is_read(
    home: Path, gate: threading.Event, minilm: Any
) -> None:
    settings = make_settings(home, retrieval__min_similarity=0.0)
    assert cache_path(home, settings.store_uri).is_file()  # written by the first engine
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        wait_for(lambda: engine.ready, "the cached snapshot was not served")
        assert engine.status()["snapshot_source"] == "cache"
        inj = ask(engine)
        assert inj.generation == 1 and inj.skill_names == ["iso-timestamps"]
        gate.set()
        wait_for(lambda: engine.status()["snapshot_source"] == "store", "no store read")
        assert ask(engine).skill_names == ["iso-timestamps"]


def test_the_stores_first_read_wins_over_a_cache_it_disagrees_with(
    home: Path, gate: threading.Event, minilm: Any
) -> None:
    settings = make_settings(home, retrieval__min_similarity=0.0)
    path = cache_path(home, settings.store_uri)
    stale = load_snapshot(path, store_uri=settings.store_uri, embedder_id=HUB_MINILM)
    assert stale is not None and stale.generation == 1
    # a cache from a store that was since replaced: a later generation number than the store's
    save_snapshot(
        path,
        SkillSnapshot(generation=7, records=stale.records, matrix=stale.matrix),
        store_uri=settings.store_uri,
        embedder_id=HUB_MINILM,
    )
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        wait_for(lambda: engine.ready, "the cached snapshot was not served")
        assert engine.generation == 7
        gate.set()
        wait_for(lambda: engine.status()["snapshot_source"] == "store", "no store read")
        assert engine.generation == 1


def test_a_cache_of_another_model_store_or_a_damaged_one_is_ignored(
    home: Path, minilm: Any
) -> None:
    settings = make_settings(home)
    path = cache_path(home, settings.store_uri)
    uri = settings.store_uri
    assert load_snapshot(path, store_uri=uri, embedder_id=HUB_MINILM) is not None
    assert load_snapshot(path, store_uri=uri, embedder_id="other/model") is None
    assert load_snapshot(path, store_uri="s3://elsewhere", embedder_id=HUB_MINILM) is None
    path.write_bytes(b"PK\x03\x04 not really a zip")
    assert load_snapshot(path, store_uri=uri, embedder_id=HUB_MINILM) is None
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:  # starts as without
        assert engine.wait_ready(30)
        assert engine.status()["snapshot_source"] == "store" and engine.generation == 1
    assert load_snapshot(path, store_uri=uri, embedder_id=HUB_MINILM) is not None  # rewritten


def test_no_cache_is_written_when_it_is_turned_off(make_engine: Any, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "h", store__snapshot_cache_max_skills=0)
    engine = make_engine(settings)
    engine.add_skills(ISO)
    assert not cache_path(settings.home, settings.store_uri).exists()
