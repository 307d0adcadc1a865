"""The per-call retrieval index: one immutable generation of live skills as a matrix.

A snapshot is built off the hot path and swapped in by reference, so a reader sees either the
old library or the new one, never half of each; top-k is one matrix-vector product.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from metaclaw_core.models import ScoredSkill, Skill


def estimate_tokens(text: str) -> int:
    """A cheap, tokenizer-free estimate (≈4 characters per token for English)."""
    return len(text) // 4 + 1


@dataclass(frozen=True)
class SkillSnapshot:
    """The live skills of one generation, with their unit vectors as rows of ``matrix``."""

    generation: int
    skills: tuple[Skill, ...] = ()
    matrix: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )

    def __post_init__(self) -> None:
        if self.matrix.shape[0] != len(self.skills):
            raise ValueError("snapshot matrix rows must match its skills")
        self.matrix.setflags(write=False)

    def __len__(self) -> int:
        return len(self.skills)

    @classmethod
    def build(
        cls, generation: int, skills: list[Skill], vectors: list[npt.NDArray[np.float32] | None]
    ) -> SkillSnapshot:
        """Keep the skills that have a vector; normalise rows (defensive: stored ones are)."""
        keep = [(s, v) for s, v in zip(skills, vectors, strict=True) if v is not None]
        if not keep:
            return cls(generation=generation)
        matrix = np.vstack([np.asarray(v, dtype=np.float32) for _, v in keep])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        matrix = np.ascontiguousarray(matrix / norms, dtype=np.float32)
        return cls(generation=generation, skills=tuple(s for s, _ in keep), matrix=matrix)

    def top_k(
        self, query_vector: npt.NDArray[np.float32], k: int, min_similarity: float
    ) -> list[ScoredSkill]:
        """The ``k`` most similar skills at or above ``min_similarity``, best first.

        Ties break by name so equal scores always give the same order.
        """
        n = len(self.skills)
        if n == 0 or k <= 0 or self.matrix.shape[1] != query_vector.shape[0]:
            return []
        scores = self.matrix @ query_vector
        idx = np.argpartition(-scores, k - 1)[:k] if n > k else np.arange(n)
        chosen = sorted(
            (i for i in idx.tolist() if scores[i] >= min_similarity),
            key=lambda i: (-float(scores[i]), self.skills[i].name),
        )
        return [ScoredSkill(skill=self.skills[i], score=float(scores[i])) for i in chosen]
