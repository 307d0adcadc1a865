"""The capture writer batches: it wakes on a full batch, a flush or its interval, not per call."""

import time
from pathlib import Path
from typing import Any

from metaclaw_core import CallContext, Message
from tests.support.engines import make_settings


def ctx(i: int) -> CallContext:
    return CallContext(session_id="w", messages=[Message(role="user", content=f"task {i}")])


def wait_for(pred: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_captures_reach_the_store_within_the_interval_without_a_flush(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(make_settings(tmp_path / "h", store__flush_interval_s=0.05))
    ids = [engine.after_call(ctx(i), "out") for i in range(5)]
    assert wait_for(lambda: engine.writer.stats["stored"] == 5)
    assert {t.id for t in engine.trajectories.recent(10)} == set(ids)


def test_one_commit_per_batch_not_per_capture(make_engine: Any, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "h", store__flush_interval_s=0.5, store__batch_size=1000)
    engine = make_engine(settings)
    assert engine.flush(30)  # start-up recovery done
    before = engine.writer._commits
    for i in range(200):
        engine.after_call(ctx(i), "out")
    assert wait_for(lambda: engine.writer.stats["stored"] == 200)
    assert engine.writer._commits - before <= 3  # was one commit per capture or two


def test_a_full_batch_or_a_flush_wakes_the_writer_before_the_interval(
    make_engine: Any, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path / "h", store__flush_interval_s=3600, store__batch_size=10)
    engine = make_engine(settings)
    for i in range(10):  # a full batch
        engine.after_call(ctx(i), "out")
    assert wait_for(lambda: engine.writer.stats["stored"] == 10)
    engine.after_call(ctx(10), "out")  # one more, far from a batch: only a flush brings it
    t0 = time.monotonic()
    assert engine.flush(30)
    assert time.monotonic() - t0 < 30 and engine.writer.stats["stored"] == 11


def test_a_table_migrated_by_another_process_loses_no_capture(
    make_engine: Any, tmp_path: Path
) -> None:
    """The writer reads the table's schema once; after another process adds a column, the
    next commits still land (directly, or replayed from the journal with the schema re-read)."""
    import pyarrow as pa

    from metaclaw_core.store.db import TRAJECTORIES, Store

    settings = make_settings(tmp_path / "h", store__retry_interval_s=0.05)
    engine = make_engine(settings)
    first = [engine.after_call(ctx(i), "out") for i in range(3)]
    assert engine.flush(30)
    other = Store(make_settings(tmp_path / "h"))  # a second process's view of the same store
    other.table(TRAJECTORIES).add_columns(pa.schema([pa.field("added_later", pa.string())]))
    later = [engine.after_call(ctx(i), "out") for i in range(3, 6)]
    assert engine.flush(60)
    engine.store.refresh(TRAJECTORIES)
    stored = {t.id for t in engine.trajectories.recent(20)}
    assert stored == set(first + later)
    assert "added_later" in engine.store.table(TRAJECTORIES).schema.names
