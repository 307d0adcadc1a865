"""The per-call retrieval index: one immutable generation of live skills as a matrix.

A snapshot is built off the hot path and swapped in by reference, so a reader sees either the
old library or the new one, never half of each; top-k is one matrix-vector product.

Skills are held as tuples of strings, not as model objects: tuples of atoms are invisible to
Python's cyclic garbage collector, while 100k pydantic objects made every full collection
(triggered by the host's own allocations) scan them, which slowed ``before_call`` measurably
at 10k skills (docs/benchmarks.md). Skill objects are built only for the few that are returned.

The product runs on the calling thread only. numpy's ``matrix @ vector`` hands large matrices
to OpenBLAS's thread pool, whose spinning workers then compete with the next query embedding
for the same cores, and on a loaded machine a two-thread product waits for whichever thread
the kernel descheduled. ``np.einsum`` is one thread, releases the GIL, and streams a large
matrix from memory faster than single-threaded OpenBLAS does. Small matrices, which OpenBLAS
keeps on one thread anyway, still use ``matmul``, faster than ``einsum`` in cache. The numbers
are in docs/benchmarks.md (``benchmarks/hot_path.py``).

The answer for a query vector is remembered per snapshot (``RESULT_CACHE`` entries): a repeated
task at the same generation costs a dictionary look-up instead of a pass over the matrix.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from metaclaw_core.models import ScoredSkill, Skill

SMALL_PRODUCT = 400_000
"""Matrices of at most this many elements are scored with ``matmul``: OpenBLAS (0.3.31, the
one numpy ships) runs a matrix-vector product on one thread below 460,800 elements."""

RESULT_CACHE = 1024
"""Top-k answers remembered per snapshot (keyed by query vector, k and floor)."""

_TIE_LIMIT = 256  # ties at the k-th score that are resolved by name (beyond: by position)


def estimate_tokens(text: str) -> int:
    """A cheap, tokenizer-free estimate (≈4 characters per token for English)."""
    return len(text) // 4 + 1


# (name, description, body, category, source, provenance, generation_added, created_at)
SkillRecord = tuple[str, str, str, str | None, str, tuple[str, ...], int | None, datetime]


def to_record(s: Skill) -> SkillRecord:
    return (
        s.name,
        s.description,
        s.body,
        s.category,
        s.source,
        tuple(s.provenance),
        s.generation_added,
        s.created_at,
    )


def from_record(r: SkillRecord) -> Skill:
    return Skill.model_construct(
        name=r[0],
        description=r[1],
        body=r[2],
        category=r[3],
        source=r[4],
        provenance=list(r[5]),
        status="active",
        generation_added=r[6],
        generation_retired=None,
        created_at=r[7],
    )


@dataclass(frozen=True)
class SkillSnapshot:
    """The live skills of one generation, with their unit vectors as rows of ``matrix``."""

    generation: int
    records: tuple[SkillRecord, ...] = ()
    matrix: npt.NDArray[np.float32] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )
    _materialised: dict[int, Skill] = field(default_factory=dict, repr=False, compare=False)
    _results: dict[tuple[bytes, int, float], tuple[ScoredSkill, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _results_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.matrix.shape[0] != len(self.records):
            raise ValueError("snapshot matrix rows must match its skills")
        self.matrix.setflags(write=False)

    def __len__(self) -> int:
        return len(self.records)

    def skill(self, i: int) -> Skill:
        """The i-th skill as a model object (built once, then reused)."""
        s = self._materialised.get(i)
        if s is None:
            s = from_record(self.records[i])
            self._materialised[i] = s
        return s

    @property
    def skills(self) -> tuple[Skill, ...]:
        """All skills as model objects (O(n): for tools and tests, not for the hot path)."""
        return tuple(self.skill(i) for i in range(len(self.records)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r[0] for r in self.records)

    @classmethod
    def build(
        cls,
        generation: int,
        skills: list[Skill],
        vectors: list[npt.NDArray[np.float32] | None] | npt.NDArray[np.float32],
    ) -> SkillSnapshot:
        """Keep the skills that have a vector; normalise rows (defensive: stored ones are)."""
        keep = [(s, v) for s, v in zip(skills, vectors, strict=True) if v is not None]
        if not keep:
            return cls(generation=generation)
        matrix = np.vstack([np.asarray(v, dtype=np.float32) for _, v in keep])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        matrix = np.ascontiguousarray(matrix / norms, dtype=np.float32)
        return cls(
            generation=generation, records=tuple(to_record(s) for s, _ in keep), matrix=matrix
        )

    def scores(self, query_vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine similarity of every row to a unit query (float32, on this thread only)."""
        q = np.ascontiguousarray(query_vector, dtype=np.float32)
        if self.matrix.size <= SMALL_PRODUCT:
            small: npt.NDArray[np.float32] = self.matrix @ q
            return small
        out: npt.NDArray[np.float32] = np.einsum("ij,j->i", self.matrix, q)
        return out

    def top_k(
        self, query_vector: npt.NDArray[np.float32], k: int, min_similarity: float
    ) -> list[ScoredSkill]:
        """The ``k`` most similar skills at or above ``min_similarity``, best first.

        Ties break by name so equal scores always give the same order. The answer is
        remembered for this snapshot (the same query vector again costs a look-up); the
        returned list is new, its items are shared.
        """
        n = len(self.records)
        if n == 0 or k <= 0 or self.matrix.shape[1] != query_vector.shape[0]:
            return []
        q = np.ascontiguousarray(query_vector, dtype=np.float32)
        key = (q.tobytes(), k, float(min_similarity))
        hit = self._results.get(key)
        if hit is not None:
            return list(hit)
        found = tuple(
            ScoredSkill(skill=self.skill(i), score=s)
            for i, s in self._search(q, min(k, n), min_similarity)
        )
        with self._results_lock:
            self._results[key] = found
            while len(self._results) > RESULT_CACHE:
                del self._results[next(iter(self._results))]
        return list(found)

    def _search(self, q: npt.NDArray[np.float32], k: int, floor: float) -> list[tuple[int, float]]:
        n = len(self.records)
        scores = self.scores(q)
        idx = np.argpartition(-scores, k - 1)[:k] if n > k else np.arange(n)
        if n > k:
            # Every row tied with the k-th score competes, so ties resolve by name.
            tied = np.flatnonzero(scores >= scores[idx].min())
            if len(tied) <= k + _TIE_LIMIT:
                idx = tied
        names = self.records
        pairs = sorted(
            ((i, s) for i, s in zip(idx.tolist(), scores[idx].tolist(), strict=True) if s >= floor),
            key=lambda p: (-p[1], names[p[0]][0]),
        )
        return pairs[:k]
