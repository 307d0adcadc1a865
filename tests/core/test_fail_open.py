"""Every internal failure on the hot path is swallowed: the host's call proceeds."""

import threading
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill, hookimpl
from metaclaw_core.store.trajectories import TrajectoryStore
from tests.support.engines import SharedEmbedder, make_settings

SKILL = Skill(
    name="iso-timestamps", description="When writing dates and times", body="Use ISO 8601."
)


def ctx(text: str = "Write the date and time of the meeting in the log") -> CallContext:
    return CallContext(messages=[Message(role="user", content=text)])


class Boom:
    """A plugin that raises from one hook."""

    def __init__(self, hook: str) -> None:
        self.hook = hook

    @hookimpl(tryfirst=True)
    def metaclaw_extract_query(self, ctx: Any, settings: Any) -> str | None:
        if self.hook == "query":
            raise RuntimeError("query plugin exploded")
        return None

    @hookimpl(tryfirst=True)
    def metaclaw_retrieve(self, **kw: Any) -> None:
        if self.hook == "retrieve":
            raise RuntimeError("retrieval plugin exploded")

    @hookimpl(tryfirst=True)
    def metaclaw_render_injection(self, **kw: Any) -> None:
        if self.hook == "render":
            raise RuntimeError("render plugin exploded")

    @hookimpl
    def metaclaw_prepare_trajectory(self, trajectory: Any, settings: Any) -> None:
        if self.hook == "prepare":
            raise RuntimeError("redaction plugin exploded")

    @hookimpl
    def metaclaw_trajectories_stored(self, trajectories: Any) -> None:
        if self.hook == "stored":
            raise RuntimeError("observer exploded")


@pytest.mark.parametrize("hook", ["query", "retrieve", "render"])
def test_a_failing_injection_plugin_degrades_to_no_injection(
    make_engine: Any, settings: Settings, hook: str
) -> None:
    engine = make_engine(settings, plugins=[Boom(hook)])
    engine.add_skills(SKILL)
    inj = engine.before_call(ctx())
    assert inj.text == "" and inj.skills == [] and "exploded" in (inj.degraded or "")
    assert engine.faults.counts["before_call"] == 1
    assert engine.after_call(ctx(), "still captured") is not None


def test_a_failing_capture_plugin_loses_the_capture_but_not_the_call(
    make_engine: Any, settings: Settings
) -> None:
    engine = make_engine(settings, plugins=[Boom("prepare")])
    assert engine.after_call(ctx(), "out") is None
    assert engine.faults.counts["after_call"] == 1


def test_a_failing_observer_does_not_stop_storage(make_engine: Any, settings: Settings) -> None:
    engine = make_engine(settings, plugins=[Boom("stored")])
    tid = engine.after_call(ctx(), "out")
    assert engine.flush()
    assert engine.trajectories.get(tid or "") is not None
    assert engine.faults.counts["trajectory observer"] >= 1


def test_embedder_that_fails_to_load_injects_nothing_and_still_captures(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "h")
    settings.embedding.model = str(tmp_path / "no-such-model")
    with MetaClaw(settings) as engine:
        assert engine.wait_ready(60) is False
        inj = engine.before_call(ctx())
        assert inj.text == ""
        tid = engine.after_call(ctx(), "answer")
        assert tid is not None and engine.flush()
        assert engine.trajectories.get(tid) is not None
        with pytest.raises(Exception, match="unavailable"):
            engine.add_skills(SKILL)  # off the hot path, errors are raised and explained


def test_unwritable_store_keeps_captures_in_the_spool_until_it_is_back(
    minilm: Any, tmp_path: Path
) -> None:
    # Tests run as root, which ignores permission bits: a regular file where the store's
    # directory should be makes it unwritable for anyone.
    blocker = tmp_path / "blocked"
    blocker.write_text("not a directory")
    settings = make_settings(tmp_path / "h", store__uri=str(blocker / "db"))
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    ids = [engine.after_call(ctx(f"task {i}"), "out") for i in range(20)]
    assert all(ids)  # acknowledged: they are in the spool
    assert engine.before_call(ctx()).text == ""  # no store, no skills, no exception
    assert engine.flush(0.5) is False
    assert engine.status()["capture"]["store_healthy"] is False
    engine.close(timeout=1)

    blocker.unlink()  # the store comes back
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as again:
        assert again.flush(30)
        assert {t.id for t in again.trajectories.recent(100)} == set(ids)


def test_store_recovers_in_the_same_process(minilm: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("x")
    settings = make_settings(tmp_path / "h", store__uri=str(blocker / "db"))
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        first = [engine.after_call(ctx(f"a{i}"), "out") for i in range(5)]
        assert engine.flush(0.3) is False
        blocker.unlink()
        second = [engine.after_call(ctx(f"b{i}"), "out") for i in range(5)]
        assert engine.flush(30)
        assert {t.id for t in engine.trajectories.recent(100)} == set(first + second)


def test_hot_path_does_not_touch_the_store(
    engine: MetaClaw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """before_call serves from memory; after_call returns while the store write is blocked."""
    engine.add_skills(SKILL)
    engine.before_call(ctx())  # warm the query cache

    def no_store(*a: Any, **k: Any) -> Any:
        raise AssertionError("the hot path touched the store")

    monkeypatch.setattr(engine.store, "table", no_store)
    monkeypatch.setattr(engine.store, "has_table", no_store)
    assert engine.before_call(ctx()).skill_names == ["iso-timestamps"]
    monkeypatch.undo()

    gate = threading.Event()
    real_write = TrajectoryStore.write

    def slow_write(self: TrajectoryStore, items: Any) -> None:
        gate.wait(30)
        real_write(self, items)

    monkeypatch.setattr(TrajectoryStore, "write", slow_write)
    ids = [engine.after_call(ctx(), "out") for _ in range(3)]  # returns with the writer stuck
    assert all(ids)
    gate.set()
    assert engine.flush(30)
    assert all(engine.trajectories.get(i or "") for i in ids)


def test_model_is_loaded_once_not_per_call(engine: MetaClaw, minilm: Any) -> None:
    engine.add_skills(SKILL)
    model = minilm._model
    misses = minilm.cache_misses
    for i in range(20):
        engine.before_call(ctx(f"Write the date and time of meeting {i % 4} in the log"))
    assert minilm._model is model
    assert minilm.cache_misses - misses <= 4  # repeated queries come from the LRU
