"""Built-in embedder: the packaged all-MiniLM-L6-v2 in numpy by default, or sentence-transformers
(``embedding.backend``; see :func:`metaclaw_core.embeddings.make_embedder`)."""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.embeddings import Embedder, make_embedder
from metaclaw_core.hookspecs import hookimpl


@hookimpl(trylast=True)
def metaclaw_make_embedder(settings: Settings) -> Embedder:
    return make_embedder(settings.embedding, cache_dir=settings.home / "cache")
