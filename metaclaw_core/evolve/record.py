"""The ``evolutions`` table: one row per evolution that ran (dry runs write nothing).

It is how "since the last evolution" survives a restart: the failures and corrections an
evolution consumed are not shown to the evolver again, whatever came of them.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.store.db import Store, agent_filter

if TYPE_CHECKING:  # imported where first used: importing the engine stays free of pyarrow
    import pyarrow as pa

EVOLUTIONS = "evolutions"


def evolutions_schema() -> pa.Schema:
    import pyarrow as pa

    from metaclaw_core.store.db import TS

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("created_at", TS),
            pa.field("mode", pa.string()),
            pa.field("trigger", pa.string()),
            pa.field("failure_ids", pa.list_(pa.string())),
            pa.field("correction_keys", pa.list_(pa.string())),
            pa.field("generation", pa.int64()),
            pa.field("live", pa.list_(pa.string())),
            pa.field("pending", pa.list_(pa.string())),
            pa.field("rejected", pa.list_(pa.string())),
            pa.field("model", pa.string()),
            pa.field("report_json", pa.string()),
            pa.field("agent", pa.string()),  # whose failures (null before agents: default)
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


class EvolutionLog:
    """Append-only record of evolutions, and what they consumed."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _table(self, create: bool) -> Any:
        if create or self.store.has_table(EVOLUTIONS):
            table = self.store.table(EVOLUTIONS, evolutions_schema())
            self.store.refresh(EVOLUTIONS)
            return table
        return None

    def append(
        self,
        *,
        id: str,
        created_at: datetime,
        mode: str,
        trigger: str,
        failure_ids: list[str],
        correction_keys: list[str],
        generation: int | None,
        live: list[str],
        pending: list[str],
        rejected: list[str],
        model: str | None,
        report: dict[str, Any],
        agent: str = DEFAULT_AGENT,
    ) -> None:
        row = {
            "id": id,
            "created_at": created_at,
            "mode": mode,
            "trigger": trigger,
            "failure_ids": failure_ids,
            "correction_keys": correction_keys,
            "generation": generation,
            "live": live,
            "pending": pending,
            "rejected": rejected,
            "model": model,
            "report_json": json.dumps(report, default=str),
            "agent": agent,
        }
        import pyarrow as pa

        table = self._table(create=True)
        table.add(pa.Table.from_pylist([row], schema=table.schema))

    def consumed(self) -> tuple[set[str], set[str]]:
        """(failure ids, correction keys) used by earlier evolutions."""
        table = self._table(create=False)
        if table is None:
            return set(), set()
        data = table.search().select(["failure_ids", "correction_keys"]).limit(None).to_arrow()
        failures: set[str] = set()
        keys: set[str] = set()
        for ids in data["failure_ids"].to_pylist():
            failures.update(ids or [])
        for ks in data["correction_keys"].to_pylist():
            keys.update(ks or [])
        return failures, keys

    def recent(self, limit: int = 20, *, agent: str | None = None) -> list[dict[str, Any]]:
        """The newest evolutions (of ``agent`` only, when given), newest first."""
        table = self._table(create=False)
        if table is None:
            return []
        query = table.search()
        if agent is not None:
            query = query.where(agent_filter(agent))
        data = query.limit(None).to_arrow()
        if data.num_rows == 0:
            return []
        data = data.sort_by([("created_at", "descending")]).slice(0, limit)
        return list(data.to_pylist())
