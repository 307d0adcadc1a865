"""The ``skill_reviews`` table: why a skill is held for a person (one row per held version).

A quarantined skill is a pending row of the ``skills`` table (never live) plus a row here
with the findings that held it: the category, the sentence and the score, as a person needs
them to decide (`metaclaw skills pending`, the dashboard, ``GET /v1/skills/pending``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from metaclaw_core.skills.verdict import Finding, Review
from metaclaw_core.store.db import Store, sql_in, timestamp_type

if TYPE_CHECKING:
    import pyarrow as pa

SKILL_REVIEWS = "skill_reviews"


def skill_reviews_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("row_id", pa.string(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("verdict", pa.string()),
            pa.field("findings_json", pa.string()),
            pa.field("created_at", timestamp_type()),
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


class ReviewLog:
    """Findings of held skill versions, by skill row id."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, rows: list[tuple[str, str, Review]]) -> None:
        """Write (row_id, name, review) for each held version."""
        if not rows:
            return
        import pyarrow as pa

        table = self.store.table(SKILL_REVIEWS, skill_reviews_schema())
        now = datetime.now(UTC)
        data = [
            {
                "row_id": row_id,
                "name": name,
                "verdict": review.verdict,
                "findings_json": json.dumps([f.to_json() for f in review.findings]),
                "created_at": now,
            }
            for row_id, name, review in rows
        ]
        table.add(pa.Table.from_pylist(data, schema=table.schema))

    def of(self, row_ids: list[str]) -> dict[str, Review]:
        """The review of each of ``row_ids`` that has one."""
        if not row_ids or not self.store.has_table(SKILL_REVIEWS):
            return {}
        table = self.store.table(SKILL_REVIEWS)
        self.store.refresh(SKILL_REVIEWS)
        rows: list[dict[str, Any]] = (
            table.search().where(sql_in("row_id", row_ids)).limit(None).to_arrow().to_pylist()
        )
        out: dict[str, Review] = {}
        for r in rows:
            try:
                found = [Finding.from_json(f) for f in json.loads(r["findings_json"] or "[]")]
            except (ValueError, TypeError):
                found = [Finding("quarantine", "the stored review could not be read", "store")]
            out[r["row_id"]] = Review(found)
        return out
