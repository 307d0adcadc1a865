"""Opening a table that another process is creating or changing at the same moment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from metaclaw_core.errors import StoreError
from metaclaw_core.store import db as store_db
from metaclaw_core.store.db import GENERATIONS, Store, generations_schema, is_commit_conflict
from tests.support.engines import make_settings

CONFLICT = "Commit conflict for version 2: Update incompatible with concurrent Overwrite"


def test_a_lost_commit_race_is_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Store._ensure_primary_key
    calls: list[int] = []

    def racing(tbl: Any, column: str) -> None:
        calls.append(1)
        if len(calls) == 1:  # the other learner's create landed between our look and our commit
            raise RuntimeError(CONFLICT)
        real(tbl, column)

    monkeypatch.setattr(Store, "_ensure_primary_key", staticmethod(racing))
    store = Store(make_settings(tmp_path / "h"))
    tbl = store.table(GENERATIONS, generations_schema())
    assert len(calls) == 2 and tbl.count_rows() == 0
    assert Store(make_settings(tmp_path / "h")).has_table(GENERATIONS)


def test_other_errors_and_a_race_that_never_ends_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def broken(tbl: Any, column: str) -> None:
        seen.append(column)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Store, "_ensure_primary_key", staticmethod(broken))
    with pytest.raises(StoreError, match=r"cannot open table 'generations'.*disk on fire"):
        Store(make_settings(tmp_path / "a")).table(GENERATIONS, generations_schema())
    assert len(seen) == 1  # not a conflict: not tried again

    def always(tbl: Any, column: str) -> None:
        raise RuntimeError(CONFLICT)

    monkeypatch.setattr(Store, "_ensure_primary_key", staticmethod(always))
    monkeypatch.setattr(store_db.time, "sleep", lambda _s: None)
    with pytest.raises(StoreError, match="concurrent Overwrite"):
        Store(make_settings(tmp_path / "b")).table(GENERATIONS, generations_schema())


def test_what_counts_as_a_commit_conflict() -> None:
    assert is_commit_conflict(RuntimeError(CONFLICT))
    assert is_commit_conflict(OSError("Retryable commit conflict for version 7"))
    assert not is_commit_conflict(ValueError("No such table"))
