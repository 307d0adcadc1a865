"""Vectors of two models are never served together: the store records which model made each
vector (skills and captured queries), and ``reembed`` migrates a store to the configured one.

Real parts throughout: embedded LanceDB in a temp dir, the real MiniLM, the real CLI.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.cli import app
from metaclaw_core.config import HUB_MINILM
from metaclaw_core.store.db import GENERATIONS, SKILLS, TRAJECTORIES
from tests.core.test_embedder_identity import RenamedModel
from tests.support.engines import SharedEmbedder, make_settings

OTHER = "sentence-transformers/all-mpnet-base-v2"
TASK = "Log the review at 9:30 tomorrow"


def iso() -> Skill:
    return Skill(
        name="iso-timestamps",
        description="Use when writing, logging or scheduling a date or time.",
        body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
    )


def cite() -> Skill:
    return Skill(
        name="cite-paths",
        description="Use when referring to files in an answer.",
        body="Cite files by their path relative to the repository root.",
    )


def served(engine: MetaClaw, text: str = TASK) -> list[str]:
    inj = engine.before_call(CallContext(messages=[Message(role="user", content=text)]))
    return [s.skill.name for s in inj.skills]


def capture(engine: MetaClaw, text: str) -> str:
    ctx = CallContext(messages=[Message(role="user", content=text)])
    inj = engine.before_call(ctx)
    tid = engine.after_call(ctx, "done", injection=inj)
    assert tid is not None
    return tid


def rows(engine: MetaClaw, table: str) -> list[dict[str, Any]]:
    engine.store.refresh(table)
    return engine.store.table(table).to_arrow().to_pylist()  # type: ignore[no-any-return]


def test_a_store_of_another_model_is_reembedded_and_serves_again(
    minilm: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    other = RenamedModel(minilm, OTHER)
    with MetaClaw(make_settings(home, retrieval__min_similarity=0.0), plugins=[other]) as first:
        assert first.wait_ready(60)
        first.add_skills([iso(), cite()])
        tids = [capture(first, TASK), capture(first, "Where is the config parser?")]
        assert first.flush(30)
        assert {r["embedder"] for r in rows(first, TRAJECTORIES)} == {OTHER}

    settings = make_settings(home, retrieval__min_similarity=0.0)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as second:
        assert second.wait_ready(60)
        assert served(second) == []  # refused, not mixed
        assert second.library.stale_vectors() == ["cite-paths", "iso-timestamps"]
        assert second.trajectories.stale_vectors(HUB_MINILM) == 2
        done = second.reembed()
        assert done == {
            "embedder": HUB_MINILM,
            "generation": 2,
            "skills": ["cite-paths", "iso-timestamps"],
            "trajectories": 2,
        }
        # retrieval works again, from MiniLM's vectors
        assert served(second)[0] == "iso-timestamps"
        assert second.library.stale_vectors() == []
        live = {s.name: s for s in second.library.live()}
        assert live["iso-timestamps"].body == iso().body  # the same skill, a new vector
        # the captured queries: same rows, MiniLM's vectors of their query text
        traj = {r["id"]: r for r in rows(second, TRAJECTORIES)}
        assert sorted(traj) == sorted(tids)
        for r in traj.values():
            assert r["embedder"] == HUB_MINILM
            want = minilm.embed_documents([r["query"]])[0]
            assert float(np.dot(np.asarray(r["vector"], dtype=np.float32), want)) > 0.9999
        assert second.trajectories.stale_vectors(HUB_MINILM) == 0
        # a second run has nothing left to do
        again = second.reembed()
        assert again["skills"] == [] and again["trajectories"] == 0
        assert again["generation"] == 2


def _write_old_store(home: Path, minilm: Any) -> None:
    """A store as an older metaclaw wrote it: no ``embedder`` column in either table."""
    import lancedb
    import pyarrow as pa

    from metaclaw_core.store.db import generations_schema, skills_schema, trajectories_schema

    def without_embedder(schema: pa.Schema) -> pa.Schema:
        return schema.remove(schema.get_field_index("embedder"))

    db = lancedb.connect(str(home / "db"))
    now = datetime(2026, 11, 1, tzinfo=UTC)
    skill = iso()
    vec = minilm.embed_documents([skill.embedding_text])[0].tolist()
    skills = db.create_table(SKILLS, schema=without_embedder(skills_schema(384)))
    skills.add(
        pa.Table.from_pylist(
            [
                {
                    "row_id": "iso-timestamps@old",
                    "name": skill.name,
                    "description": skill.description,
                    "body": skill.body,
                    "category": None,
                    "source": "manual",
                    "provenance": [],
                    "status": "active",
                    "generation_added": 1,
                    "generation_retired": None,
                    "created_at": now,
                    "vector": vec,
                }
            ],
            schema=skills.schema,
        )
    )
    gens = db.create_table(GENERATIONS, schema=generations_schema())
    gens.add(
        pa.Table.from_pylist(
            [
                {
                    "number": 1,
                    "created_at": now,
                    "reason": "import",
                    "added": [skill.name],
                    "retired": [],
                    "updated": [],
                    "versions": ["iso-timestamps@old"],
                    "writer": "old",
                }
            ],
            schema=gens.schema,
        )
    )
    traj = db.create_table(TRAJECTORIES, schema=without_embedder(trajectories_schema(384)))
    qvec = minilm.embed_query(TASK).tolist()
    traj.add(
        pa.Table.from_pylist(
            [
                {
                    "id": f"old-{i}",
                    "created_at": now,
                    "generation": 1,
                    "query": TASK,
                    "messages_json": "[]",
                    "output_json": "{}",
                    "output_text": "ok",
                    "injected_skills": [skill.name],
                    "outcome": "unknown",
                    "truncated": False,
                    "metadata_json": "{}",
                    "vector": qvec if i < 2 else None,
                }
                for i in range(3)
            ],
            schema=traj.schema,
        )
    )


def test_an_old_store_without_the_embedder_column_migrates_and_loses_nothing(
    minilm: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    _write_old_store(home, minilm)
    settings = make_settings(home, retrieval__min_similarity=0.0)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.wait_ready(60)
        # served as before (an old row does not say, and old stores were all MiniLM)
        assert served(engine) == ["iso-timestamps"]
        # a new capture adds the column to the old table; the old rows stay
        new = capture(engine, "Where is the config parser?")
        assert engine.flush(30)
        traj = {r["id"]: r for r in rows(engine, TRAJECTORIES)}
        assert sorted(traj) == sorted(["old-0", "old-1", "old-2", new])
        assert traj[new]["embedder"] == HUB_MINILM
        assert traj["old-0"]["embedder"] is None
        assert engine.library.stale_vectors() == ["iso-timestamps"]
        assert engine.trajectories.stale_vectors(HUB_MINILM) == 2  # the third has no vector

    # the migration, as a user runs it
    result = CliRunner().invoke(
        app, ["--home", str(home), "skills", "reembed", "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "embedder": HUB_MINILM,
        "generation": 2,
        "skills": ["iso-timestamps"],
        "trajectories": 2,
    }
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.wait_ready(60)
        assert served(engine) == ["iso-timestamps"]
        skill_rows = rows(engine, SKILLS)
        assert len(skill_rows) == 2  # the old version is kept (history), the new one is live
        live = engine.library.live()
        assert [s.body for s in live] == [iso().body]
        traj = {r["id"]: r for r in rows(engine, TRAJECTORIES)}
        assert len(traj) == 4
        assert traj["old-0"]["embedder"] == HUB_MINILM and traj["old-1"]["embedder"] == HUB_MINILM
        assert traj["old-2"]["vector"] is None and traj["old-2"]["embedder"] is None
        assert [g.reason for g in engine.library.history()] == [
            "import",
            f"re-embedded with {HUB_MINILM}",
        ]


def test_a_serving_host_cannot_reembed_the_shared_library(minilm: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    other = RenamedModel(minilm, OTHER)
    with MetaClaw(make_settings(home), plugins=[other]) as first:
        assert first.wait_ready(60)
        first.add_skills(iso())
    settings = make_settings(home, role="serving")
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as serving:
        assert serving.wait_ready(60)
        with pytest.raises(Exception, match="serving host"):
            serving.reembed()
        assert serving.library.current_generation() == 1
