"""How a :class:`~metaclaw_core.models.Trajectory` is laid out in the ``trajectories`` table.

The model says what a trajectory is; this module is the one place that says how each of its
fields is stored, and both the table schema (:func:`metaclaw_core.store.db.trajectories_schema`)
and the writer's rows (:mod:`metaclaw_core.store.records`) are built from it:

* a scalar field is a column of the same name, of the Arrow type of its annotation;
* the nested fields are JSON text (``messages``, ``output``, ``metadata``), and the output's
  text is also kept on its own for search and the dashboard;
* ``rewards`` live in their own table (one row per reward);
* the query ``vector`` and the ``embedder`` that made it are columns the model does not carry
  (capture adds them).

The column order is the stored order: tables written before keep their layout.
"""

from __future__ import annotations

import functools
import types
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    import pyarrow as pa

JSON_COLUMNS = {"messages": "messages_json", "output": "output_json", "metadata": "metadata_json"}
OWN_TABLE = {"rewards": "rewards"}
OUTPUT_TEXT = "output_text"
VECTOR, EMBEDDER = "vector", "embedder"
NOT_NULL = {"id"}

COLUMNS = (
    "id",
    "created_at",
    "session_id",
    "framework",
    "model",
    "generation",
    "query",
    "messages_json",
    "output_json",
    OUTPUT_TEXT,
    "injected_skills",
    "latency_ms",
    "error",
    "outcome",
    "truncated",
    "metadata_json",
    VECTOR,
    EMBEDDER,
    "agent",  # added with agents: null in rows written before (read as the default agent)
)


def field_columns() -> tuple[str, ...]:
    """The columns that are fields of the model itself, in stored order."""
    from metaclaw_core.models import Trajectory

    return tuple(c for c in COLUMNS if c in Trajectory.model_fields)


@functools.cache
def _hints() -> dict[str, Any]:
    from metaclaw_core.models import Trajectory

    return typing.get_type_hints(Trajectory)


def _annotation(name: str) -> Any:
    hint = _hints()[name]
    if get_origin(hint) in (Union, types.UnionType):  # X | None: the column is nullable anyway
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"Trajectory.{name}: {hint} has no single column type")
        hint = args[0]
    return hint


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of the model field ``name`` (its annotation, ``X | None`` as ``X``)."""
    import pyarrow as pa

    from metaclaw_core.store.db import timestamp_type

    hint = _annotation(name)
    if get_origin(hint) is Literal:
        if all(isinstance(v, str) for v in get_args(hint)):
            return pa.string()
    elif get_origin(hint) is list and get_args(hint) == (str,):
        return pa.list_(pa.string())
    else:
        plain = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
        if hint in plain:
            return plain[hint]
        if hint is datetime:
            return timestamp_type()
    raise TypeError(
        f"Trajectory.{name}: no column type for {hint!r}; place the field in "
        "metaclaw_core/store/layout.py (a column, a JSON column or its own table)"
    )


def scalar_columns() -> tuple[str, ...]:
    """The field columns the writer copies from a trajectory's scalar fields (lists aside)."""
    return tuple(c for c in field_columns() if get_origin(_annotation(c)) is not list)


def arrow_fields(dim: int) -> list[pa.Field]:
    """The ``trajectories`` table's fields, in stored order, for query vectors of width ``dim``."""
    import pyarrow as pa

    fields = set(field_columns())
    out = []
    for name in COLUMNS:
        if name in fields:
            kind = arrow_type(name)
        elif name == VECTOR:
            kind = pa.list_(pa.float32(), dim)
        else:  # the JSON columns, the output's text, the embedder
            kind = pa.string()
        out.append(pa.field(name, kind, nullable=name not in NOT_NULL))
    return out


def unplaced_fields() -> list[str]:
    """Fields of the model that this layout does not store anywhere (must be empty)."""
    from metaclaw_core.models import Trajectory

    placed = set(field_columns()) | set(JSON_COLUMNS) | set(OWN_TABLE)
    return [f for f in Trajectory.model_fields if f not in placed]
