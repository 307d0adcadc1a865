"""One trajectory schema: the table is laid out from the model (metaclaw_core.store.layout)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from metaclaw_core.models import Trajectory
from metaclaw_core.store import layout
from metaclaw_core.store.db import trajectories_schema
from metaclaw_core.store.records import SCALAR_COLUMNS


def test_every_field_of_the_model_is_stored_somewhere() -> None:
    assert layout.unplaced_fields() == []
    schema = trajectories_schema(8)
    assert tuple(schema.names) == layout.COLUMNS
    for name in layout.field_columns():  # a field column has its annotation's type
        assert schema.field(name).type == layout.arrow_type(name)
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("injected_skills").type == pa.list_(pa.string())
    assert schema.field("vector").type == pa.list_(pa.float32(), 8)
    assert not schema.field("id").nullable and schema.field("error").nullable
    assert "injected_skills" not in SCALAR_COLUMNS and "generation" in SCALAR_COLUMNS


def test_a_field_with_no_column_type_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "_annotation", lambda name: dict[str, int])
    with pytest.raises(TypeError, match="place the field in"):
        layout.arrow_type("query")


def test_a_stored_trajectory_round_trips_through_the_layout(tmp_path: Path) -> None:
    import lancedb

    from metaclaw_core.models import Message, ModelOutput
    from metaclaw_core.store.records import encode_trajectory

    traj = Trajectory(
        session_id="s1",
        messages=[Message(role="user", content="list the files")],
        output=ModelOutput(text="ls"),
        injected_skills=["cite-file-paths"],
        generation=3,
        query="list the files",
        latency_ms=12.5,
        outcome="success",
        metadata={"k": "v"},
    )
    row = encode_trajectory(traj, [0.5] * 8).columns()
    row["vector"] = [0.5] * 8
    db = lancedb.connect(tmp_path)
    table = db.create_table("trajectories", data=[row], schema=trajectories_schema(8))
    back = table.to_arrow().to_pylist()[0]
    assert back["generation"] == 3 and back["injected_skills"] == ["cite-file-paths"]
    assert back["output_text"] == "ls" and back["outcome"] == "success"
