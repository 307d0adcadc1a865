"""A small fake Tinker server speaking the SDK's protocol (tinker 0.38) on 127.0.0.1.

POST JSON routes under ``/api/v1/``; long operations answer ``{"request_id": ...}`` and the
client polls ``retrieve_future`` (the first poll of each future answers ``try_again``).
``forward_backward`` requests and results, and sample results, are protobuf
(``tinker.proto.tinker_public_pb2``). ``client/config`` turns off the pyqwest transport.

The fake "weights" of a model are its optimiser step count. A sampler samples text that names
the weights it was created from: ``w<steps> s<i>`` in UTF-8 bytes (the tests use
:class:`~metaclaw_core.train.tokenize.ByteTokenizer`), then the end token 257, each token
with logprob -0.5. Every request is recorded for the tests to inspect.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from tinker.proto import tinker_public_pb2 as pb

END = 257


@dataclass
class FakeModel:
    model_id: str
    base_model: str
    rank: int
    steps: int = 0
    pending_grads: int = 0
    fwd_bwd: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FakeTinkerState:
    models: dict[str, FakeModel] = field(default_factory=dict)
    checkpoints: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (base, steps)
    samplers: dict[str, tuple[str, int, str | None]] = field(default_factory=dict)
    futures: dict[str, tuple[str, Any]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    optim: list[dict[str, Any]] = field(default_factory=list)
    ids: Any = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def future(self, kind: str, payload: Any) -> dict[str, Any]:
        rid = f"req-{next(self.ids)}"
        self.futures[rid] = (kind, payload)
        return {"request_id": rid}


def _tokens(model_input: Any) -> list[int]:
    out: list[int] = []
    for chunk in model_input.get("chunks", []):
        out += list(chunk.get("tokens", []))
    return out


def sample_proto(steps: int, num_samples: int, max_tokens: int) -> bytes:
    resp = pb.SampleResponse()
    for i in range(num_samples):
        toks = [*[*f"w{steps} s{i}".encode()][: max(1, max_tokens - 1)], END]
        seq = resp.sequences.add()
        seq.stop_reason = pb.STOP_REASON_STOP
        seq.tokens = np.asarray(toks, dtype=np.int32).tobytes()
        seq.logprobs = np.full(len(toks), -0.5, dtype=np.float32).tobytes()
    return resp.SerializeToString()


def fwd_bwd_proto(datums: list[dict[str, Any]]) -> bytes:
    out = pb.ForwardBackwardOutput()
    out.loss_fn_output_type = "ArrayRecord"
    rec = out.loss_fn_outputs.add()
    rec.num_datums = len(datums)
    bt = rec.fields["logprobs"]
    arrays = [np.full(len(d["target_tokens"]), -0.5, dtype=np.float32) for d in datums]
    offsets = np.cumsum([0] + [a.nbytes for a in arrays]).astype(np.int64)
    bt.data = b"".join(a.tobytes() for a in arrays)
    bt.offsets = offsets.tobytes()
    bt.dtype = pb.DTYPE_FLOAT32
    loss = -sum(
        float(np.dot(d["advantages"], np.exp(np.zeros(len(d["advantages"]))))) for d in datums
    )
    out.metrics["loss:sum"] = loss
    return out.SerializeToString()


def _tensor(t: Any) -> list[float]:
    dtype = np.int64 if t.dtype == pb.DTYPE_INT64 else np.float32
    return np.frombuffer(t.dense, dtype=dtype).tolist()


def decode_fwd_bwd(body: bytes) -> dict[str, Any]:
    req = pb.ForwardBackwardRequest()
    req.ParseFromString(body)
    datums = []
    for d in req.data:
        tokens: list[int] = []
        for chunk in d.model_input:
            tokens += np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist()
        datums.append(
            {
                "model_input": tokens,
                **{name: _tensor(t) for name, t in d.loss_fn_inputs.items()},
            }
        )
    return {
        "model_id": req.model_id,
        "seq_id": req.seq_id,
        "loss_fn": req.loss_fn,
        "forward_only": req.forward_only,
        "data": datums,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeTinkerState

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode())

    def do_GET(self) -> None:
        st = self.state
        path = self.path.split("?")[0]
        st.calls.append(f"GET {path}")
        if path.startswith("/api/v1/samplers/"):
            sid = path.rsplit("/", 1)[1]
            base, _, mpath = st.samplers[sid]
            self._json({"sampler_id": sid, "base_model": base, "model_path": mpath})
            return
        if path == "/api/v1/healthz":
            self._json({"status": "ok"})
            return
        self._json({"detail": f"fake tinker: no route GET {path}"}, 404)

    def do_POST(self) -> None:
        st = self.state
        path = self.path.split("?")[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = path.removeprefix("/api/v1/")
        st.calls.append(route)
        with st.lock:
            try:
                self._route(st, route, raw)
            except Exception as exc:  # surface fake bugs as a clear 400 in the test output
                self._json({"detail": f"fake tinker error in {route}: {exc!r}"}, 400)

    def _route(self, st: FakeTinkerState, route: str, raw: bytes) -> None:
        if route == "forward_backward":
            req = decode_fwd_bwd(raw)
            model = st.models[req["model_id"]]
            model.fwd_bwd.append(req)
            model.pending_grads += 1
            self._json(st.future("fwd_bwd", req["data"]) | {"model_id": model.model_id})
            return
        body = json.loads(raw or b"{}")
        if route == "client/config":
            self._json({"use_pyqwest_transport": False, "sample_enable_stuck_detection": False})
        elif route == "client/dynamic_config":
            self._json({})
        elif route == "create_session":
            self._json({"type": "create_session", "session_id": f"sess-{next(st.ids)}"})
        elif route == "session_heartbeat":
            self._json({"type": "session_heartbeat"})
        elif route == "telemetry":
            self._json({"status": "accepted"})
        elif route == "create_model":
            mid = f"{body['session_id']}:train:{body['model_seq_id']}"
            st.models[mid] = FakeModel(mid, body["base_model"], body["lora_config"]["rank"])
            self._json(st.future("json", {"type": "create_model", "model_id": mid}))
        elif route == "get_info":
            m = st.models[body["model_id"]]
            self._json(
                {
                    "type": "get_info",
                    "model_id": m.model_id,
                    "model_data": {"model_name": m.base_model, "arch": "fake"},
                    "is_lora": True,
                    "lora_rank": m.rank,
                }
            )
        elif route == "optim_step":
            m = st.models[body["model_id"]]
            if m.pending_grads == 0:
                raise ValueError("optim_step without a forward_backward before it")
            m.pending_grads = 0
            m.steps += 1
            st.optim.append(body)
            self._json(st.future("json", {"metrics": {"step:max": float(m.steps)}}))
        elif route == "save_weights":
            m = st.models[body["model_id"]]
            path = f"tinker://{m.model_id}/weights/{body['path']}"
            st.checkpoints[path] = (m.base_model, m.steps)
            self._json(st.future("json", {"type": "save_weights", "path": path}))
        elif route == "save_weights_for_sampler":
            m = st.models[body["model_id"]]
            if body.get("path"):
                path = f"tinker://{m.model_id}/sampler_weights/{body['path']}"
                st.checkpoints[path] = (m.base_model, m.steps)
                self._json(st.future("json", {"type": "save_weights_for_sampler", "path": path}))
            else:
                sid = f"sampler-{next(st.ids)}"
                st.samplers[sid] = (m.base_model, m.steps, None)
                self._json(st.future("json", {"sampling_session_id": sid}))
        elif route == "load_weights":
            base, steps = st.checkpoints[body["path"]]
            mid = f"{body['session_id']}:train:{body['model_seq_id']}"
            st.models[mid] = FakeModel(mid, base, 32, steps=steps)
            self._json(st.future("json", {"type": "load_weights", "path": body["path"]}))
        elif route == "create_sampling_session":
            sid = f"sampler-{next(st.ids)}"
            mpath = body.get("model_path")
            if mpath:
                base, steps = st.checkpoints[mpath]
            else:
                base, steps = body["base_model"], 0
            st.samplers[sid] = (base, steps, mpath)
            self._json({"type": "create_sampling_session", "sampling_session_id": sid})
        elif route == "asample":
            _, steps, _ = st.samplers[body["sampling_session_id"]]
            n = int(body["num_samples"])
            max_tokens = int((body.get("sampling_params") or {}).get("max_tokens") or 16)
            assert _tokens(body["prompt"]), "empty prompt"
            fut = st.future("sample", (steps, n, max_tokens))
            self._json(fut | {"sample_sequence_ids": [f"seq-{next(st.ids)}" for _ in range(n)]})
        elif route == "retrieve_future":
            self._retrieve(st, body["request_id"])
        elif route.startswith("sessions/") and route.endswith("/finish"):
            self._json({})
        else:
            self._json({"detail": f"fake tinker: no route {route}"}, 404)

    def _retrieve(self, st: FakeTinkerState, rid: str) -> None:
        st.polls[rid] = st.polls.get(rid, 0) + 1
        if st.polls[rid] == 1:
            self._json({"type": "try_again", "request_id": rid, "queue_state": "active"})
            return
        kind, payload = st.futures[rid]
        if kind == "json":
            self._json(payload)
        elif kind == "fwd_bwd":
            self._send(200, fwd_bwd_proto(payload), "application/x-protobuf")
        elif kind == "sample":
            self._send(200, sample_proto(*payload), "application/x-protobuf")


class FakeTinkerServer:
    """Start with ``with FakeTinkerServer() as server: ... server.base_url``."""

    def __init__(self) -> None:
        self.state = FakeTinkerState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeTinkerServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
