"""The BERT sentence encoder of :mod:`metaclaw_core.bert_numpy` as an ONNX Runtime graph.

The graph is built here from the same safetensors weights (no torch, no export step, nothing
downloaded), with ONNX Runtime's fused transformer kernels: ``Attention`` (Q, K and V in one
product, the softmax and the context in one kernel), ``SkipLayerNormalization`` (residual,
bias and layer norm) and ``BiasGelu`` (exact erf GELU), then the mean pooling over the mask.
It needs the ``onnx`` package to build and ``onnxruntime`` to run (the ``onnx`` extra); the
vectors are the numpy encoder's to float32 rounding (tested: cosine >= 0.9999).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.bert_numpy import NumpyBert, check_model_dir, load_tokenizer, padded_batches
from metaclaw_core.errors import EmbedderError

F32 = npt.NDArray[np.float32]
OPSET = 17
MS = "com.microsoft"
BUILD = 1  # bump when build_graph changes: cached graphs of another build are not used


def build_graph(bert: NumpyBert) -> bytes:
    """The serialised ONNX model of ``bert``'s encoder and mean pooling.

    Inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens, right-padded);
    output ``pooled`` (float32, batch x hidden), not normalised.
    """
    from onnx import TensorProto, helper, numpy_helper

    inits: list[Any] = []
    nodes: list[Any] = []

    def init(name: str, value: npt.NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    eps = float(bert.eps)

    def skip_norm(
        y: str,
        skip: str,
        p: str,
        ln: str,
        gamma: npt.NDArray[Any],
        beta: npt.NDArray[Any],
        bias_name: str,
        bias: npt.NDArray[Any],
        out: str,
    ) -> str:
        """LayerNorm(y + bias + skip): the residual step after attention and after the FFN."""
        inputs = [y, skip, init(p + ln + "_g", gamma), init(p + ln + "_b", beta)]
        inputs.append(init(p + bias_name, bias))
        return node("SkipLayerNormalization", inputs, p + out, domain=MS, epsilon=eps)

    # token type 0 everywhere: its embedding is folded into the position table
    position = (bert.position + bert.token_type0).astype(np.float32)
    ids = node("Cast", ["input_ids"], "ids32", to=TensorProto.INT32)
    mask = node("Cast", ["attention_mask"], "mask32", to=TensorProto.INT32)
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [
                ids,
                "",
                init("word", np.asarray(bert.word, dtype=np.float32)),
                init("position", position),
                "",
                init("emb_ln_g", bert.emb_ln[0]),
                init("emb_ln_b", bert.emb_ln[1]),
                mask,
            ],
            ["x0", "mask_index"],
            domain=MS,
            epsilon=eps,
        )
    )
    x = "x0"
    for i, layer in enumerate(bert.layers):
        p = f"l{i}_"
        attn = node(
            "Attention",
            [x, init(p + "qkv_w", layer.qkv_w), init(p + "qkv_b", layer.qkv_b), "mask_index"],
            p + "attn",
            domain=MS,
            num_heads=bert.heads,
        )
        proj = node("MatMul", [attn, init(p + "out_w", layer.out_w)], p + "proj")
        x = skip_norm(proj, x, p, "ln1", layer.ln1_g, layer.ln1_b, "out_b", layer.out_b, "x1")
        up = node("MatMul", [x, init(p + "up_w", layer.up_w)], p + "up")
        act = node("BiasGelu", [up, init(p + "up_b", layer.up_b)], p + "gelu", domain=MS)
        down = node("MatMul", [act, init(p + "down_w", layer.down_w)], p + "down")
        x = skip_norm(down, x, p, "ln2", layer.ln2_g, layer.ln2_b, "down_b", layer.down_b, "x2")
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    mask3 = node("Unsqueeze", [maskf, init("axis2", np.array([2], dtype=np.int64))], "mask3")
    summed = node(
        "ReduceSum",
        [node("Mul", [x, mask3], "masked"), init("axis1", np.array([1], dtype=np.int64))],
        "summed",
        keepdims=0,
    )
    counts = node("ReduceSum", [maskf, "axis1"], "counts", keepdims=1)
    counts = node("Max", [counts, init("tiny", np.array([1e-9], dtype=np.float32))], "counts1")
    node("Div", [summed, counts], "pooled")
    graph = helper.make_graph(
        nodes,
        "metaclaw-bert",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", bert.hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="metaclaw-core",
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


def cached_graph_path(cache_dir: Path, model_dir: Path) -> Path:
    """Where the graph built from ``model_dir`` is kept: named by the weights file (path,
    size, modification time) and the builder's version, so a changed model is rebuilt."""
    weights = (model_dir / "model.safetensors").resolve()
    st = weights.stat()
    key = f"{weights}|{st.st_size}|{st.st_mtime_ns}|{BUILD}".encode()
    return cache_dir / "onnx" / f"bert-{hashlib.sha256(key).hexdigest()[:16]}.onnx"


def _require_onnx() -> None:
    """Raise a clear error where the ``onnx`` package, which builds graphs, is missing."""
    try:
        import onnx  # noqa: F401  (only the build needs it)
    except ImportError:
        raise EmbedderError(
            "metaclaw: embedding.backend 'onnx' builds its graph with the onnx package; "
            "pip install 'metaclaw-core[onnx]'"
        ) from None


def build_cached(model_dir: Path, cache_dir: Path | None) -> str | bytes:
    """The graph for ``model_dir``: the cached file's path if built before, else built now
    (needs the ``onnx`` package) and, with a ``cache_dir``, written there atomically."""
    path = cached_graph_path(cache_dir, model_dir) if cache_dir is not None else None
    if path is not None and path.is_file():
        return str(path)
    _require_onnx()
    graph = build_graph(NumpyBert(model_dir))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(graph)
        os.replace(tmp, path)
    return graph


class OnnxBert:
    """``encode(texts)`` like :class:`NumpyBert`, run by an ONNX Runtime session."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        threads: int = 1,
        cache_dir: Path | None = None,
        bert: NumpyBert | None = None,
    ) -> None:
        """``bert``: run this numpy encoder of ``model_dir`` (its matrices, adapted or not),
        its graph built in memory, instead of the model directory's own weights."""
        try:
            import onnxruntime as ort
        except ImportError:
            raise EmbedderError(
                "metaclaw: embedding.backend 'onnx' needs onnxruntime; "
                "pip install 'metaclaw-core[onnx]'"
            ) from None

        self.model_dir = Path(model_dir)
        config, max_len, self.normalise = check_model_dir(self.model_dir)
        self.hidden = int(config["hidden_size"])
        self.tokenizer = load_tokenizer(self.model_dir, max_len)
        if bert is None:
            graph = build_cached(self.model_dir, cache_dir)
        else:
            _require_onnx()
            graph = build_graph(bert)
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, int(threads))
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # no spinning threads between calls: the host's own threads get the cores
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.hidden

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> F32:
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            token_ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        for chunk, ids, mask in padded_batches(token_ids, batch_size, np.int64):
            (pooled,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
            out[chunk] = pooled
        if self.normalise:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, np.float32(1e-12))
        return out
