"""What vetting checks may consult besides the skill: embeddings of it and of the live skills.

One :class:`VetContext` is passed to every ``metaclaw_vet_skill`` implementation. Live
skills' vectors come from the engine's in-memory snapshot when it holds the same version
(no re-embedding); anything else is embedded once and cached for the life of the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from metaclaw_core.models import ScoredSkill, Skill
from metaclaw_core.skills.index import SkillSnapshot, from_record
from metaclaw_core.vectors import Embedder


class VetContext:
    """Similarity look-ups for vetting (off the hot path; embeds at most once per text)."""

    def __init__(
        self,
        embedder: Embedder,
        snapshot: SkillSnapshot | None = None,
        *,
        exemplars: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.embedder = embedder
        self._snapshot = snapshot
        # risky-intent exemplars that plugins add (``metaclaw_review_exemplars``), by category
        self.exemplars: Mapping[str, Sequence[str]] = exemplars or {}
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}

    def _seed(self) -> None:
        snap, self._snapshot = self._snapshot, None  # lazily: most checks never need vectors
        if snap is not None and snap.matrix.size:
            # Temporary Skill objects from the records: the served snapshot keeps its skills
            # as plain tuples (see skills/index.py), and so it stays.
            for record, row in zip(snap.records, snap.matrix, strict=True):
                self._vectors.setdefault(from_record(record).embedding_text, row)

    def vectors(self, skills: list[Skill]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``skills`` as rows (embedding only the texts not seen yet)."""
        self._seed()
        texts = [s.embedding_text for s in skills]
        missing = sorted({t for t in texts if t not in self._vectors})
        if missing:
            for text, vec in zip(missing, self.embedder.embed_documents(missing), strict=True):
                self._vectors[text] = np.asarray(vec, dtype=np.float32)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._vectors[t] for t in texts])

    def vector(self, skill: Skill) -> npt.NDArray[np.float32]:
        self.vectors([skill])
        return self._vectors[skill.embedding_text]

    def closest(
        self, skill: Skill, live: list[Skill], k: int = 3, min_similarity: float = -1.0
    ) -> list[ScoredSkill]:
        """The ``k`` live skills most similar to ``skill`` (other names only), best first."""
        others = [s for s in live if s.name != skill.name]
        if not others or k <= 0:
            return []
        matrix = self.vectors(others)
        scores = matrix @ self.vector(skill)
        order = sorted(range(len(others)), key=lambda i: (-float(scores[i]), others[i].name))
        return [
            ScoredSkill(skill=others[i], score=float(scores[i]))
            for i in order[:k]
            if float(scores[i]) >= min_similarity
        ]
