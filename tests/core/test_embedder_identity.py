"""The skill library records which model made each vector and never mixes two models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from metaclaw_core import CallContext, EmbedderError, Message, MetaClaw, Skill, hookimpl
from metaclaw_core.config import HUB_MINILM
from metaclaw_core.store.db import SKILLS
from tests.support.engines import make_settings


class RenamedModel:
    """The session's MiniLM, claiming to be another model (as a changed setting would be)."""

    def __init__(self, inner: Any, model_id: str) -> None:
        self.inner = inner
        self.model_id = model_id

    @property
    def ready(self) -> bool:
        return bool(self.inner.ready)

    def wait_ready(self, timeout: float | None = None) -> bool:
        return bool(self.inner.wait_ready(timeout))

    def dimension(self) -> int:
        return int(self.inner.dimension())

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed_documents(texts)  # type: ignore[no-any-return]

    @hookimpl
    def metaclaw_make_embedder(self, settings: Any) -> Any:
        return self


def iso() -> Skill:
    return Skill(
        name="iso-timestamps",
        description="Use when writing, logging or scheduling a date or time.",
        body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
    )


def call(engine: MetaClaw) -> Any:
    return engine.before_call(
        CallContext(messages=[Message(role="user", content="Log the review at 9:30 tomorrow")])
    )


def test_each_skill_row_records_the_model_that_made_its_vector(
    engine: MetaClaw,
) -> None:
    engine.add_skills(iso())
    rows = engine.store.table(SKILLS).to_arrow().to_pylist()
    assert [r["embedder"] for r in rows] == [HUB_MINILM]


def test_a_library_made_by_another_model_is_refused_not_mixed(minilm: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    # the default embedder: MiniLM
    with MetaClaw(make_settings(home, retrieval__min_similarity=0.0)) as first:
        assert first.wait_ready(60)
        first.add_skills(iso())
        assert [s.skill.name for s in call(first).skills] == ["iso-timestamps"]

    other = RenamedModel(minilm, "sentence-transformers/all-mpnet-base-v2")
    with MetaClaw(make_settings(home, retrieval__min_similarity=0.0), plugins=[other]) as second:
        assert second.wait_ready(60)
        assert call(second).skills == []  # nothing served from the other model's vectors
        assert "all-MiniLM-L6-v2" in (second.faults.last_error or "")
        with pytest.raises(EmbedderError, match="METACLAW_EMBEDDING__MODEL"):
            second.add_skills(
                Skill(name="cite-paths", description="When citing files", body="Cite paths.")
            )
        with pytest.raises(EmbedderError, match="vectors were made by"):
            second.library.snapshot()
    # the refused write left the store as it was: one skill, one generation
    with MetaClaw(make_settings(home, retrieval__min_similarity=0.0)) as third:
        assert third.wait_ready(60)
        assert third.library.current_generation() == 1
        assert [s.name for s in third.library.live()] == ["iso-timestamps"]
