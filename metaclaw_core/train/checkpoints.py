"""The ``checkpoints`` table: every saved training state and published sampler, newest last.

Resume reads the newest ``state`` row of the backend, model and agent (one LoRA per agent and
base model); serving after a restart reads the newest ``sampler`` row. Rows are only ever
appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pyarrow as pa

from metaclaw_core.agents import DEFAULT_AGENT, agent_of
from metaclaw_core.models import utcnow
from metaclaw_core.store.db import TS, Store, agent_filter, sql_str

CHECKPOINTS = "checkpoints"
CheckpointKind = Literal["state", "sampler"]


def checkpoints_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("backend", pa.string(), nullable=False),
            pa.field("model", pa.string()),
            pa.field("kind", pa.string()),
            pa.field("name", pa.string()),
            pa.field("path", pa.string()),
            pa.field("step", pa.int64()),
            pa.field("generation", pa.int64()),
            pa.field("reward", pa.float64()),
            pa.field("created_at", TS),
            pa.field("agent", pa.string()),  # added with agents (null before: the default)
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


@dataclass(frozen=True)
class Checkpoint:
    backend: str
    model: str
    kind: CheckpointKind
    name: str
    path: str
    step: int
    generation: int
    reward: float | None
    created_at: datetime
    agent: str = DEFAULT_AGENT  # whose LoRA (one per agent and base model)


class CheckpointLog:
    """Appends and reads rows of the ``checkpoints`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _table(self) -> Any:
        return self.store.table(CHECKPOINTS, checkpoints_schema())

    def record(
        self,
        *,
        backend: str,
        model: str,
        kind: CheckpointKind,
        name: str,
        path: str,
        step: int,
        generation: int,
        reward: float | None = None,
        agent: str = DEFAULT_AGENT,
    ) -> Checkpoint:
        cp = Checkpoint(backend, model, kind, name, path, step, generation, reward, utcnow(), agent)
        self._table().add(pa.Table.from_pylist([cp.__dict__], schema=checkpoints_schema()))
        return cp

    def history(
        self,
        *,
        backend: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        agent: str | None = None,
    ) -> list[Checkpoint]:
        table = self._table()
        self.store.refresh(CHECKPOINTS)
        filters = [
            f"{col} = {sql_str(val)}"
            for col, val in (("backend", backend), ("model", model), ("kind", kind))
            if val is not None
        ]
        if agent is not None:
            filters.append(agent_filter(agent))
        q = table.search()
        if filters:
            q = q.where(" AND ".join(filters))
        rows = q.limit(None).to_arrow().to_pylist()
        cps = [Checkpoint(**{**r, "agent": agent_of(r.get("agent"))}) for r in rows]
        return sorted(cps, key=lambda c: (c.step, c.created_at))

    def latest(
        self,
        *,
        backend: str,
        model: str,
        kind: CheckpointKind,
        agent: str = DEFAULT_AGENT,
    ) -> Checkpoint | None:
        found = self.history(backend=backend, model=model, kind=kind, agent=agent)
        return found[-1] if found else None
