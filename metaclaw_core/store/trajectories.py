"""The ``trajectories`` and ``rewards`` tables: batched writes and the reads the CLI needs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import TypeAdapter

from metaclaw_core.agents import DEFAULT_AGENT, agent_of
from metaclaw_core.errors import StoreError
from metaclaw_core.models import Message, ModelOutput, Reward, Trajectory
from metaclaw_core.store.db import (
    REWARDS,
    TRAJECTORIES,
    Store,
    agent_filter,
    rewards_schema,
    sql_in,
    sql_str,
    trajectories_schema,
)
from metaclaw_core.store.records import SCALAR_COLUMNS, EncodedTrajectory

if TYPE_CHECKING:  # imported where first used: importing the engine stays free of pyarrow
    import pyarrow as pa

log = logging.getLogger("metaclaw.store")

_MESSAGES = TypeAdapter(list[Message])
# What `recent` reads: every column but the bodies (messages, output JSON, metadata, vector).
LIST_COLUMNS = [*SCALAR_COLUMNS, "output_text", "injected_skills"]


class TrajectoryStore:
    """Reads and batched writes of captured trajectories and their rewards."""

    def __init__(self, store: Store, default_dim: Callable[[], int]) -> None:
        self.store = store
        self._default_dim = default_dim
        # The table's schema, read once: each read is a round trip through LanceDB's event
        # loop thread, Python work that a host thread may wait on for the GIL. Dropped when an
        # append fails (another process may have migrated the table); the records stay in the
        # journal and their replay reads it again.
        self._schema: pa.Schema | None = None
        self._migrated = False

    def _table(self, create: bool, dim_hint: int | None = None) -> Any:
        if self.store.has_table(TRAJECTORIES):
            table = self.store.table(TRAJECTORIES)
            if not self._migrated:
                table = self._migrate(table)
            return table
        if not create:
            return None
        table = self.store.table(TRAJECTORIES, trajectories_schema(dim_hint or self._default_dim()))
        self._migrated = True
        return table

    def _migrate(self, table: Any) -> Any:
        """A table written by an older version gets the columns it lacks (``agent``: null,
        read as the default agent), once per process; if that fails, reads and writes go on
        without them (the writer fills what the table has)."""
        try:
            dim = int(table.schema.field("vector").type.list_size)
            if self.store.migrate(TRAJECTORIES, trajectories_schema(dim)):
                self.store.refresh(TRAJECTORIES)
                self._schema = None
            self._migrated = True
        except Exception as exc:
            log.warning("metaclaw: could not migrate the trajectories table: %s", exc)
        return self.store.table(TRAJECTORIES)

    def _rewards(self, create: bool) -> Any:
        if self.store.has_table(REWARDS) or create:
            return self.store.table(REWARDS, rewards_schema())
        return None

    def _columns(self, table: Any, wanted: Sequence[str]) -> list[str]:
        have = set(table.schema.names)
        return [c for c in wanted if c in have]

    # -- writing (background writer only) ------------------------------------------------
    def write(self, items: Sequence[EncodedTrajectory]) -> None:
        """Append one batch, column by column from the parts serialised on the hot path."""
        if not items:
            return
        hint = next((len(e.vector) for e in items if e.vector is not None), None)
        table = self._table(create=True, dim_hint=hint)
        schema = self._schema or table.schema
        if "embedder" not in schema.names or "agent" not in schema.names:
            schema = self._add_embedder_column(table, schema)
        if "agent" not in schema.names and any(e.agent != DEFAULT_AGENT for e in items):
            # written without the column, another agent's captures would read as the
            # default agent's: they wait in the journal until the table is migrated
            raise StoreError("metaclaw: the trajectories table has no agent column yet")
        try:
            table.add(self._arrow(items, schema))
        except Exception:
            self._schema = None  # maybe stale: the replay of these records reads it again
            raise
        self._schema = schema

    def _add_embedder_column(self, table: Any, schema: pa.Schema) -> pa.Schema:
        """Migrate a table written before the ``embedder`` column; if that fails, write
        without it this time (the captures are not held up by a migration)."""
        try:
            dim = int(schema.field("vector").type.list_size)
            self.store.migrate(TRAJECTORIES, trajectories_schema(dim))
            return self.store.table(TRAJECTORIES).schema
        except Exception as exc:
            log.warning("metaclaw: could not add the trajectories' embedder column: %s", exc)
            return schema

    # -- vectors of another model (the re-embedding migration) ------------------------------
    @staticmethod
    def _stale_filter(embedder_id: str) -> str:
        return f"vector IS NOT NULL AND (embedder IS NULL OR embedder != {sql_str(embedder_id)})"

    def stale_vectors(self, embedder_id: str) -> int:
        """How many stored query vectors were not made by ``embedder_id`` (or say nothing)."""
        table = self._table(create=False)
        if table is None:
            return 0
        self.store.refresh(TRAJECTORIES)
        if "embedder" not in table.schema.names:
            return int(table.count_rows("vector IS NOT NULL"))
        return int(table.count_rows(self._stale_filter(embedder_id)))

    def reembed(
        self,
        embed: Callable[[list[str]], Any],
        embedder_id: str,
        *,
        batch: int = 256,
    ) -> int:
        """Replace every query vector not made by ``embedder_id`` with ``embed`` of its
        query text, recording ``embedder_id``; returns how many. Rows are updated in place
        (merge on ``id``), a batch per commit, so an interrupted run is resumed by the next.
        The text embedded is the stored query, which is the redacted one."""
        import pyarrow as pa

        table = self._table(create=False)
        if table is None:
            return 0
        self.store.refresh(TRAJECTORIES)
        schema = table.schema
        if "embedder" not in schema.names:
            self._add_embedder_column(table, schema)
            table = self.store.table(TRAJECTORIES)
            if "embedder" not in table.schema.names:
                raise StoreError("metaclaw: cannot add the trajectories' embedder column")
        dim = int(table.schema.field("vector").type.list_size)
        rows = (
            table.search()
            .where(self._stale_filter(embedder_id))
            .select(["id", "query"])
            .limit(None)
            .to_arrow()
        )
        ids, queries = rows["id"].to_pylist(), [q or "" for q in rows["query"].to_pylist()]
        done = 0
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            vectors = np.asarray(embed(queries[start : start + batch]), dtype=np.float32)
            if vectors.shape != (len(chunk), dim):
                raise StoreError(
                    f"metaclaw: the embedder gives {vectors.shape[-1]}-dim vectors but the "
                    f"trajectories table holds {dim}-dim ones"
                )
            update = pa.table(
                {
                    "id": pa.array(chunk, type=pa.string()),
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(vectors.reshape(-1), type=pa.float32()), dim
                    ),
                    "embedder": pa.array([embedder_id] * len(chunk), type=pa.string()),
                }
            )
            table.merge_insert("id").when_matched_update_all().execute(update)
            done += len(chunk)
        return done

    @staticmethod
    def _arrow(items: Sequence[EncodedTrajectory], schema: pa.Schema) -> pa.Table:
        import pyarrow as pa

        dim = int(schema.field("vector").type.list_size)
        has_vec = [e.vector is not None and len(e.vector) == dim for e in items]
        flat = np.zeros((len(items), dim), dtype=np.float32)
        for i, e in enumerate(items):
            if has_vec[i]:
                flat[i] = e.vector
        vectors = pa.FixedSizeListArray.from_arrays(
            pa.array(flat.reshape(-1), type=pa.float32()),
            dim,
            mask=pa.array([not h for h in has_vec]),
        )
        columns: dict[str, list[Any]] = {}
        for e in items:  # one row at a time: each record's parsed objects are freed at once
            for name, value in e.columns().items():
                columns.setdefault(name, []).append(value)
        arrays = [
            vectors
            if f.name == "vector"
            else pa.array(columns.get(f.name, [None] * len(items)), type=f.type)
            for f in schema
        ]
        return pa.Table.from_arrays(arrays, schema=schema)

    def write_rewards(self, rewards: Sequence[Reward]) -> None:
        import pyarrow as pa

        if not rewards:
            return
        table = self._rewards(create=True)
        # A reward is its trajectory's agent's (engine.feedback knows only the id).
        try:
            agents = self.agents_of(sorted({r.trajectory_id for r in rewards}))
        except Exception as exc:  # the rewards are still stored, as the agent they say
            log.warning("metaclaw: could not read the rewarded trajectories' agents: %s", exc)
            agents = {}
        rows = [{**r.model_dump(), "agent": agents.get(r.trajectory_id, r.agent)} for r in rewards]
        table.add(pa.Table.from_pylist(rows, schema=rewards_schema()))

    def optimize(self) -> None:
        for name in (TRAJECTORIES, REWARDS):
            if self.store.has_table(name):
                self.store.table(name).optimize()

    # -- reading -------------------------------------------------------------------------
    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        table = self._table(create=False)
        if table is None or not ids:
            return set()
        found: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            rows = table.search().where(sql_in("id", chunk)).select(["id"]).limit(None).to_arrow()
            found.update(rows["id"].to_pylist())
        return found

    def existing_rewards(self, rewards: Sequence[Reward]) -> set[tuple[str, str, str]]:
        table = self._rewards(create=False)
        if table is None or not rewards:
            return set()
        ids = sorted({r.trajectory_id for r in rewards})
        rows = table.search().where(sql_in("trajectory_id", ids)).limit(None).to_arrow().to_pylist()
        return {(r["trajectory_id"], r["source"], str(r["created_at"])) for r in rows}

    def count(self, agent: str | None = None) -> int:
        """Stored trajectories (only ``agent``'s when given)."""
        self.store.refresh(TRAJECTORIES)
        table = self._table(create=False)
        if table is None:
            return 0
        if agent is None:
            return int(table.count_rows())
        return int(table.count_rows(self._agent_filter(table, agent)))

    def rewards_for(self, ids: Sequence[str]) -> dict[str, list[Reward]]:
        table = self._rewards(create=False)
        out: dict[str, list[Reward]] = {}
        if table is None or not ids:
            return out
        self.store.refresh(REWARDS)
        rows = table.search().where(sql_in("trajectory_id", list(ids))).limit(None).to_arrow()
        for r in rows.to_pylist():
            r["agent"] = agent_of(r.get("agent"))
            out.setdefault(r["trajectory_id"], []).append(Reward.model_validate(r))
        return out

    def get(self, trajectory_id: str) -> Trajectory | None:
        table = self._table(create=False)
        if table is None:
            return None
        self.store.refresh(TRAJECTORIES)
        rows = (
            table.search().where(f"id = {sql_str(trajectory_id)}").limit(1).to_arrow().to_pylist()
        )
        if not rows:
            return None
        t = self._from_row(rows[0])
        t.rewards = self.rewards_for([t.id]).get(t.id, [])
        return t

    def recent(
        self,
        limit: int = 20,
        *,
        session_id: str | None = None,
        generation: int | None = None,
        agent: str | None = None,
    ) -> list[Trajectory]:
        """Newest first, without message bodies (use :meth:`get` for one in full)."""
        table = self._table(create=False)
        if table is None:
            return []
        self.store.refresh(TRAJECTORIES)
        q = table.search()
        filters = []
        if session_id is not None:
            filters.append(f"session_id = {sql_str(session_id)}")
        if generation is not None:
            filters.append(f"generation = {int(generation)}")
        if agent is not None:
            filters.append(self._agent_filter(table, agent))
        if filters:
            q = q.where(" AND ".join(filters))
        data = q.select(self._columns(table, LIST_COLUMNS)).limit(None).to_arrow()
        if data.num_rows == 0:
            return []
        data = data.sort_by([("created_at", "descending")]).slice(0, limit)
        out = [self._from_row(r) for r in data.to_pylist()]
        rewards = self.rewards_for([t.id for t in out])
        for t in out:
            t.rewards = rewards.get(t.id, [])
        return out

    def since(
        self, after: datetime, limit: int = 1000, *, agent: str | None = None
    ) -> list[Trajectory]:
        """Trajectories created at or after ``after`` (any host), oldest first, in full;
        only ``agent``'s when given."""
        table = self._table(create=False)
        if table is None:
            return []
        self.store.refresh(TRAJECTORIES)
        where = f"created_at >= {sql_timestamp(after)}"
        if agent is not None:
            where += " AND " + self._agent_filter(table, agent)
        rows = table.search().where(where).limit(None).to_arrow()
        if rows.num_rows == 0:
            return []
        rows = rows.sort_by([("created_at", "ascending")]).slice(0, limit)
        return [self._from_row(r) for r in rows.to_pylist()]

    def rewards_since(self, after: datetime, limit: int = 5000) -> list[Reward]:
        """Rewards recorded at or after ``after`` (any host), oldest first."""
        table = self._rewards(create=False)
        if table is None:
            return []
        self.store.refresh(REWARDS)
        rows = table.search().where(f"created_at >= {sql_timestamp(after)}").limit(None).to_arrow()
        if rows.num_rows == 0:
            return []
        rows = rows.sort_by([("created_at", "ascending")]).slice(0, limit)
        return [
            Reward.model_validate({**r, "agent": agent_of(r.get("agent"))})
            for r in rows.to_pylist()
        ]

    @staticmethod
    def _agent_filter(table: Any, agent: str) -> str:
        if "agent" not in table.schema.names:  # not migrated: every row is the default's
            return "TRUE" if agent == DEFAULT_AGENT else "FALSE"
        return agent_filter(agent)

    def agents_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Trajectory id → its agent, for the ids found."""
        table = self._table(create=False)
        if table is None or not ids:
            return {}
        if "agent" not in table.schema.names:
            return {i: DEFAULT_AGENT for i in self.existing_ids(ids)}
        out: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            rows = table.search().where(sql_in("id", chunk)).select(["id", "agent"]).limit(None)
            for r in rows.to_arrow().to_pylist():
                out[r["id"]] = agent_of(r["agent"])
        return out

    def agents(self) -> dict[str, int]:
        """Trajectory count per agent (rows written before agents: the default agent's)."""
        table = self._table(create=False)
        if table is None:
            return {}
        self.store.refresh(TRAJECTORIES)
        if "agent" not in table.schema.names:
            return {DEFAULT_AGENT: int(table.count_rows())}
        out: dict[str, int] = {}
        for value in table.search().select(["agent"]).limit(None).to_arrow()["agent"].to_pylist():
            key = agent_of(value)
            out[key] = out.get(key, 0) + 1
        return out

    @staticmethod
    def _from_row(r: dict[str, Any]) -> Trajectory:
        messages = _MESSAGES.validate_json(r["messages_json"]) if r.get("messages_json") else []
        output = (
            ModelOutput.model_validate_json(r["output_json"])
            if r.get("output_json")
            else ModelOutput(text=r.get("output_text") or "")
        )
        return Trajectory(
            id=r["id"],
            created_at=r["created_at"],
            session_id=r.get("session_id"),
            framework=r.get("framework") or "python",
            model=r.get("model"),
            messages=messages,
            output=output,
            injected_skills=r.get("injected_skills") or [],
            generation=r.get("generation") or 0,
            query=r.get("query") or "",
            latency_ms=r.get("latency_ms"),
            error=r.get("error"),
            outcome=r.get("outcome") or "unknown",
            truncated=bool(r.get("truncated")),
            metadata=json.loads(r["metadata_json"]) if r.get("metadata_json") else {},
            agent=agent_of(r.get("agent")),
        )


def sql_timestamp(t: datetime) -> str:
    """A UTC timestamp literal for a LanceDB filter."""
    return f"TIMESTAMP '{t.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%f')}'"
