"""The support set: failed trajectories, read from the store, that the evolver learns from.

A trajectory is a failure when the host reported an error or the mean of its rewards is at
most 0 (the rule of :mod:`metaclaw_core.scoring`). It belongs to the support set of the
generation it was produced under. Explicit corrections are rewards with source
``correction`` whose detail says what should have been done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.models import Reward, Trajectory
from metaclaw_core.scoring import is_failure as failed
from metaclaw_core.scoring import mean_reward
from metaclaw_core.store.db import REWARDS, TRAJECTORIES, Store, agent_filter, sql_in
from metaclaw_core.store.trajectories import TrajectoryStore

CORRECTION = "correction"
_REF_COLUMNS = ["id", "created_at", "generation", "error", "query", "session_id"]


@dataclass
class Failure:
    """One failed trajectory with its rewards (and, once loaded, its full record)."""

    id: str
    created_at: datetime
    generation: int
    error: str | None
    query: str = ""
    rewards: list[Reward] = field(default_factory=list)
    trajectory: Trajectory | None = None
    vector: npt.NDArray[np.float32] | None = None

    @property
    def reward(self) -> float | None:
        return mean_reward(r.value for r in self.rewards)

    @property
    def corrections(self) -> list[Reward]:
        return [r for r in self.rewards if r.source == CORRECTION and (r.detail or "").strip()]


def is_failure(error: str | None, rewards: list[Reward]) -> bool:
    """The rule of :func:`metaclaw_core.scoring.is_failure`, over :class:`Reward` objects."""
    return failed([r.value for r in rewards], error)


def correction_key(reward: Reward) -> str:
    return f"{reward.trajectory_id}@{reward.created_at.isoformat()}"


class SupportSet:
    """Queries for failures and corrections (reads only; off the hot path)."""

    def __init__(
        self, store: Store, trajectories: TrajectoryStore, *, agent: str | None = None
    ) -> None:
        self.store = store
        self.trajectories = trajectories
        self.agent = agent  # only this agent's failures (None: every agent's)

    def _table(self, name: str) -> Any:
        if not self.store.has_table(name):
            return None
        table = self.store.table(name)
        self.store.refresh(name)
        return table

    def _rewards(self, where: str) -> list[Reward]:
        table = self._table(REWARDS)
        if table is None:
            return []
        rows = table.search().where(where).limit(None).to_arrow().to_pylist()
        return [Reward.model_validate(r) for r in rows]

    def _refs(self, where: str) -> list[dict[str, Any]]:
        table = self._table(TRAJECTORIES)
        if table is None:
            return []
        if self.agent is not None:
            if "agent" in table.schema.names:
                where = f"({where}) AND {agent_filter(self.agent)}"
            elif self.agent != DEFAULT_AGENT:
                return []  # a table from before agents holds only the default agent's
        data = table.search().where(where).select(_REF_COLUMNS).limit(None).to_arrow()
        return list(data.to_pylist())

    def failures(
        self,
        *,
        ids: list[str] | None = None,
        generation: int | None = None,
        exclude: set[str] | frozenset[str] = frozenset(),
        limit: int = 200,
    ) -> list[Failure]:
        """Failures, newest first: of ``generation`` (default any), among ``ids`` (default
        all), minus ``exclude``; at most ``limit``. Rewards are attached; records are not."""
        scope = f" AND {sql_in('id', ids)}" if ids else ""
        if ids is not None and not ids:
            return []
        if generation is not None:
            scope += f" AND generation = {int(generation)}"
        refs = {r["id"]: r for r in self._refs(f"error IS NOT NULL{scope}")}
        bad = self._rewards("value <= 0" + (f" AND {sql_in('trajectory_id', ids)}" if ids else ""))
        maybe = sorted({r.trajectory_id for r in bad} - set(refs) - set(exclude))
        for i in range(0, len(maybe), 500):
            chunk = maybe[i : i + 500]
            for r in self._refs(f"{sql_in('id', chunk)}{scope}"):
                refs[r["id"]] = r
        for tid in list(refs):
            if tid in exclude:
                del refs[tid]
        rewards = self.trajectories.rewards_for(list(refs)) if refs else {}
        out = [
            Failure(
                id=r["id"],
                created_at=r["created_at"],
                generation=int(r["generation"] or 0),
                error=r["error"],
                query=r["query"] or "",
                rewards=rewards.get(r["id"], []),
            )
            for r in refs.values()
        ]
        out = [f for f in out if is_failure(f.error, f.rewards)]
        out.sort(key=lambda f: f.created_at, reverse=True)
        return out[:limit]

    def corrections(
        self, *, ids: list[str] | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> list[Reward]:
        """Correction rewards (oldest first) not in ``exclude`` (keys from correction_key)."""
        where = f"source = '{CORRECTION}'"
        if ids:
            where += f" AND {sql_in('trajectory_id', ids)}"
        found = [
            r
            for r in self._rewards(where)
            if (r.detail or "").strip() and correction_key(r) not in exclude
        ]
        return sorted(found, key=lambda r: r.created_at)

    def _rows(self, ids: list[str], columns: list[str] | None = None) -> dict[str, Any]:
        table = self._table(TRAJECTORIES)
        if table is None or not ids:
            return {}
        out: dict[str, Any] = {}
        for i in range(0, len(ids), 500):
            q = table.search().where(sql_in("id", ids[i : i + 500]))
            if columns:
                q = q.select(columns)
            out.update({r["id"]: r for r in q.limit(None).to_arrow().to_pylist()})
        return out

    def attach_vectors(self, failures: list[Failure]) -> list[Failure]:
        """Attach each failure's stored task vector (None if the call was not embedded)."""
        rows = self._rows([f.id for f in failures], ["id", "vector"])
        for f in failures:
            vec = rows.get(f.id, {}).get("vector")
            if vec is not None and any(vec):
                f.vector = np.asarray(vec, dtype=np.float32)
        return failures

    def load(self, failures: list[Failure]) -> list[Failure]:
        """Attach the full trajectory (messages, output, rewards) to each failure; failures
        whose record is gone are dropped."""
        rows = self._rows([f.id for f in failures])
        for f in failures:
            row = rows.get(f.id)
            if row is not None:
                f.trajectory = TrajectoryStore._from_row(row)
                f.trajectory.rewards = list(f.rewards)
        return [f for f in failures if f.trajectory is not None]

    def trajectory(self, trajectory_id: str) -> Trajectory | None:
        return self.trajectories.get(trajectory_id)
