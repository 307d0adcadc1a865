"""Built-in embedder: sentence-transformers (the packaged all-MiniLM-L6-v2 by default)."""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.embeddings import Embedder, SentenceTransformerEmbedder
from metaclaw_core.hookspecs import hookimpl


@hookimpl(trylast=True)
def metaclaw_make_embedder(settings: Settings) -> Embedder:
    return SentenceTransformerEmbedder(settings.embedding)
