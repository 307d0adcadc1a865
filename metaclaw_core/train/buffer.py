"""The RL buffer with support/query separation, as a view over the store.

The *query buffer* is every usable trajectory of the current skill generation that no training
step has consumed yet. A trajectory's generation is stamped when it is produced (at
``before_call``), so when the library moves from g to g+1 every sample of g leaves the query
buffer at once: its reward judged behaviour the new skills already changed. Those samples stay
in the ``trajectories`` table as the *support set* for the evolver.

The only state of its own is the ``train_samples`` table (which trajectories a step consumed),
so the buffer survives restarts and is shared by every process on the same store.

Agents: a buffer is one agent's (``agent``, the default agent's unless named). It holds only
that agent's trajectories and compares their generation with *that agent's* generation, so a
change to another agent's library (a generation of its own) leaves this buffer as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from metaclaw_core.agents import DEFAULT_AGENT, validate_agent
from metaclaw_core.models import Trajectory, utcnow
from metaclaw_core.store.db import REWARDS, TRAJECTORIES, TS, Store, agent_filter, sql_in
from metaclaw_core.store.trajectories import TrajectoryStore

TRAIN_SAMPLES = "train_samples"


def train_samples_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("generation", pa.int64()),
            pa.field("step", pa.int64()),
            pa.field("backend", pa.string()),
            pa.field("created_at", TS),
            pa.field("agent", pa.string()),  # added with agents (null before: the default)
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


@dataclass(frozen=True)
class BufferSizes:
    """What `metaclaw train status` shows about the buffer."""

    generation: int
    query: int  # current generation, usable, not yet consumed
    consumed: int  # current generation, already trained on
    unusable: int  # current generation, errored or empty
    support: int  # older generations (kept for the evolver)
    rewarded_query: int  # query samples that already carry a reward


class QueryBuffer:
    """Trajectories of the current generation that training has not used yet."""

    def __init__(
        self,
        store: Store,
        current_generation: Callable[[], int],
        *,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        self.store = store
        self._current_generation = current_generation
        self.agent = validate_agent(agent)

    def generation(self) -> int:
        """The generation whose samples form the query buffer right now."""
        return int(self._current_generation())

    # -- tables --------------------------------------------------------------------------
    def _trajectories(self) -> Any:
        if not self.store.has_table(TRAJECTORIES):
            return None
        self.store.table(TRAJECTORIES)
        self.store.refresh(TRAJECTORIES)
        return self.store.table(TRAJECTORIES)

    def _samples(self) -> Any:
        table = self.store.table(TRAIN_SAMPLES, train_samples_schema())
        self.store.refresh(TRAIN_SAMPLES)
        return table

    def _of_agent(self, table: Any, where: str) -> str:
        """``where``, for this agent's rows (a table from before agents: the default's)."""
        if "agent" not in table.schema.names:
            return where if self.agent == DEFAULT_AGENT else "FALSE"
        return f"{where} AND {agent_filter(self.agent)}"

    def _consumed(self, generation: int) -> set[str]:
        samples = self._samples()
        rows = (
            samples.search()
            .where(self._of_agent(samples, f"generation = {int(generation)}"))
            .select(["trajectory_id"])
            .limit(None)
            .to_arrow()
        )
        return set(rows["trajectory_id"].to_pylist())

    def _candidates(self, generation: int) -> list[dict[str, Any]]:
        """id/created_at/usable of every row of ``generation``, oldest first."""
        table = self._trajectories()
        if table is None:
            return []
        rows = (
            table.search()
            .where(self._of_agent(table, f"generation = {int(generation)}"))
            .select(["id", "created_at", "error", "output_text"])
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        return sorted(rows, key=lambda r: r["created_at"])

    @staticmethod
    def _usable(row: dict[str, Any]) -> bool:
        return row.get("error") is None

    # -- reading -------------------------------------------------------------------------
    def sizes(self) -> BufferSizes:
        g = self.generation()
        rows = self._candidates(g)
        consumed = self._consumed(g)
        usable = [r["id"] for r in rows if self._usable(r)]
        query_ids = [i for i in usable if i not in consumed]
        table = self._trajectories()
        support = (
            0
            if table is None
            else int(table.count_rows(self._of_agent(table, f"generation < {g}")))
        )
        rewarded = 0
        if query_ids and self.store.has_table(REWARDS):
            self.store.refresh(REWARDS)
            rewards = self.store.table(REWARDS)
            found: set[str] = set()
            for i in range(0, len(query_ids), 500):
                chunk = query_ids[i : i + 500]
                got = (
                    rewards.search()
                    .where(sql_in("trajectory_id", chunk))
                    .select(["trajectory_id"])
                    .limit(None)
                    .to_arrow()
                )
                found.update(got["trajectory_id"].to_pylist())
            rewarded = len(found)
        return BufferSizes(
            generation=g,
            query=len(query_ids),
            consumed=len([i for i in usable if i in consumed]),
            unusable=len(rows) - len(usable),
            support=support,
            rewarded_query=rewarded,
        )

    def query_ids(self) -> list[str]:
        """Ids in the query buffer, oldest first."""
        g = self.generation()
        consumed = self._consumed(g)
        return [r["id"] for r in self._candidates(g) if self._usable(r) and r["id"] not in consumed]

    def take(self, n: int, *, skip: Collection[str] = ()) -> list[Trajectory]:
        """The ``n`` oldest unconsumed trajectories of the current generation, in full,
        leaving out the ids in ``skip``.

        Taking does not consume: :meth:`mark_consumed` does, once a step has used them, so a
        step that crashes leaves its prompts in the buffer.
        """
        ids = [i for i in self.query_ids() if i not in skip][:n]
        if not ids:
            return []
        table = self._trajectories()
        rows = table.search().where(sql_in("id", ids)).limit(None).to_arrow().to_pylist()
        by_id = {r["id"]: TrajectoryStore._from_row(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def mark_consumed(self, trajectories: list[Trajectory], *, step: int, backend: str) -> None:
        if not trajectories:
            return
        now = utcnow()
        rows = [
            {
                "trajectory_id": t.id,
                "generation": t.generation,
                "step": step,
                "backend": backend,
                "created_at": now,
                "agent": self.agent,
            }
            for t in trajectories
        ]
        self._samples().add(pa.Table.from_pylist(rows, schema=train_samples_schema()))
