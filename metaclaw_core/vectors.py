"""The vector type and the :class:`Embedder` protocol (what the ``metaclaw_make_embedder``
hook returns); the built-in backends are in :mod:`metaclaw_core.embeddings`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors."""

    @property
    def ready(self) -> bool:
        """True once embedding will not wait for a model load."""
        ...

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until loaded (or failed); return ``ready``."""
        ...

    def dimension(self) -> int:
        """Vector length (may load the model)."""
        ...

    def embed_query(self, text: str) -> Vector:
        """One normalised vector for a query (cached)."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """A (len(texts), dim) matrix of normalised vectors."""
        ...
