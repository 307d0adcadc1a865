"""The onnx backend: the packaged MiniLM as an ONNX Runtime graph built from its safetensors,
giving the numpy backend's (and so sentence-transformers') vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.bert_onnx import cached_graph_path
from metaclaw_core.config import HUB_MINILM, EmbeddingSettings
from metaclaw_core.embeddings import LoadedEmbedder, OnnxEmbedder, make_embedder, packaged_minilm
from metaclaw_core.errors import EmbedderError
from tests.core.test_numpy_embedder import varied_texts
from tests.support.engines import SharedEmbedder, make_settings


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache: Path) -> OnnxEmbedder:
    emb = make_embedder(EmbeddingSettings(backend="onnx"), cache_dir=onnx_cache)
    assert isinstance(emb, OnnxEmbedder)
    assert emb.wait_ready(180), emb.load_error
    return emb


def test_onnx_vectors_are_the_numpy_backends_on_varied_texts(
    onnx_embedder: OnnxEmbedder, minilm: LoadedEmbedder
) -> None:
    texts = varied_texts()  # "", one-word texts, past the 256-token limit, scripts, code
    ours = onnx_embedder.embed_documents(texts)  # batches padded to their longest text
    theirs = minilm.embed_documents(texts)
    cosines = (ours * theirs).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"{cosines.min():.6f} on {texts[worst]!r}"
    for text in ["", "a", "ok", "hello", "9:30"]:  # one query at a time, as the hot path does
        assert float(onnx_embedder.embed_query(text) @ minilm.embed_query(text)) >= 0.9999
    assert onnx_embedder.model_id == minilm.model_id == HUB_MINILM  # the same model


def test_the_built_graph_is_cached_and_reused(
    onnx_embedder: OnnxEmbedder, onnx_cache: Path
) -> None:
    model_dir = packaged_minilm()
    assert model_dir is not None
    path = cached_graph_path(onnx_cache, model_dir)
    assert path.is_file() and path.stat().st_size > 80_000_000
    built = path.stat().st_mtime_ns
    again = make_embedder(EmbeddingSettings(backend="onnx"), cache_dir=onnx_cache)
    assert again.wait_ready(120), again.load_error
    assert path.stat().st_mtime_ns == built  # read, not rebuilt
    text = "Write the date and time of the meeting in the log"
    assert float(again.embed_query(text) @ onnx_embedder.embed_query(text)) >= 0.99999


def test_onnx_on_a_model_it_cannot_run_says_why(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="'onnx' cannot run it"):
        make_embedder(EmbeddingSettings(backend="onnx", model=str(tmp_path)))


def test_a_library_embedded_by_numpy_is_served_by_onnx(
    minilm: LoadedEmbedder, onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    skill = Skill(
        name="iso-timestamps",
        description="Use when writing, logging or scheduling a date or time.",
        body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
    )
    with MetaClaw(
        make_settings(home, retrieval__min_similarity=0.0), plugins=[SharedEmbedder(minilm)]
    ) as first:
        assert first.wait_ready(60)
        first.add_skills(skill)
    settings: Any = make_settings(home, embedding__backend="onnx", retrieval__min_similarity=0.0)
    with MetaClaw(settings, plugins=[SharedEmbedder(onnx_embedder)]) as second:
        assert second.wait_ready(60)
        assert second.status()["embedder_backend"] == "onnx"
        assert second.library.stale_vectors() == []  # the same model: nothing to re-embed
        ctx = CallContext(
            messages=[Message(role="user", content="Log the review at 9:30 tomorrow")]
        )
        assert [s.skill.name for s in second.before_call(ctx).skills] == ["iso-timestamps"]


def test_an_engine_set_to_onnx_builds_its_graph_under_its_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with MetaClaw(make_settings(home, embedding__backend="onnx"), capture=False) as engine:
        assert engine.wait_ready(180), engine.embedder
        assert engine.status()["embedder_backend"] == "onnx"
    assert list((home / "cache" / "onnx").glob("bert-*.onnx"))
