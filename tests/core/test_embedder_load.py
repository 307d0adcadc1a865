"""Loading the embedder: the collector is frozen once the model's objects exist."""

import gc
from typing import Any

import pytest

from metaclaw_core import embeddings
from metaclaw_core.config import EmbeddingSettings
from metaclaw_core.embeddings import SentenceTransformerEmbedder


@pytest.mark.parametrize("freeze", [True, False])
def test_model_load_freezes_the_collector_when_asked(
    monkeypatch: pytest.MonkeyPatch, freeze: bool
) -> None:
    import sentence_transformers

    calls: list[str] = []

    def fake_model(name: str, device: str) -> Any:
        calls.append("load")
        return object()

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", fake_model)
    monkeypatch.setattr(embeddings, "freeze_gc", lambda: calls.append("freeze"))
    emb = SentenceTransformerEmbedder(EmbeddingSettings(model="fake", freeze_gc=freeze))
    assert emb.wait_ready(30)
    assert calls == (["load", "freeze"] if freeze else ["load"])


def test_freeze_gc_moves_the_live_objects_out_of_later_collections() -> None:
    embeddings.freeze_gc()
    assert gc.get_freeze_count() > 0
    assert gc.get_count()[0] < 700  # the collection before the freeze reset the young count
