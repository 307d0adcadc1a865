"""The classifier behind the meaning review: which risky intent, if any, a statement carries.

A softmax regression over the statement's sentence embedding and its polarity (warns
against / takes a safeguard away / puts one on / hides; see ``skills/reading.py``), with the
embedding repeated for statements that warn, so that "never do X" and "do X" can land on
different sides of the line. Classes: ``benign`` and one per risky category.

It is trained on the labelled sentences in ``intent_training/`` (hostile sentences per
category, benign ones on the same topics) and the exemplars in ``intent_exemplars.yaml``.
Weights for the default embedder (all-MiniLM-L6-v2) ship as ``intent_model.npz``, so no
training happens at run time; ``python -m metaclaw_core.plugins.intent_model`` retrains them
after the data changed. Another embedder, or exemplars added by plugins, train a model at
first use (a few seconds, off the hot path), cached per embedder and data for the process.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import weakref
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import yaml

from metaclaw_core.skills.reading import Statement, statement_of

if TYPE_CHECKING:
    from metaclaw_core.embeddings import Embedder

BENIGN = "benign"
HASHED = 2048
LEXICAL_WEIGHT = 1.0
_TOKEN = re.compile(r"[a-z0-9']+")
FLAGS = ("prohibited", "consent_removed", "consent_required", "concealed")
_PACKAGE = "metaclaw_core.plugins"
_WEIGHTS = "intent_model.npz"
Array = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TrainingData:
    """Labelled sentences: (label, text); label is ``benign`` or a risky category."""

    about: Mapping[str, str]
    examples: Sequence[tuple[str, str]]

    @property
    def classes(self) -> list[str]:
        return [BENIGN, *sorted({lab for lab, _ in self.examples if lab != BENIGN})]

    def digest(self) -> str:
        cached: str | None = self.__dict__.get("_digest")
        if cached is None:  # the data is frozen: hash it once (every review asks for it)
            h = hashlib.sha256()
            for label, text in self.examples:
                h.update(f"{label}\t{text}\n".encode())
            cached = h.hexdigest()[:16]
            object.__setattr__(self, "_digest", cached)
        return cached


def builtin_data() -> TrainingData:
    """The shipped training sentences and exemplars."""
    files = resources.files(_PACKAGE)
    raw: Any = yaml.safe_load(files.joinpath("intent_exemplars.yaml").read_text("utf-8"))
    about = {name: str(c.get("about") or name) for name, c in raw["categories"].items()}
    examples: list[tuple[str, str]] = []
    for name, c in raw["categories"].items():
        examples += [(name, str(t)) for t in c["exemplars"]]
    examples += [(BENIGN, str(t)) for t in raw["benign"]]
    folder = files.joinpath("intent_training")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".tsv"):
            continue
        # hostile*.tsv: "category<TAB>sentence"; benign*.tsv: "topic<TAB>sentence"
        fixed = BENIGN if entry.name.startswith("benign") else None
        for line in entry.read_text("utf-8").splitlines():
            if "\t" not in line:
                continue
            label, text = line.split("\t", 1)
            examples.append((fixed or label.strip(), text.strip()))
    return TrainingData(about, examples)


def words(texts: Sequence[str]) -> Array:
    """Hashed words and word pairs of each text, unit length (the lexical half)."""
    out = np.zeros((len(texts), HASHED), dtype=np.float32)
    for i, text in enumerate(texts):
        w = _TOKEN.findall(text.lower())
        for token in [*w, *(f"{a}_{b}" for a, b in itertools.pairwise(w))]:
            out[i, zlib.crc32(token.encode()) % HASHED] = 1.0
        norm = float(np.linalg.norm(out[i]))
        if norm:
            out[i] /= norm
    return out


def polarity(statements: Sequence[Statement]) -> Array:
    """The polarity flags of each statement (:data:`FLAGS`), 0 or 1."""
    return np.asarray(
        [[float(getattr(s, f)) for f in FLAGS] for s in statements], dtype=np.float32
    ).reshape(len(statements), len(FLAGS))


def softmax(z: Array) -> Array:
    """Row-wise class probabilities of logits ``z``."""
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: Array = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def features(vectors: Array, statements: Sequence[Statement]) -> Array:
    """Model input: the sentence embedding (meaning), hashed words and pairs (polarity and
    wording the embedding blurs: "no need to", "without asking"), and the polarity flags."""
    lexical = words([s.text for s in statements]) * LEXICAL_WEIGHT
    return np.hstack([vectors, lexical, polarity(statements)]).astype(np.float32)


@dataclass(frozen=True)
class IntentModel:
    """Softmax regression weights over :func:`features`."""

    classes: tuple[str, ...]
    weights: Array  # (features, classes)
    bias: Array  # (classes,)
    digest: str
    dimension: int

    def probabilities(self, x: Array) -> Array:
        return softmax(x @ self.weights + self.bias)

    def save(self, path: Any) -> None:
        np.savez_compressed(
            path,
            classes=np.asarray(self.classes),
            weights=self.weights,
            bias=self.bias,
            digest=np.asarray(self.digest),
            dimension=np.asarray(self.dimension),
        )

    @classmethod
    def load(cls, path: Any) -> IntentModel:
        with np.load(path, allow_pickle=False) as z:
            return cls(
                classes=tuple(str(c) for c in z["classes"]),
                weights=z["weights"].astype(np.float32),
                bias=z["bias"].astype(np.float32),
                digest=str(z["digest"]),
                dimension=int(z["dimension"]),
            )


def train(
    x: Array,
    labels: Sequence[str],
    classes: Sequence[str],
    *,
    l2: float = 3e-5,
    steps: int = 500,
    rate: float = 0.05,
) -> tuple[Array, Array]:
    """Class-balanced softmax regression by full-batch Adam (deterministic)."""
    index = {c: i for i, c in enumerate(classes)}
    y = np.asarray([index[lab] for lab in labels])
    n, d = x.shape
    k = len(classes)
    onehot = np.zeros((n, k), dtype=np.float32)
    onehot[np.arange(n), y] = 1.0
    counts = np.maximum(onehot.sum(axis=0), 1)
    # every class weighs the same within its side; benign weighs as much as all risks together
    class_w = np.where(np.arange(k) == 0, 0.5, 0.5 / max(k - 1, 1)) / counts
    sample_w = (onehot @ class_w).astype(np.float32)
    w = np.zeros((d, k), dtype=np.float32)
    b = np.zeros(k, dtype=np.float32)
    m_w, v_w = np.zeros_like(w), np.zeros_like(w)
    m_b, v_b = np.zeros_like(b), np.zeros_like(b)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        z = x @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) * sample_w[:, None]
        gw = x.T @ g + l2 * w
        gb = g.sum(axis=0)
        for param, grad, m, v in ((w, gw, m_w, v_w), (b, gb, m_b, v_b)):
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= rate * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
    return w, b


def fit(embedder: Embedder, data: TrainingData) -> IntentModel:
    """Embed the training sentences with ``embedder`` and train a model on them."""
    texts = [t for _, t in data.examples]
    statements = [statement_of(t) for t in texts]
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    x = features(vectors, statements)
    w, b = train(x, [lab for lab, _ in data.examples], data.classes)
    return IntentModel(tuple(data.classes), w, b, data.digest(), int(vectors.shape[1]))


def shipped() -> IntentModel | None:
    """The weights trained for the default embedder, if they match the shipped data."""
    try:
        with resources.as_file(resources.files(_PACKAGE).joinpath(_WEIGHTS)) as path:
            return IntentModel.load(path)
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None


_CACHE: weakref.WeakKeyDictionary[Any, dict[str, IntentModel]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def model_for(
    embedder: Embedder,
    data: TrainingData,
    *,
    default_embedder: bool,
    cache_dir: Path | None = None,
) -> IntentModel:
    """The model to score with: the shipped one when it fits the embedder, else one trained
    here once (kept in ``cache_dir`` under the data's digest and the embedder's name)."""
    digest = data.digest()
    with _LOCK:
        cached = _CACHE.get(embedder, {}).get(digest)
        if cached is not None:
            return cached
        model = shipped() if default_embedder else None
        if model is not None and (
            model.digest != digest or model.dimension != embedder.dimension()
        ):
            model = None
        path = None
        if model is None and cache_dir is not None:
            name = getattr(embedder, "model_name", type(embedder).__name__)
            tag = hashlib.sha256(str(name).encode()).hexdigest()[:12]
            path = cache_dir / f"intent-model-{digest}-{tag}.npz"
            if path.is_file():
                try:
                    model = IntentModel.load(path)
                except (OSError, KeyError, ValueError):
                    model = None
        if model is None:
            model = fit(embedder, data)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(".tmp.npz")
                    model.save(tmp)
                    tmp.replace(path)
                except OSError:
                    pass  # a cache: the next process trains again
        _CACHE.setdefault(embedder, {})[digest] = model
        return model


def main() -> None:  # pragma: no cover - a maintainer's command
    """Retrain the shipped weights with the packaged default embedder."""
    import argparse

    from metaclaw_core.config import Settings
    from metaclaw_core.plugins.embedder import metaclaw_make_embedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name(_WEIGHTS))
    args = parser.parse_args()
    embedder = metaclaw_make_embedder(settings=Settings())
    data = builtin_data()
    model = fit(embedder, data)
    model.save(args.out)
    print(f"wrote {args.out}: {len(data.examples)} sentences, classes {list(model.classes)}")


if __name__ == "__main__":  # pragma: no cover
    main()
